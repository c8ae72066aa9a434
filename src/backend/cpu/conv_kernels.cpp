#include "backend/cpu/conv_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

// Sizes derived once from Conv2dParams.
struct ConvGeom {
  int64_t N, C_in, H, W, C_out, kH, kW, sh, sw, ph, pw, dh, dw, G;
  int64_t Cg, Cog, Ho, Wo, HW, HWo, kk, col_rows;
  bool pointwise, depthwise;

  explicit ConvGeom(const Conv2dParams& p)
      : N(p.N), C_in(p.C_in), H(p.H), W(p.W), C_out(p.C_out), kH(p.kH), kW(p.kW),
        sh(p.stride_h), sw(p.stride_w), ph(p.pad_h), pw(p.pad_w), dh(p.dil_h), dw(p.dil_w),
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

// Gathers the receptive fields of channels [c0, c1) of one group's input
// (Cg planes of H x W) into col[c*kk + ki*kW + kj][oh*Wo + ow]; padding is 0.
template <class T>
void im2col(const ConvGeom& g, const T* in, T* col, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; ++c) {
    const T* plane = in + c * g.HW;
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        T* dst = col + ((c * g.kH + ki) * g.kW + kj) * g.HWo;
        const int64_t iw_off = kj * g.dw - g.pw;
        const Range r = valid_outputs(iw_off, g.sw, g.W, g.Wo);
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          T* d = dst + oh * g.Wo;
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) {
            std::fill(d, d + g.Wo, T(0));
            continue;
          }
          const T* src = plane + ih * g.W + iw_off;
          std::fill(d, d + r.lo, T(0));
          if (g.sw == 1) {
            std::copy(src + r.lo, src + r.hi, d + r.lo);
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] = src[ow * g.sw];
          }
          std::fill(d + r.hi, d + g.Wo, T(0));
        }
      }
    }
  }
}

// Adjoint of im2col: scatters col back into channels [c0, c1) of in,
// accumulating overlapping taps. Channels own disjoint planes, so ranges of
// channels can run in parallel.
template <class T>
void col2im(const ConvGeom& g, const T* col, T* in, int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; ++c) {
    T* plane = in + c * g.HW;
    std::fill(plane, plane + g.HW, T(0));
    for (int64_t ki = 0; ki < g.kH; ++ki) {
      for (int64_t kj = 0; kj < g.kW; ++kj) {
        const T* src = col + ((c * g.kH + ki) * g.kW + kj) * g.HWo;
        const int64_t iw_off = kj * g.dw - g.pw;
        const Range r = valid_outputs(iw_off, g.sw, g.W, g.Wo);
        for (int64_t oh = 0; oh < g.Ho; ++oh) {
          const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
          if (ih < 0 || ih >= g.H) continue;
          T* d = plane + ih * g.W + iw_off;
          const T* s = src + oh * g.Wo;
          if (g.sw == 1) {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] += s[ow];
          } else {
            for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow * g.sw] += s[ow];
          }
        }
      }
    }
  }
}

// Grain for splitting channels of im2col/col2im: a few thousand elements per chunk.
int64_t channel_grain(const ConvGeom& g) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(g.kk * g.HWo, 1));
}

// Note [Conv threading]
// With enough samples, threads split the batch and each owns one column
// buffer; the GEMMs inside then run single-threaded (nested parallel_for is
// serial, and gemm() uses the own kernel inside a parallel region). With few
// samples the batch runs serially on one column buffer and the threads go to
// im2col/col2im and the GEMM instead.
bool split_batch(int64_t N) {
  const int64_t nt = get_num_threads();
  return nt > 1 && !in_parallel_region() && N >= nt && (N % nt == 0 || N >= 4 * nt);
}

// Calls body(n0, n1, scratch) over ranges of samples, with scratch holding at
// least scratch_elems elements that the range may use freely.
template <class T, class F>
void for_sample_ranges(int64_t N, int64_t scratch_elems, const F& body) {
  if (split_batch(N)) {
    parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
      std::unique_ptr<T[]> scratch(new T[static_cast<size_t>(scratch_elems)]);
      body(n0, n1, scratch.get());
    });
  } else {
    std::unique_ptr<T[]> scratch(new T[static_cast<size_t>(scratch_elems)]);
    body(0, N, scratch.get());
  }
}

