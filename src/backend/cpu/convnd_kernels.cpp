#include "backend/cpu/convnd_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/parallel.h"

namespace kiln::cpu {
namespace {

// Outputs o in [0, out) whose input position o*stride + offset lies in [0, size).
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t offset, int64_t stride, int64_t size, int64_t out) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = size - 1 - offset < 0 ? 0 : (size - 1 - offset) / stride + 1;
  lo = std::min(lo, out);
  hi = std::clamp(hi, lo, out);
  return {lo, hi};
}

// Sizes derived once from ConvNdParams. A "row" is one (od, oh) pair: the
// innermost output dim W is gathered as contiguous runs.
struct NdGeom {
  ConvNdParams p;
  int64_t Cg, Cog, in_plane, out_plane, kk, col_rows, rows;
  explicit NdGeom(const ConvNdParams& q) : p(q) {
    Cg = p.C_in / p.groups;
    Cog = p.C_out / p.groups;
    in_plane = p.in[0] * p.in[1] * p.in[2];
    out_plane = p.out[0] * p.out[1] * p.out[2];
    kk = p.k[0] * p.k[1] * p.k[2];
    col_rows = Cg * kk;
    rows = p.out[0] * p.out[1];
  }
};

// Output rows per band: about 2 MB of columns, and at least 512 columns (a
// narrow GEMM runs far below peak), as Note [Conv column chunks].
template <class T>
int64_t band_rows(const NdGeom& g) {
  const int64_t row_bytes = g.col_rows * g.p.out[2] * static_cast<int64_t>(sizeof(T));
  const int64_t by_budget = (int64_t(2) << 20) / std::max<int64_t>(row_bytes, 1);
  const int64_t by_width = (512 + g.p.out[2] - 1) / std::max<int64_t>(g.p.out[2], 1);
  return std::clamp<int64_t>(std::max(by_budget, by_width), 1, std::max<int64_t>(g.rows, 1));
}

int64_t channel_grain(const NdGeom& g, int64_t len) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(g.kk * len, 1));
}

// Calls f(row - r0, inside, base) for each output row in [r0, r1) under kernel
// tap (kd, kh): base is the offset of its input row (d, h) in the plane;
// inside = false when that row lies in the padding.
template <class F>
void for_tap_rows(const NdGeom& g, int64_t kd, int64_t kh, int64_t r0, int64_t r1, const F& f) {
  const ConvNdParams& p = g.p;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t od = r / p.out[1], oh = r % p.out[1];
    const int64_t id = od * p.stride[0] - p.pad[0] + kd * p.dil[0];
    const int64_t ih = oh * p.stride[1] - p.pad[1] + kh * p.dil[1];
    const bool inside = id >= 0 && id < p.in[0] && ih >= 0 && ih < p.in[1];
    f(r - r0, inside, (id * p.in[1] + ih) * p.in[2]);
  }
}

// col[(c*kk + tap)][(row - r0)*oW + ow] for channels [c0, c1) of one group's
// input, output rows [r0, r1); padding reads as 0.
template <class T>
void vol2col(const NdGeom& g, const T* in, T* col, int64_t c0, int64_t c1, int64_t r0, int64_t r1) {
  const ConvNdParams& p = g.p;
  const int64_t Wo = p.out[2], len = (r1 - r0) * Wo, sw = p.stride[2];
  for (int64_t c = c0; c < c1; ++c) {
    const T* plane = in + c * g.in_plane;
    for (int64_t kd = 0; kd < p.k[0]; ++kd)
      for (int64_t kh = 0; kh < p.k[1]; ++kh)
        for (int64_t kw = 0; kw < p.k[2]; ++kw) {
          T* dst = col + (c * g.kk + (kd * p.k[1] + kh) * p.k[2] + kw) * len;
          const int64_t off = kw * p.dil[2] - p.pad[2];
          const Range w = valid_outputs(off, sw, p.in[2], Wo);
          for_tap_rows(g, kd, kh, r0, r1, [&](int64_t r, bool inside, int64_t base) {
            T* d = dst + r * Wo;
            if (!inside) {
              std::fill(d, d + Wo, T(0));
              return;
            }
            std::fill(d, d + w.lo, T(0));
            const T* s = plane + base + off;
            for (int64_t o = w.lo; o < w.hi; ++o) d[o] = s[o * sw];
            std::fill(d + w.hi, d + Wo, T(0));
          });
        }
  }
}

