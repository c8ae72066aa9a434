#include "backend/cpu/conv_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/parallel.h"

namespace kiln::cpu {
namespace {

int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

// Outputs o in [0, out_size) whose input position o*stride + offset lies in
// [0, size): the unpadded part of one kernel tap's row, so the inner loops
// run without bounds checks.
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t offset, int64_t stride, int64_t size, int64_t out_size) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / stride + 1;
  lo = std::min(lo, out_size);
  hi = std::clamp(hi, lo, out_size);
  return {lo, hi};
}

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("kiln::cpu conv/pool: ") + what);
}

// Row kernels shared by im2col/col2im and the depthwise loops. __restrict
// (the rows never overlap) lets GCC vectorize without runtime alias checks.
template <class T>
inline void row_gather(int64_t n, const T* __restrict src, int64_t stride, T* __restrict dst) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i * stride];
  }
}
template <class T>
inline void row_scatter_add(int64_t n, const T* __restrict src, T* __restrict dst, int64_t stride) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * stride] += src[i];
  }
}
// dst[i] += a * src[i * stride]
template <class T>
inline void row_axpy(int64_t n, T a, const T* __restrict src, int64_t stride, T* __restrict dst) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] += a * src[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] += a * src[i * stride];
  }
}
// dst[i * stride] += a * src[i]
template <class T>
inline void row_axpy_scatter(int64_t n, T a, const T* __restrict src, T* __restrict dst,
                             int64_t stride) {
  if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) dst[i] += a * src[i];
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * stride] += a * src[i];
  }
}

// Sizes derived once from Conv2dParams.
struct ConvGeom {
  int64_t N, C_in, H, W, C_out, kH, kW, sh, sw, ph, pw, dh, dw, G;
  int64_t Cg, Cog, Ho, Wo, HW, HWo, kk, col_rows;
  bool pointwise, depthwise;

  explicit ConvGeom(const Conv2dParams& p)
      : N(p.N),
        C_in(p.C_in),
        H(p.H),
        W(p.W),
        C_out(p.C_out),
        kH(p.kH),
        kW(p.kW),
        sh(p.stride_h),
        sw(p.stride_w),
        ph(p.pad_h),
        pw(p.pad_w),
        dh(p.dil_h),
        dw(p.dil_w),
        G(p.groups) {
    require(N >= 0 && C_in >= 0 && H >= 0 && W >= 0 && C_out >= 0, "negative size");
    require(kH > 0 && kW > 0, "kernel size must be positive");
    require(sh > 0 && sw > 0 && dh > 0 && dw > 0, "stride and dilation must be positive");
    require(ph >= 0 && pw >= 0, "padding must be non-negative");
    require(G > 0 && C_in % G == 0 && C_out % G == 0, "channels must divide by groups");
    Cg = C_in / G;
    Cog = C_out / G;
    Ho = std::max<int64_t>(p.H_out(), 0);
    Wo = std::max<int64_t>(p.W_out(), 0);
    HW = H * W;
    HWo = Ho * Wo;
    kk = kH * kW;
    col_rows = Cg * kk;
    // A 1x1 stride-1 unpadded conv reads its input directly as the GEMM operand.
    pointwise = kH == 1 && kW == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
    depthwise = G == C_in && C_out == C_in && C_in > 0;
  }
};

// Note [Conv column chunks]
// The column matrix of a whole image can be many MB (Cg*kH*kW x Ho*Wo), so it
// is built for a band of output rows at a time, about kBudgetBytes, which
// bounds the per-thread buffer and keeps it in L2/L3 while the GEMM reads it.
// Bands keep at least kMinColumns columns: a GEMM with a narrow N runs far
// below peak (measured: 7x7 images cut into 28-column bands ran at 60%).
// A unit of work is one (sample, band) pair.
struct Bands {
  int64_t rows;   // output rows per band
  int64_t count;  // bands per sample
};
template <class T>
Bands column_bands(const ConvGeom& g) {
  constexpr int64_t kBudgetBytes = 2 << 20;
  constexpr int64_t kMinColumns = 512;
  if (g.pointwise || g.Ho == 0 || g.Wo == 0) return {std::max<int64_t>(g.Ho, 1), 1};
  const int64_t row_bytes = g.col_rows * g.Wo * static_cast<int64_t>(sizeof(T));
  const int64_t by_budget = kBudgetBytes / std::max<int64_t>(row_bytes, 1);
  const int64_t by_width = (kMinColumns + g.Wo - 1) / g.Wo;
  const int64_t rows = std::clamp<int64_t>(std::max(by_budget, by_width), 1, g.Ho);
  return {rows, (g.Ho + rows - 1) / rows};
}