// --- Depthwise (groups == C_in == C_out): direct loops, one plane at a time.
// im2col would multiply the memory traffic by kH*kW for a GEMM with M = 1.

template <class T>
void depthwise_forward(const ConvGeom& g, const T* input, const T* weight, const T* bias,
                       T* output) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(g.HWo * g.kk, 1));
  parallel_for(0, g.N * g.C_in, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const int64_t c = pl % g.C_in;
      const T* x = input + pl * g.HW;
      T* y = output + pl * g.HWo;
      const T* w = weight + c * g.kk;
      std::fill(y, y + g.HWo, bias ? bias[c] : T(0));
      for (int64_t ki = 0; ki < g.kH; ++ki) {
        for (int64_t kj = 0; kj < g.kW; ++kj) {
          const T wv = w[ki * g.kW + kj];
          const int64_t iw_off = kj * g.dw - g.pw;
          const Range r = valid_outputs(iw_off, g.sw, g.W, g.Wo);
          for (int64_t oh = 0; oh < g.Ho; ++oh) {
            const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
            if (ih < 0 || ih >= g.H) continue;
            const T* s = x + ih * g.W + iw_off;
            T* d = y + oh * g.Wo;
            if (g.sw == 1) {
              for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] += wv * s[ow];
            } else {
              for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] += wv * s[ow * g.sw];
            }
          }
        }
      }
    }
  });
}

template <class T>
void depthwise_backward_input(const ConvGeom& g, const T* grad_output, const T* weight,
                              T* grad_input) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(g.HWo * g.kk, 1));
  parallel_for(0, g.N * g.C_in, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const int64_t c = pl % g.C_in;
      const T* gy = grad_output + pl * g.HWo;
      T* gx = grad_input + pl * g.HW;
      const T* w = weight + c * g.kk;
      std::fill(gx, gx + g.HW, T(0));
      for (int64_t ki = 0; ki < g.kH; ++ki) {
        for (int64_t kj = 0; kj < g.kW; ++kj) {
          const T wv = w[ki * g.kW + kj];
          const int64_t iw_off = kj * g.dw - g.pw;
          const Range r = valid_outputs(iw_off, g.sw, g.W, g.Wo);
          for (int64_t oh = 0; oh < g.Ho; ++oh) {
            const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
            if (ih < 0 || ih >= g.H) continue;
            T* d = gx + ih * g.W + iw_off;
            const T* s = gy + oh * g.Wo;
            if (g.sw == 1) {
              for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow] += wv * s[ow];
            } else {
              for (int64_t ow = r.lo; ow < r.hi; ++ow) d[ow * g.sw] += wv * s[ow];
            }
          }
        }
      }
    }
  });
}

template <class T>
void depthwise_backward_weight(const ConvGeom& g, const T* grad_output, const T* input,
                               T* grad_weight) {
  // One channel per task: its taps sum over the whole batch, so no reduction
  // across threads is needed.
  const int64_t grain =
      std::max<int64_t>(1, 16384 / std::max<int64_t>(g.N * g.HWo * g.kk, 1));
  parallel_for(0, g.C_in, grain, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t ki = 0; ki < g.kH; ++ki) {
        for (int64_t kj = 0; kj < g.kW; ++kj) {
          const int64_t iw_off = kj * g.dw - g.pw;
          const Range r = valid_outputs(iw_off, g.sw, g.W, g.Wo);
          T total = 0;
          for (int64_t n = 0; n < g.N; ++n) {
            const T* x = input + (n * g.C_in + c) * g.HW;
            const T* gy = grad_output + (n * g.C_in + c) * g.HWo;
            for (int64_t oh = 0; oh < g.Ho; ++oh) {
              const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              const T* s = x + ih * g.W + iw_off;
              const T* d = gy + oh * g.Wo;
              T row = 0;  // per-row partial sums keep float rounding error small
              if (g.sw == 1) {
                for (int64_t ow = r.lo; ow < r.hi; ++ow) row += d[ow] * s[ow];
              } else {
                for (int64_t ow = r.lo; ow < r.hi; ++ow) row += d[ow] * s[ow * g.sw];
              }
              total += row;
            }
          }
          grad_weight[c * g.kk + ki * g.kW + kj] = total;
        }
      }
    }
  });
}

// --- General path: im2col / col2im + GEMM per sample and group.

template <class T>
void im2col_maybe_parallel(const ConvGeom& g, const T* in, T* col) {
  parallel_for(0, g.Cg, channel_grain(g),
               [&](int64_t c0, int64_t c1) { im2col(g, in, col, c0, c1); });
}