// Adjoint of vol2col: adds col into channels [c0, c1) of in (zeroed by the caller).
template <class T>
void col2vol(const NdGeom& g, const T* col, T* in, int64_t c0, int64_t c1, int64_t r0, int64_t r1) {
  const ConvNdParams& p = g.p;
  const int64_t Wo = p.out[2], len = (r1 - r0) * Wo, sw = p.stride[2];
  for (int64_t c = c0; c < c1; ++c) {
    T* plane = in + c * g.in_plane;
    for (int64_t kd = 0; kd < p.k[0]; ++kd)
      for (int64_t kh = 0; kh < p.k[1]; ++kh)
        for (int64_t kw = 0; kw < p.k[2]; ++kw) {
          const T* src = col + (c * g.kk + (kd * p.k[1] + kh) * p.k[2] + kw) * len;
          const int64_t off = kw * p.dil[2] - p.pad[2];
          const Range w = valid_outputs(off, sw, p.in[2], Wo);
          for_tap_rows(g, kd, kh, r0, r1, [&](int64_t r, bool inside, int64_t base) {
            if (!inside) return;
            const T* s = src + r * Wo;
            T* d = plane + base + off;
            for (int64_t o = w.lo; o < w.hi; ++o) d[o * sw] += s[o];
          });
        }
  }
}

template <class T>
void vol2col_par(const NdGeom& g, const T* in, T* col, int64_t C, int64_t r0, int64_t r1) {
  parallel_for(0, C, channel_grain(g, (r1 - r0) * g.p.out[2]),
               [&](int64_t c0, int64_t c1) { vol2col(g, in, col, c0, c1, r0, r1); });
}
template <class T>
void col2vol_par(const NdGeom& g, const T* col, T* in, int64_t C, int64_t r0, int64_t r1) {
  parallel_for(0, C, channel_grain(g, (r1 - r0) * g.p.out[2]),
               [&](int64_t c0, int64_t c1) { col2vol(g, col, in, c0, c1, r0, r1); });
}

}  // namespace

template <class T>
void convnd_forward(const ConvNdParams& p, const T* input, const T* weight, const T* bias, T* output) {
  const NdGeom g(p);
  if (p.N == 0 || p.C_out == 0 || g.out_plane == 0) return;
  const int64_t br = band_rows<T>(g), Wo = p.out[2];
  std::vector<T> col(static_cast<size_t>(std::max<int64_t>(g.col_rows * br * Wo, 1)));
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t r0 = 0; r0 < g.rows; r0 += br) {
      const int64_t r1 = std::min(g.rows, r0 + br), len = (r1 - r0) * Wo;
      for (int64_t grp = 0; grp < p.groups; ++grp) {
        const T* in_g = input + (n * p.C_in + grp * g.Cg) * g.in_plane;
        T* out_g = output + (n * p.C_out + grp * g.Cog) * g.out_plane + r0 * Wo;
        T beta = T(0);
        if (bias) {
          for (int64_t co = 0; co < g.Cog; ++co)
            std::fill(out_g + co * g.out_plane, out_g + co * g.out_plane + len, bias[grp * g.Cog + co]);
          beta = T(1);
        }
        vol2col_par(g, in_g, col.data(), g.Cg, r0, r1);
        gemm<T>(false, false, g.Cog, len, g.col_rows, T(1), weight + grp * g.Cog * g.col_rows, g.col_rows, col.data(),
                len, beta, out_g, g.out_plane);
      }
    }
}