// Gathers the receptive fields of channels [c0, c1) of one group's input
// (Cg planes of H x W), for output rows [oh0, oh1), into
// col[c*kk + ki*kW + kj][(oh - oh0)*Wo + ow]; padding reads as 0.
// ld: the distance between col's rows (default: the band's length; the batched
// small-plane path puts several samples side by side, Note [Small planes batch samples]).
template <class T>
void im2col(const ConvGeom& g, const T* in, T* col, int64_t c0, int64_t c1, int64_t oh0,
            int64_t oh1, int64_t ld = 0) {
  const int64_t len = ld ? ld : (oh1 - oh0) * g.Wo;
  for (int64_t c = c0; c < c1; ++c) {
    const T* plane = in + c * g.HW;
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        T* dst = col + ((c * g.kH + ki) * g.kW + kj) * len;
        const int64_t iw_off = kj * g.dw - g.pw;
        const Range r = valid_outputs(iw_off, g.sw, g.W, g.Wo);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          T* d = dst + (oh - oh0) * g.Wo;
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) {
            std::fill(d, d + g.Wo, T(0));
            continue;
          }
          std::fill(d, d + r.lo, T(0));
          row_gather(r.hi - r.lo, plane + ih * g.W + iw_off + r.lo * g.sw, g.sw, d + r.lo);
          std::fill(d + r.hi, d + g.Wo, T(0));
        }
      }
    }
  }
}

// Adjoint of im2col: adds col back into channels [c0, c1) of in (which the
// caller zeroed), overlapping taps accumulating. Channels own disjoint
// planes, so channel ranges can run in parallel; bands of the same sample
// overlap and must not.
template <class T>
void col2im(const ConvGeom& g, const T* col, T* in, int64_t c0, int64_t c1, int64_t oh0,
            int64_t oh1, int64_t ld = 0) {
  const int64_t len = ld ? ld : (oh1 - oh0) * g.Wo;
  for (int64_t c = c0; c < c1; ++c) {
    T* plane = in + c * g.HW;
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        const T* src = col + ((c * g.kH + ki) * g.kW + kj) * len;
        const int64_t iw_off = kj * g.dw - g.pw;
        const Range r = valid_outputs(iw_off, g.sw, g.W, g.Wo);
        for (int64_t oh = oh0; oh < oh1; ++oh) {
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          row_scatter_add(r.hi - r.lo, src + (oh - oh0) * g.Wo + r.lo,
                          plane + ih * g.W + iw_off + r.lo * g.sw, g.sw);
        }
      }
    }
  }
}

// Grain for splitting channels of im2col/col2im: a few thousand elements per chunk.
int64_t channel_grain(const ConvGeom& g, int64_t len) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(g.kk * len, 1));
}

// Note [Conv threading]
// When there are enough work units (samples, or sample x band pairs) to keep
// every thread busy, threads split the units and each owns one column buffer;
// the GEMMs inside then run single-threaded (nested parallel_for is serial,
// and so is gemm() inside a parallel region). Otherwise the units run one
// after another on a single buffer and the threads go to im2col/col2im and
// the GEMM instead. An uneven split (3 units on 2 threads) would idle a thread
// for a third of the time, so it is only taken when units are plentiful.
bool split_units(int64_t units) {
  const int64_t nt = get_num_threads();
  return nt > 1 && !in_parallel_region() && units >= nt && (units % nt == 0 || units >= 4 * nt);
}

// Calls body(u0, u1, scratch) over ranges of [0, units); scratch holds
// scratch_elems elements private to that call.
template <class T, class F>
void for_unit_ranges(int64_t units, int64_t scratch_elems, const F& body) {
  auto run = [&](int64_t u0, int64_t u1) {
    std::unique_ptr<T[]> scratch(new T[static_cast<size_t>(std::max<int64_t>(scratch_elems, 1))]);
    body(u0, u1, scratch.get());
  };
  if (split_units(units)) {
    parallel_for(0, units, 1, run);
  } else {
    run(0, units);
  }
}