template <class T>
void col2im_maybe_parallel(const ConvGeom& g, const T* col, T* in) {
  parallel_for(0, g.Cg, channel_grain(g),
               [&](int64_t c0, int64_t c1) { col2im(g, col, in, c0, c1); });
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
  const int64_t scratch = g.pointwise ? 1 : g.col_rows * g.HWo;
  for_sample_ranges<T>(g.N, scratch, [&](int64_t n0, int64_t n1, T* col) {
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t grp = 0; grp < g.G; ++grp) {
        const T* in_g = input + (n * g.C_in + grp * g.Cg) * g.HW;
        T* out_g = output + (n * g.C_out + grp * g.Cog) * g.HWo;
        const T* w_g = weight + grp * g.Cog * g.col_rows;
        // Bias is written first and the GEMM accumulates onto it (beta = 1),
        // saving a second pass over the output.
        T beta = T(0);
        if (bias) {
          for (int64_t co = 0; co < g.Cog; ++co)
            std::fill(out_g + co * g.HWo, out_g + (co + 1) * g.HWo, bias[grp * g.Cog + co]);
          beta = T(1);
        }
        const T* cols = in_g;
        if (!g.pointwise) {
          im2col_maybe_parallel(g, in_g, col);
          cols = col;
        }
        gemm<T>(false, false, g.Cog, g.HWo, g.col_rows, T(1), w_g, g.col_rows, cols, g.HWo,
                beta, out_g, g.HWo);
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
  const int64_t scratch = g.pointwise ? 1 : g.col_rows * g.HWo;
  for_sample_ranges<T>(g.N, scratch, [&](int64_t n0, int64_t n1, T* col) {
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t grp = 0; grp < g.G; ++grp) {
        const T* gy_g = grad_output + (n * g.C_out + grp * g.Cog) * g.HWo;
        T* gx_g = grad_input + (n * g.C_in + grp * g.Cg) * g.HW;
        const T* w_g = weight + grp * g.Cog * g.col_rows;
        // cols = W_g^T @ grad_out_g; for a pointwise conv cols *is* grad_in_g.
        T* cols = g.pointwise ? gx_g : col;
        gemm<T>(true, false, g.col_rows, g.HWo, g.Cog, T(1), w_g, g.col_rows, gy_g, g.HWo,
                T(0), cols, g.HWo);
        if (!g.pointwise) col2im_maybe_parallel(g, static_cast<const T*>(col), gx_g);
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
  // Each sample range sums into its own weight-shaped accumulator (the caller's
  // buffer when the batch is not split); partial sums are added in sample
  // order so the result does not depend on thread timing.
  const bool split = split_batch(g.N);
  std::vector<std::unique_ptr<T[]>> partials(split ? static_cast<size_t>(g.N) : 0);
  const int64_t scratch = g.pointwise ? 1 : g.col_rows * g.HWo;
  for_sample_ranges<T>(g.N, scratch, [&](int64_t n0, int64_t n1, T* col) {
    T* acc = grad_weight;
    if (split) {
      partials[n0].reset(new T[static_cast<size_t>(w_elems)]);
      acc = partials[n0].get();
    }
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t grp = 0; grp < g.G; ++grp) {
        const T* gy_g = grad_output + (n * g.C_out + grp * g.Cog) * g.HWo;
        const T* x_g = input + (n * g.C_in + grp * g.Cg) * g.HW;
        T* gw_g = acc + grp * g.Cog * g.col_rows;
        const T* cols = x_g;
        if (!g.pointwise) {
          im2col_maybe_parallel(g, x_g, col);
          cols = col;
        }
        // grad_w_g (+)= grad_out_g [Cog, HWo] @ cols^T [HWo, Cg*kk]
        gemm<T>(false, true, g.Cog, g.col_rows, g.HWo, T(1), gy_g, g.HWo, cols, g.HWo,
                n == n0 ? T(0) : T(1), gw_g, g.col_rows);
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
      : planes(p.N * p.C), H(p.H), W(p.W), Ho(std::max<int64_t>(p.H_out(), 0)),
        Wo(std::max<int64_t>(p.W_out(), 0)), HW(p.H * p.W), HWo(Ho * Wo) {
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

#define KILN_INSTANTIATE_CONV(T)                                                            \
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