template <class T>
void convnd_backward_input(const ConvNdParams& p, const T* grad_output, const T* weight, T* grad_input) {
  const NdGeom g(p);
  std::fill(grad_input, grad_input + p.N * p.C_in * g.in_plane, T(0));
  if (p.N == 0 || p.C_out == 0 || g.out_plane == 0 || g.in_plane == 0) return;
  const int64_t br = band_rows<T>(g), Wo = p.out[2];
  std::vector<T> col(static_cast<size_t>(std::max<int64_t>(g.col_rows * br * Wo, 1)));
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t grp = 0; grp < p.groups; ++grp) {
      const T* gy_g = grad_output + (n * p.C_out + grp * g.Cog) * g.out_plane;
      T* gx_g = grad_input + (n * p.C_in + grp * g.Cg) * g.in_plane;
      for (int64_t r0 = 0; r0 < g.rows; r0 += br) {
        const int64_t r1 = std::min(g.rows, r0 + br), len = (r1 - r0) * Wo;
        gemm<T>(true, false, g.col_rows, len, g.Cog, T(1), weight + grp * g.Cog * g.col_rows, g.col_rows,
                gy_g + r0 * Wo, g.out_plane, T(0), col.data(), len);
        col2vol_par(g, static_cast<const T*>(col.data()), gx_g, g.Cg, r0, r1);
      }
    }
}

template <class T>
void convnd_backward_weight(const ConvNdParams& p, const T* grad_output, const T* input, T* grad_weight) {
  const NdGeom g(p);
  std::fill(grad_weight, grad_weight + p.C_out * g.col_rows, T(0));
  if (p.N == 0 || g.out_plane == 0 || g.col_rows == 0 || p.C_out == 0) return;
  const int64_t br = band_rows<T>(g), Wo = p.out[2];
  std::vector<T> col(static_cast<size_t>(std::max<int64_t>(g.col_rows * br * Wo, 1)));
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t r0 = 0; r0 < g.rows; r0 += br) {
      const int64_t r1 = std::min(g.rows, r0 + br), len = (r1 - r0) * Wo;
      for (int64_t grp = 0; grp < p.groups; ++grp) {
        vol2col_par(g, input + (n * p.C_in + grp * g.Cg) * g.in_plane, col.data(), g.Cg, r0, r1);
        gemm<T>(false, true, g.Cog, g.col_rows, len, T(1),
                grad_output + (n * p.C_out + grp * g.Cog) * g.out_plane + r0 * Wo, g.out_plane, col.data(), len, T(1),
                grad_weight + grp * g.Cog * g.col_rows, g.col_rows);
      }
    }
}

template <class T>
void im2col_nd(const ConvNdParams& p, const T* input, T* cols) {
  const NdGeom g(p);
  for (int64_t n = 0; n < p.N; ++n)
    vol2col_par(g, input + n * p.C_in * g.in_plane, cols + n * g.col_rows * g.out_plane, p.C_in, 0, g.rows);
}
template <class T>
void col2im_nd(const ConvNdParams& p, const T* cols, T* output) {
  const NdGeom g(p);
  std::fill(output, output + p.N * p.C_in * g.in_plane, T(0));
  for (int64_t n = 0; n < p.N; ++n)
    col2vol_par(g, cols + n * g.col_rows * g.out_plane, output + n * p.C_in * g.in_plane, p.C_in, 0, g.rows);
}

// --- 3-D pooling ---
namespace {

int64_t pool_grain(const Pool3dParams& p) {
  const int64_t work = p.out[0] * p.out[1] * p.out[2] * p.k[0] * p.k[1] * p.k[2];
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(work, 1));
}

// Avg window of one output along one dim: clipped [lo, hi) and the padded length.
struct Span {
  int64_t lo, hi, padded;
};
Span avg_span(const Pool3dParams& p, int i, int64_t o) {
  int64_t lo = o * p.stride[i] - p.pad[i];
  int64_t hi = std::min(lo + p.k[i], p.in[i] + p.pad[i]);
  const int64_t padded = hi - lo;
  return {std::max<int64_t>(lo, 0), std::min(hi, p.in[i]), padded};
}