// Note [Small planes batch samples]
// When an output plane is small (the last stage of a ResNet at 64x64 inputs has 2x2 planes),
// one sample's GEMM is thin: forward and backward-data multiply by a [Cg*kk, HWo] column
// block with 4 columns, and backward-weight adds a rank-4 product into the whole weight
// gradient once per sample (8 read-modify-writes of 9 MB for a 512->512 3x3 conv). Here the
// column blocks of `S` samples sit side by side, [Cg*kk, S*HWo], so each pass is one GEMM
// with S*HWo columns (or a K of S*HWo for the weight), and the output/grad_output planes are
// gathered or scattered to and from a [Cog, S*HWo] block around it. On the 2-core AVX2
// machine this took a 512->512 3x3 conv on [8, 512, 2, 2] from oneDNN's 13 ms (its gemm
// implementation) and kiln's per-sample 8 ms for the weight gradient to about 3 ms.
constexpr int64_t kBatchedColumns = 512;   // columns per GEMM (Note [Conv column chunks])
constexpr int64_t kBatchedBudget = 8 << 20;  // bytes of the column block

template <class T>
int64_t batched_samples(const ConvGeom& g) {
  if (g.depthwise || g.N < 2 || g.HWo == 0 || g.HWo > kBatchedConvMaxPlane) return 0;
  const int64_t by_columns = std::max<int64_t>(1, kBatchedColumns / g.HWo);
  const int64_t by_budget = kBatchedBudget / std::max<int64_t>(g.col_rows * g.HWo * int64_t(sizeof(T)), 1);
  const int64_t s = std::min({g.N, by_columns, by_budget});
  return s >= 2 ? s : 0;
}

// The column block of samples [n0, n0 + S) of group grp: col[r][s*HWo + o].
template <class T>
void im2col_samples(const ConvGeom& g, const T* input, int64_t grp, int64_t n0, int64_t S, T* col) {
  const int64_t ld = S * g.HWo;
  parallel_for(0, S * g.Cg, std::max<int64_t>(1, channel_grain(g, g.HWo)), [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) {
      const int64_t s = i / g.Cg, c = i % g.Cg;
      const T* in_g = input + ((n0 + s) * g.C_in + grp * g.Cg) * g.HW;
      im2col(g, in_g, col + s * g.HWo, c, c + 1, 0, g.Ho, ld);
    }
  });
}

// Calls body(n0, s_n, grp, col, block) for each batch of up to S samples [n0, n0 + s_n) and
// group: col holds [Cg*kk, s_n*HWo] columns, block [Cog, s_n*HWo] planes, both the caller's to fill.
template <class T, class F>
void for_sample_batches(const ConvGeom& g, int64_t S, const F& body) {
  std::unique_ptr<T[]> col(new T[static_cast<size_t>(g.col_rows * S * g.HWo)]);
  std::unique_ptr<T[]> block(new T[static_cast<size_t>(g.Cog * S * g.HWo)]);
  for (int64_t n0 = 0; n0 < g.N; n0 += S)
    for (int64_t grp = 0; grp < g.G; ++grp) body(n0, std::min(S, g.N - n0), grp, col.get(), block.get());
}

template <class T>
void batched_forward(const ConvGeom& g, int64_t S, const T* input, const T* weight, const T* bias, T* output) {
  for_sample_batches<T>(g, S, [&](int64_t n0, int64_t s_n, int64_t grp, T* col, T* out) {
    const int64_t ld = s_n * g.HWo;
    im2col_samples(g, input, grp, n0, s_n, col);
    gemm<T>(false, false, g.Cog, ld, g.col_rows, T(1), weight + grp * g.Cog * g.col_rows, g.col_rows, col, ld, T(0),
            out, ld);
    for (int64_t s = 0; s < s_n; ++s)
      for (int64_t co = 0; co < g.Cog; ++co) {
        const T* src = out + co * ld + s * g.HWo;
        T* dst = output + ((n0 + s) * g.C_out + grp * g.Cog + co) * g.HWo;
        const T b = bias ? bias[grp * g.Cog + co] : T(0);
        for (int64_t o = 0; o < g.HWo; ++o) dst[o] = src[o] + b;
      }
  });
}

// grad_output's planes of samples [n0, n0 + S), group grp, as a [Cog, S*HWo] block.
template <class T>
void gather_planes(const ConvGeom& g, const T* grad_output, int64_t grp, int64_t n0, int64_t S, T* block) {
  const int64_t ld = S * g.HWo;
  for (int64_t s = 0; s < S; ++s)
    for (int64_t co = 0; co < g.Cog; ++co) {
      const T* src = grad_output + ((n0 + s) * g.C_out + grp * g.Cog + co) * g.HWo;
      std::copy(src, src + g.HWo, block + co * ld + s * g.HWo);
    }
}