// Calls f(out_flat, spans, divisor) for each output of a plane.
template <class F>
void avg_windows(const Pool3dParams& p, const F& f) {
  for (int64_t od = 0; od < p.out[0]; ++od)
    for (int64_t oh = 0; oh < p.out[1]; ++oh)
      for (int64_t ow = 0; ow < p.out[2]; ++ow) {
        const Span s[3] = {avg_span(p, 0, od), avg_span(p, 1, oh), avg_span(p, 2, ow)};
        const int64_t inside = (s[0].hi - s[0].lo) * (s[1].hi - s[1].lo) * (s[2].hi - s[2].lo);
        const int64_t div = p.divisor_override    ? p.divisor_override
                            : p.count_include_pad ? s[0].padded * s[1].padded * s[2].padded
                                                  : inside;
        f((od * p.out[1] + oh) * p.out[2] + ow, s, inside > 0 ? div : 0);
      }
}

}  // namespace

template <class T>
void max_pool3d_forward(const Pool3dParams& p, const T* in, T* out, int64_t* indices) {
  const int64_t ip = p.in[0] * p.in[1] * p.in[2], op = p.out[0] * p.out[1] * p.out[2];
  parallel_for(0, p.planes, pool_grain(p), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* x = in + pl * ip;
      for (int64_t od = 0; od < p.out[0]; ++od)
        for (int64_t oh = 0; oh < p.out[1]; ++oh)
          for (int64_t ow = 0; ow < p.out[2]; ++ow) {
            int64_t lo[3], hi[3];
            const int64_t o[3] = {od, oh, ow};
            for (int i = 0; i < 3; ++i) {
              lo[i] = o[i] * p.stride[i] - p.pad[i];
              hi[i] = std::min(lo[i] + (p.k[i] - 1) * p.dil[i] + 1, p.in[i]);
              while (lo[i] < 0) lo[i] += p.dil[i];
            }
            T best = -std::numeric_limits<T>::infinity();
            int64_t best_i = (lo[0] * p.in[1] + lo[1]) * p.in[2] + lo[2];
            for (int64_t d = lo[0]; d < hi[0]; d += p.dil[0])
              for (int64_t h = lo[1]; h < hi[1]; h += p.dil[1])
                for (int64_t w = lo[2]; w < hi[2]; w += p.dil[2]) {
                  const int64_t i = (d * p.in[1] + h) * p.in[2] + w;
                  if (x[i] > best || std::isnan(x[i])) best = x[i], best_i = i;
                }
            const int64_t oi = pl * op + (od * p.out[1] + oh) * p.out[2] + ow;
            out[oi] = best;
            indices[oi] = best_i;
          }
    }
  });
}

template <class T>
void avg_pool3d_forward(const Pool3dParams& p, const T* in, T* out) {
  const int64_t ip = p.in[0] * p.in[1] * p.in[2], op = p.out[0] * p.out[1] * p.out[2];
  parallel_for(0, p.planes, pool_grain(p), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* x = in + pl * ip;
      avg_windows(p, [&](int64_t o, const Span* s, int64_t div) {
        T sum = 0;
        for (int64_t d = s[0].lo; d < s[0].hi; ++d)
          for (int64_t h = s[1].lo; h < s[1].hi; ++h)
            for (int64_t w = s[2].lo; w < s[2].hi; ++w) sum += x[(d * p.in[1] + h) * p.in[2] + w];
        out[pl * op + o] = div ? static_cast<T>(sum / static_cast<T>(div)) : T(0);
      });
    }
  });
}

template <class T>
void avg_pool3d_backward(const Pool3dParams& p, const T* grad_out, T* grad_in) {
  const int64_t ip = p.in[0] * p.in[1] * p.in[2], op = p.out[0] * p.out[1] * p.out[2];
  parallel_for(0, p.planes, pool_grain(p), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      T* gx = grad_in + pl * ip;
      std::fill(gx, gx + ip, T(0));
      avg_windows(p, [&](int64_t o, const Span* s, int64_t div) {
        if (!div) return;
        const T share = grad_out[pl * op + o] / static_cast<T>(div);
        for (int64_t d = s[0].lo; d < s[0].hi; ++d)
          for (int64_t h = s[1].lo; h < s[1].hi; ++h)
            for (int64_t w = s[2].lo; w < s[2].hi; ++w) gx[(d * p.in[1] + h) * p.in[2] + w] += share;
      });
    }
  });
}