template <class T>
void batched_backward_input(const ConvGeom& g, int64_t S, const T* grad_output, const T* weight, T* grad_input) {
  std::fill(grad_input, grad_input + g.N * g.C_in * g.HW, T(0));
  for_sample_batches<T>(g, S, [&](int64_t n0, int64_t s_n, int64_t grp, T* col, T* gy) {
    const int64_t ld = s_n * g.HWo;
    gather_planes(g, grad_output, grp, n0, s_n, gy);
    // cols = W_g^T [Cg*kk, Cog] @ grad_out block [Cog, S*HWo]
    gemm<T>(true, false, g.col_rows, ld, g.Cog, T(1), weight + grp * g.Cog * g.col_rows, g.col_rows, gy, ld, T(0), col,
            ld);
    // Each (sample, channel) owns its input plane: no two tasks add into the same one.
    parallel_for(0, s_n * g.Cg, std::max<int64_t>(1, channel_grain(g, g.HWo)), [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) {
        const int64_t s = i / g.Cg, c = i % g.Cg;
        T* gx_g = grad_input + ((n0 + s) * g.C_in + grp * g.Cg) * g.HW;
        col2im(g, static_cast<const T*>(col + s * g.HWo), gx_g, c, c + 1, 0, g.Ho, ld);
      }
    });
  });
}

template <class T>
void batched_backward_weight(const ConvGeom& g, int64_t S, const T* grad_output, const T* input, T* grad_weight) {
  for_sample_batches<T>(g, S, [&](int64_t n0, int64_t s_n, int64_t grp, T* col, T* gy) {
    const int64_t ld = s_n * g.HWo;
    im2col_samples(g, input, grp, n0, s_n, col);
    gather_planes(g, grad_output, grp, n0, s_n, gy);
    // grad_w_g (+)= grad_out block [Cog, S*HWo] @ cols^T [S*HWo, Cg*kk]
    gemm<T>(false, true, g.Cog, g.col_rows, ld, T(1), gy, ld, col, ld, n0 == 0 ? T(0) : T(1),
            grad_weight + grp * g.Cog * g.col_rows, g.col_rows);
  });
}

// --- Depthwise (groups == C_in == C_out): direct loops, one plane at a time.
// im2col would multiply the memory traffic by kH*kW for a GEMM with M = 1.

int64_t plane_grain(const ConvGeom& g) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(g.HWo * g.kk, 1));
}

// Valid output columns per kernel column kj. They do not depend on the row,
// and recomputing them (two divisions) per row and tap cost more than the
// row's arithmetic.
std::vector<Range> tap_columns(const ConvGeom& g) {
  std::vector<Range> cols(static_cast<size_t>(g.kW));
  for (int64_t kj = 0; kj < g.kW; ++kj) cols[kj] = valid_outputs(kj * g.dw - g.pw, g.sw, g.W, g.Wo);
  return cols;
}

template <class T>
void depthwise_forward(const ConvGeom& g, const T* input, const T* weight, const T* bias,
                       T* output) {
  const std::vector<Range> cols = tap_columns(g);
  parallel_for(0, g.N * g.C_in, plane_grain(g), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const int64_t c = pl % g.C_in;
      const T* x = input + pl * g.HW;
      const T* w = weight + c * g.kk;
      // Each output row gets all its taps while it is hot in L1.
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        T* y = output + pl * g.HWo + oh * g.Wo;
        std::fill(y, y + g.Wo, bias ? bias[c] : T(0));
        for (int64_t ki = 0; ki < g.kH; ++ki) {
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t kj = 0; kj < g.kW; ++kj) {
            const int64_t iw_off = kj * g.dw - g.pw;
            const Range r = cols[kj];
            row_axpy(r.hi - r.lo, w[ki * g.kW + kj], x + ih * g.W + iw_off + r.lo * g.sw, g.sw,
                     y + r.lo);
          }
        }
      }
    }
  });
}

template <class T>
void depthwise_backward_input(const ConvGeom& g, const T* grad_output, const T* weight,
                              T* grad_input) {
  const std::vector<Range> cols = tap_columns(g);
  parallel_for(0, g.N * g.C_in, plane_grain(g), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const int64_t c = pl % g.C_in;
      const T* w = weight + c * g.kk;
      T* gx = grad_input + pl * g.HW;
      std::fill(gx, gx + g.HW, T(0));
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        const T* gy = grad_output + pl * g.HWo + oh * g.Wo;
        for (int64_t ki = 0; ki < g.kH; ++ki) {
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          for (int64_t kj = 0; kj < g.kW; ++kj) {
            const int64_t iw_off = kj * g.dw - g.pw;
            const Range r = cols[kj];
            row_axpy_scatter(r.hi - r.lo, w[ki * g.kW + kj], gy + r.lo,
                             gx + ih * g.W + iw_off + r.lo * g.sw, g.sw);
          }
        }
      }
    }
  });
}

template <class T>
void depthwise_backward_weight(const ConvGeom& g, const T* grad_output, const T* input,
                               T* grad_weight) {
  const std::vector<Range> cols = tap_columns(g);
  // One channel per task: its taps sum over the whole batch, so threads need
  // no reduction. Products accumulate elementwise into a row of partial sums
  // (a scalar running sum would not vectorize without -ffast-math) that is
  // reduced once per tap.
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(g.N * g.HWo * g.kk, 1));
  parallel_for(0, g.C_in, grain, [&](int64_t c0, int64_t c1) {
    std::vector<T> acc(static_cast<size_t>(g.kk * g.Wo));
    for (int64_t c = c0; c < c1; ++c) {
      std::fill(acc.begin(), acc.end(), T(0));
      for (int64_t n = 0; n < g.N; ++n) {
        const T* x = input + (n * g.C_in + c) * g.HW;
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const T* gy = grad_output + (n * g.C_in + c) * g.HWo + oh * g.Wo;
          for (int64_t ki = 0; ki < g.kH; ++ki) {
            const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
            if (ih < 0 || ih >= g.H) continue;
            for (int64_t kj = 0; kj < g.kW; ++kj) {
              const int64_t iw_off = kj * g.dw - g.pw;
              const Range r = cols[kj];
              T* a = acc.data() + (ki * g.kW + kj) * g.Wo + r.lo;
              const T* s = x + ih * g.W + iw_off + r.lo * g.sw;
              const T* d = gy + r.lo;
              const int64_t len = r.hi - r.lo;
              if (g.sw == 1) {
                for (int64_t i = 0; i < len; ++i) a[i] += d[i] * s[i];
              } else {
                for (int64_t i = 0; i < len; ++i) a[i] += d[i] * s[i * g.sw];
              }
            }
          }
        }
      }
      for (int64_t t = 0; t < g.kk; ++t) {
        T total = 0;
        for (int64_t i = 0; i < g.Wo; ++i) total += acc[t * g.Wo + i];
        grad_weight[c * g.kk + t] = total;
      }
    }
  });
}

}  // namespace

int64_t Conv2dParams::H_out() const {
  return floor_div(H + 2 * pad_h - dil_h * (kH - 1) - 1, stride_h) + 1;
}
int64_t Conv2dParams::W_out() const {
  return floor_div(W + 2 * pad_w - dil_w * (kW - 1) - 1, stride_w) + 1;
}

template <class T>
void conv2d_forward(const Conv2dParams& p, const T* input, const T* weight, const T* bias,
                    T* output) {
  const ConvGeom g(p);
  if (g.N == 0 || g.C_out == 0 || g.HWo == 0) return;
  if (g.depthwise) {
    depthwise_forward(g, input, weight, bias, output);
    return;
  }
  if (const int64_t S = batched_samples<T>(g)) {
    batched_forward(g, S, input, weight, bias, output);
    return;
  }
  const Bands bands = column_bands<T>(g);
  const int64_t scratch = g.pointwise ? 0 : g.col_rows * bands.rows * g.Wo;
  for_unit_ranges<T>(g.N * bands.count, scratch, [&](int64_t u0, int64_t u1, T* col) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t n = u / bands.count;
      const int64_t oh0 = u % bands.count * bands.rows;
      const int64_t oh1 = std::min(g.Ho, oh0 + bands.rows);
      const int64_t len = (oh1 - oh0) * g.Wo;
      for (int64_t grp = 0; grp < g.G; ++grp) {
        const T* in_g = input + (n * g.C_in + grp * g.Cg) * g.HW;
        T* out_g = output + (n * g.C_out + grp * g.Cog) * g.HWo + oh0 * g.Wo;
        const T* w_g = weight + grp * g.Cog * g.col_rows;
        // Bias is written first and the GEMM accumulates onto it (beta = 1),
        // saving a second pass over the output.
        T beta = T(0);
        if (bias) {
          for (int64_t co = 0; co < g.Cog; ++co)
            std::fill(out_g + co * g.HWo, out_g + co * g.HWo + len, bias[grp * g.Cog + co]);
          beta = T(1);
        }
        // Pointwise: the input rows are the columns (H == Ho, W == Wo).
        const T* cols = in_g + oh0 * g.Wo;
        int64_t ld_cols = g.HW;
        if (!g.pointwise) {
          parallel_for(0, g.Cg, channel_grain(g, len),
                       [&](int64_t c0, int64_t c1) { im2col(g, in_g, col, c0, c1, oh0, oh1); });
          cols = col;
          ld_cols = len;
        }
        gemm<T>(false, false, g.Cog, len, g.col_rows, T(1), w_g, g.col_rows, cols, ld_cols, beta,
                out_g, g.HWo);
      }
    }
  });
}