template <class T>
void adaptive_max_pool3d_forward(const Pool3dParams& p, const T* in, T* out, int64_t* indices) {
  const int64_t ip = p.in[0] * p.in[1] * p.in[2], op = p.out[0] * p.out[1] * p.out[2];
  auto start = [&](int i, int64_t o) { return o * p.in[i] / p.out[i]; };
  auto end = [&](int i, int64_t o) { return ((o + 1) * p.in[i] + p.out[i] - 1) / p.out[i]; };
  parallel_for(0, p.planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(ip, 1)), [&](int64_t p0, int64_t p1) {
    for (int64_t pl = p0; pl < p1; ++pl) {
      const T* x = in + pl * ip;
      for (int64_t od = 0; od < p.out[0]; ++od)
        for (int64_t oh = 0; oh < p.out[1]; ++oh)
          for (int64_t ow = 0; ow < p.out[2]; ++ow) {
            const int64_t d0 = start(0, od), h0 = start(1, oh), w0 = start(2, ow);
            T best = -std::numeric_limits<T>::infinity();
            int64_t best_i = (d0 * p.in[1] + h0) * p.in[2] + w0;
            for (int64_t d = d0; d < end(0, od); ++d)
              for (int64_t h = h0; h < end(1, oh); ++h)
                for (int64_t w = w0; w < end(2, ow); ++w) {
                  const int64_t i = (d * p.in[1] + h) * p.in[2] + w;
                  if (x[i] > best || std::isnan(x[i])) best = x[i], best_i = i;
                }
            const int64_t oi = pl * op + (od * p.out[1] + oh) * p.out[2] + ow;
            out[oi] = best;
            indices[oi] = best_i;
          }
    }
  });
}

#define KILN_INSTANTIATE_CONVND(T)                                                        \
  template void convnd_forward<T>(const ConvNdParams&, const T*, const T*, const T*, T*); \
  template void convnd_backward_input<T>(const ConvNdParams&, const T*, const T*, T*);    \
  template void convnd_backward_weight<T>(const ConvNdParams&, const T*, const T*, T*);
#define KILN_INSTANTIATE_FLOAT_ND(T)                                                \
  template void im2col_nd<T>(const ConvNdParams&, const T*, T*);                    \
  template void col2im_nd<T>(const ConvNdParams&, const T*, T*);                    \
  template void max_pool3d_forward<T>(const Pool3dParams&, const T*, T*, int64_t*); \
  template void avg_pool3d_backward<T>(const Pool3dParams&, const T*, T*);          \
  template void adaptive_max_pool3d_forward<T>(const Pool3dParams&, const T*, T*, int64_t*);

KILN_INSTANTIATE_CONVND(float)
KILN_INSTANTIATE_CONVND(double)
KILN_INSTANTIATE_CONVND(int64_t)
KILN_INSTANTIATE_CONVND(int32_t)
KILN_INSTANTIATE_CONVND(int16_t)
KILN_INSTANTIATE_CONVND(int8_t)
KILN_INSTANTIATE_CONVND(uint8_t)
KILN_INSTANTIATE_FLOAT_ND(float)
KILN_INSTANTIATE_FLOAT_ND(double)
template void avg_pool3d_forward<float>(const Pool3dParams&, const float*, float*);
template void avg_pool3d_forward<double>(const Pool3dParams&, const double*, double*);
template void avg_pool3d_forward<int64_t>(const Pool3dParams&, const int64_t*, int64_t*);

#undef KILN_INSTANTIATE_CONVND
#undef KILN_INSTANTIATE_FLOAT_ND

}  // namespace kiln::cpu