template <class T>
void conv2d_backward_input(const Conv2dParams& p, const T* grad_output, const T* weight,
                           T* grad_input) {
  const ConvGeom g(p);
  if (g.N == 0 || g.C_in == 0 || g.HW == 0) return;
  if (g.HWo == 0 || g.C_out == 0) {
    std::fill(grad_input, grad_input + g.N * g.C_in * g.HW, T(0));
    return;
  }
  if (g.depthwise) {
    depthwise_backward_input(g, grad_output, weight, grad_input);
    return;
  }
  if (const int64_t S = batched_samples<T>(g)) {
    batched_backward_input(g, S, grad_output, weight, grad_input);
    return;
  }
  // Bands of one sample scatter into overlapping input rows, so the unit of
  // parallel work here is a whole sample; its bands run in order.
  const Bands bands = column_bands<T>(g);
  const int64_t scratch = g.pointwise ? 0 : g.col_rows * bands.rows * g.Wo;
  for_unit_ranges<T>(g.N, scratch, [&](int64_t n0, int64_t n1, T* col) {
    for (int64_t n = n0; n < n1; ++n) {
      T* gx = grad_input + n * g.C_in * g.HW;
      for (int64_t grp = 0; grp < g.G; ++grp) {
        const T* gy_g = grad_output + (n * g.C_out + grp * g.Cog) * g.HWo;
        T* gx_g = gx + grp * g.Cg * g.HW;
        const T* w_g = weight + grp * g.Cog * g.col_rows;
        if (g.pointwise) {
          // grad_in_g = W_g^T @ grad_out_g, written directly.
          gemm<T>(true, false, g.Cg, g.HW, g.Cog, T(1), w_g, g.Cg, gy_g, g.HWo, T(0), gx_g, g.HW);
          continue;
        }
        std::fill(gx_g, gx_g + g.Cg * g.HW, T(0));
        for (int64_t b = 0; b < bands.count; ++b) {
          const int64_t oh0 = b * bands.rows, oh1 = std::min(g.Ho, oh0 + bands.rows);
          const int64_t len = (oh1 - oh0) * g.Wo;
          // cols = W_g^T [Cg*kk, Cog] @ grad_out_g[:, band]
          gemm<T>(true, false, g.col_rows, len, g.Cog, T(1), w_g, g.col_rows, gy_g + oh0 * g.Wo,
                  g.HWo, T(0), col, len);
          parallel_for(0, g.Cg, channel_grain(g, len), [&](int64_t c0, int64_t c1) {
            col2im(g, static_cast<const T*>(col), gx_g, c0, c1, oh0, oh1);
          });
        }
      }
    }
  });
}

template <class T>
void conv2d_backward_weight(const Conv2dParams& p, const T* grad_output, const T* input,
                            T* grad_weight) {
  const ConvGeom g(p);
  const int64_t w_elems = g.C_out * g.col_rows;
  if (w_elems == 0) return;
  if (g.N == 0 || g.HWo == 0) {
    std::fill(grad_weight, grad_weight + w_elems, T(0));
    return;
  }
  if (g.depthwise) {
    depthwise_backward_weight(g, grad_output, input, grad_weight);
    return;
  }
  if (const int64_t S = batched_samples<T>(g)) {
    batched_backward_weight(g, S, grad_output, input, grad_weight);
    return;
  }
  // Each range of units sums into its own weight-shaped accumulator (the
  // caller's buffer when units are not split); partial sums are then added in
  // unit order, so the result does not depend on thread timing.
  const Bands bands = column_bands<T>(g);
  const int64_t units = g.N * bands.count;
  const bool split = split_units(units);
  std::vector<std::unique_ptr<T[]>> partials(split ? static_cast<size_t>(units) : 0);
  const int64_t scratch = g.pointwise ? 0 : g.col_rows * bands.rows * g.Wo;
  for_unit_ranges<T>(units, scratch, [&](int64_t u0, int64_t u1, T* col) {
    T* acc = grad_weight;
    if (split) {
      partials[u0].reset(new T[static_cast<size_t>(w_elems)]);
      acc = partials[u0].get();
    }
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t n = u / bands.count;
      const int64_t oh0 = u % bands.count * bands.rows;
      const int64_t oh1 = std::min(g.Ho, oh0 + bands.rows);
      const int64_t len = (oh1 - oh0) * g.Wo;
      for (int64_t grp = 0; grp < g.G; ++grp) {
        const T* gy_g = grad_output + (n * g.C_out + grp * g.Cog) * g.HWo + oh0 * g.Wo;
        const T* x_g = input + (n * g.C_in + grp * g.Cg) * g.HW;
        T* gw_g = acc + grp * g.Cog * g.col_rows;
        const T* cols = x_g + oh0 * g.Wo;
        int64_t ld_cols = g.HW;
        if (!g.pointwise) {
          parallel_for(0, g.Cg, channel_grain(g, len),
                       [&](int64_t c0, int64_t c1) { im2col(g, x_g, col, c0, c1, oh0, oh1); });
          cols = col;
          ld_cols = len;
        }
        // grad_w_g (+)= grad_out_g[:, band] [Cog, len] @ cols^T [len, Cg*kk]
        gemm<T>(false, true, g.Cog, g.col_rows, len, T(1), gy_g, g.HWo, cols, ld_cols,
                u == u0 ? T(0) : T(1), gw_g, g.col_rows);
      }
    }
  });
  if (split) {
    bool first = true;
    for (auto& part : partials) {
      if (!part) continue;
      const T* src = part.get();
      parallel_for(0, w_elems, 4096, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) grad_weight[i] = first ? src[i] : grad_weight[i] + src[i];
      });
      first = false;
    }
  }
}

// --- Pooling ---

namespace {

int64_t pool_out_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil,
                      bool ceil_mode) {
  int64_t out =
      floor_div(in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0), stride) + 1;
  // In ceil mode the last window must start inside the input or left padding.
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

struct PoolGeom {
  int64_t planes, H, W, Ho, Wo, HW, HWo;
  explicit PoolGeom(const Pool2dParams& p)
      : planes(p.N * p.C),
        H(p.H),
        W(p.W),
        Ho(std::max<int64_t>(p.H_out(), 0)),
        Wo(std::max<int64_t>(p.W_out(), 0)),
        HW(p.H * p.W),
        HWo(Ho * Wo) {
    require(p.N >= 0 && p.C >= 0 && p.H >= 0 && p.W >= 0, "negative size");
    require(p.kH > 0 && p.kW > 0, "kernel size must be positive");
    require(p.stride_h > 0 && p.stride_w > 0 && p.dil_h > 0 && p.dil_w > 0,
            "stride and dilation must be positive");
    // PyTorch's rule; it also guarantees that no window lies wholly in padding.
    require(p.pad_h >= 0 && p.pad_w >= 0 && p.pad_h <= p.kH / 2 && p.pad_w <= p.kW / 2,
            "padding must be between 0 and half the kernel size");
  }
};

int64_t pool_grain(const PoolGeom& g, const Pool2dParams& p) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(g.HWo * p.kH * p.kW, 1));
}

// Avg-pool window of output (oh, ow): clipped bounds plus the divisor, with
// PyTorch's semantics (count_include_pad counts padding but not the part of a
// ceil-mode window hanging past the padded input).
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};
AvgWindow avg_window(const Pool2dParams& p, int64_t oh, int64_t ow) {
  int64_t h0 = oh * p.stride_h - p.pad_h, w0 = ow * p.stride_w - p.pad_w;
  int64_t h1 = std::min(h0 + p.kH, p.H + p.pad_h), w1 = std::min(w0 + p.kW, p.W + p.pad_w);
  const int64_t padded_size = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, p.H);
  w1 = std::min(w1, p.W);
  int64_t divisor = p.divisor_override    ? p.divisor_override
                    : p.count_include_pad ? padded_size
                                          : (h1 - h0) * (w1 - w0);
  return {h0, h1, w0, w1, divisor};
}

void require_avg(const Pool2dParams& p) {
  require(p.dil_h == 1 && p.dil_w == 1, "avg pool does not support dilation");
}

}  // namespace

int64_t Pool2dParams::H_out() const {
  return pool_out_size(H, kH, pad_h, stride_h, dil_h, ceil_mode);
}
int64_t Pool2dParams::W_out() const {
  return pool_out_size(W, kW, pad_w, stride_w, dil_w, ceil_mode);
}

template <class T>
void max_pool2d_forward(const Pool2dParams& p, const T* in, T* out, int64_t* indices) {
  const PoolGeom g(p);
  parallel_for(0, g.planes, pool_grain(g, p), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* x = in + pl * g.HW;
      T* y = out + pl * g.HWo;
      int64_t* idx = indices + pl * g.HWo;
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        int64_t h0 = oh * p.stride_h - p.pad_h;
        const int64_t h1 = std::min(h0 + (p.kH - 1) * p.dil_h + 1, g.H);
        while (h0 < 0) h0 += p.dil_h;
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          int64_t w0 = ow * p.stride_w - p.pad_w;
          const int64_t w1 = std::min(w0 + (p.kW - 1) * p.dil_w + 1, g.W);
          while (w0 < 0) w0 += p.dil_w;
          T best = -std::numeric_limits<T>::infinity();
          int64_t best_i = h0 * g.W + w0;
          for (int64_t ih = h0; ih < h1; ih += p.dil_h) {
            for (int64_t iw = w0; iw < w1; iw += p.dil_w) {
              const T v = x[ih * g.W + iw];
              if (v > best || std::isnan(v)) {
                best = v;
                best_i = ih * g.W + iw;
              }
            }
          }
          y[oh * g.Wo + ow] = best;
          idx[oh * g.Wo + ow] = best_i;
        }
      }
    }
  });
}

template <class T>
void max_pool2d_backward(const Pool2dParams& p, const T* grad_out, const int64_t* indices,
                         T* grad_in) {
  const PoolGeom g(p);
  parallel_for(0, g.planes, pool_grain(g, p), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      T* gx = grad_in + pl * g.HW;
      const T* gy = grad_out + pl * g.HWo;
      const int64_t* idx = indices + pl * g.HWo;
      std::fill(gx, gx + g.HW, T(0));
      for (int64_t o = 0; o < g.HWo; ++o) {
        // Indices come from max_pool2d_forward; the range check only guards
        // against a corrupted index tensor writing out of bounds.
        if (idx[o] >= 0 && idx[o] < g.HW) gx[idx[o]] += gy[o];
      }
    }
  });
}

template <class T>
void avg_pool2d_forward(const Pool2dParams& p, const T* in, T* out) {
  require_avg(p);
  const PoolGeom g(p);
  parallel_for(0, g.planes, pool_grain(g, p), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* x = in + pl * g.HW;
      T* y = out + pl * g.HWo;
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          const AvgWindow w = avg_window(p, oh, ow);
          if (w.h0 >= w.h1 || w.w0 >= w.w1) {
            y[oh * g.Wo + ow] = T(0);
            continue;
          }
          T sum = 0;
          for (int64_t ih = w.h0; ih < w.h1; ++ih)
            for (int64_t iw = w.w0; iw < w.w1; ++iw) sum += x[ih * g.W + iw];
          y[oh * g.Wo + ow] = sum / static_cast<T>(w.divisor);
        }
      }
    }
  });
}

template <class T>
void avg_pool2d_backward(const Pool2dParams& p, const T* grad_out, T* grad_in) {
  require_avg(p);
  const PoolGeom g(p);
  parallel_for(0, g.planes, pool_grain(g, p), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      T* gx = grad_in + pl * g.HW;
      const T* gy = grad_out + pl * g.HWo;
      std::fill(gx, gx + g.HW, T(0));
      for (int64_t oh = 0; oh < g.Ho; ++oh) {
        for (int64_t ow = 0; ow < g.Wo; ++ow) {
          const AvgWindow w = avg_window(p, oh, ow);
          if (w.h0 >= w.h1 || w.w0 >= w.w1) continue;
          const T share = gy[oh * g.Wo + ow] / static_cast<T>(w.divisor);
          for (int64_t ih = w.h0; ih < w.h1; ++ih)
            for (int64_t iw = w.w0; iw < w.w1; ++iw) gx[ih * g.W + iw] += share;
        }
      }
    }
  });
}

#define KILN_INSTANTIATE_CONV(T)                                                           \
  template void conv2d_forward<T>(const Conv2dParams&, const T*, const T*, const T*, T*);  \
  template void conv2d_backward_input<T>(const Conv2dParams&, const T*, const T*, T*);     \
  template void conv2d_backward_weight<T>(const Conv2dParams&, const T*, const T*, T*);    \
  template void max_pool2d_forward<T>(const Pool2dParams&, const T*, T*, int64_t*);        \
  template void max_pool2d_backward<T>(const Pool2dParams&, const T*, const int64_t*, T*); \
  template void avg_pool2d_forward<T>(const Pool2dParams&, const T*, T*);                  \
  template void avg_pool2d_backward<T>(const Pool2dParams&, const T*, T*);

KILN_INSTANTIATE_CONV(float)
KILN_INSTANTIATE_CONV(double)

#undef KILN_INSTANTIATE_CONV

}  // namespace kiln::cpu
