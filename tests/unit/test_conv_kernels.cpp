// Convolution and pooling kernels against naive double-precision loops, plus
// adjoint identities that tie each backward kernel to its forward:
//   <conv(x, w), g> == <x, conv_backward_input(g, w)> == <w, conv_backward_weight(g, x)>.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/conv_kernels.h"
#include "core/parallel.h"

namespace {

using kiln::cpu::Conv2dParams;
using kiln::cpu::Pool2dParams;

std::string describe(const Conv2dParams& p) {
  std::ostringstream s;
  s << "N=" << p.N << " C_in=" << p.C_in << " H=" << p.H << " W=" << p.W << " C_out=" << p.C_out
    << " k=" << p.kH << "x" << p.kW << " stride=" << p.stride_h << "," << p.stride_w
    << " pad=" << p.pad_h << "," << p.pad_w << " dil=" << p.dil_h << "," << p.dil_w
    << " groups=" << p.groups;
  return s.str();
}

std::string describe(const Pool2dParams& p) {
  std::ostringstream s;
  s << "N=" << p.N << " C=" << p.C << " H=" << p.H << " W=" << p.W << " k=" << p.kH << "x" << p.kW
    << " stride=" << p.stride_h << "," << p.stride_w << " pad=" << p.pad_h << "," << p.pad_w
    << " dil=" << p.dil_h << "," << p.dil_w << " ceil=" << p.ceil_mode
    << " include_pad=" << p.count_include_pad << " divisor=" << p.divisor_override;
  return s.str();
}

template <class T>
std::vector<T> random_vector(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> d(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

template <class T>
double tolerance() {
  return std::is_same_v<T, float> ? 2e-5 : 1e-12;
}

// |got - want| <= tol * (1 + |want|) everywhere; reports the first miss.
template <class T>
void expect_close(const std::vector<T>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]);
    if (!(std::fabs(g - want[i]) <= tolerance<T>() * (1 + std::fabs(want[i])))) {
      ADD_FAILURE() << what << "[" << i << "] = " << g << ", expected " << want[i];
      return;
    }
  }
}

// --- Naive convolution references (double). One helper walks every
// (n, co, oh, ow, ci, ki, kj) tap with an in-bounds input position and hands
// the flat offsets to a visitor, so the three references share the indexing.

template <class F>
void for_each_tap(const Conv2dParams& p, F visit) {
  const int64_t Ho = p.H_out(), Wo = p.W_out();
  const int64_t Cg = p.C_in / p.groups, Cog = p.C_out / p.groups;
  for (int64_t n = 0; n < p.N; ++n)
    for (int64_t co = 0; co < p.C_out; ++co)
      for (int64_t oh = 0; oh < Ho; ++oh)
        for (int64_t ow = 0; ow < Wo; ++ow)
          for (int64_t cl = 0; cl < Cg; ++cl)
            for (int64_t ki = 0; ki < p.kH; ++ki)
              for (int64_t kj = 0; kj < p.kW; ++kj) {
                const int64_t ih = oh * p.stride_h - p.pad_h + ki * p.dil_h;
                const int64_t iw = ow * p.stride_w - p.pad_w + kj * p.dil_w;
                if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
                const int64_t ci = co / Cog * Cg + cl;
                const int64_t x_off = ((n * p.C_in + ci) * p.H + ih) * p.W + iw;
                const int64_t y_off = ((n * p.C_out + co) * Ho + oh) * Wo + ow;
                const int64_t w_off = ((co * Cg + cl) * p.kH + ki) * p.kW + kj;
                visit(x_off, y_off, w_off);
              }
}

template <class T>
std::vector<double> naive_forward(const Conv2dParams& p, const std::vector<T>& x,
                                  const std::vector<T>& w, const T* bias) {
  const int64_t HWo = p.H_out() * p.W_out();
  std::vector<double> y(static_cast<size_t>(p.N * p.C_out * HWo), 0.0);
  if (bias)
    for (int64_t n = 0; n < p.N; ++n)
      for (int64_t co = 0; co < p.C_out; ++co)
        for (int64_t o = 0; o < HWo; ++o) y[(n * p.C_out + co) * HWo + o] = bias[co];
  for_each_tap(p, [&](int64_t xo, int64_t yo, int64_t wo) { y[yo] += double(w[wo]) * x[xo]; });
  return y;
}

template <class T>
std::vector<double> naive_backward_input(const Conv2dParams& p, const std::vector<T>& gy,
                                         const std::vector<T>& w) {
  std::vector<double> gx(static_cast<size_t>(p.N * p.C_in * p.H * p.W), 0.0);
  for_each_tap(p, [&](int64_t xo, int64_t yo, int64_t wo) { gx[xo] += double(w[wo]) * gy[yo]; });
  return gx;
}

template <class T>
std::vector<double> naive_backward_weight(const Conv2dParams& p, const std::vector<T>& gy,
                                          const std::vector<T>& x) {
  std::vector<double> gw(static_cast<size_t>(p.C_out * (p.C_in / p.groups) * p.kH * p.kW), 0.0);
  for_each_tap(p, [&](int64_t xo, int64_t yo, int64_t wo) { gw[wo] += double(x[xo]) * gy[yo]; });
  return gw;
}

template <class T>
double dot(const std::vector<T>& a, const std::vector<T>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double(a[i]) * double(b[i]);
  return s;
}

template <class T>
void check_conv(const Conv2dParams& p, bool with_bias, uint32_t seed) {
  SCOPED_TRACE(describe(p) + (with_bias ? " bias" : " no bias"));
  std::mt19937 rng(seed);
  const int64_t Ho = std::max<int64_t>(p.H_out(), 0), Wo = std::max<int64_t>(p.W_out(), 0);
  const size_t x_n = p.N * p.C_in * p.H * p.W, y_n = p.N * p.C_out * Ho * Wo;
  const size_t w_n = p.C_out * (p.C_in / p.groups) * p.kH * p.kW;
  auto x = random_vector<T>(x_n, rng), w = random_vector<T>(w_n, rng);
  auto b = random_vector<T>(p.C_out, rng), gy = random_vector<T>(y_n, rng);
  const T* bias = with_bias ? b.data() : nullptr;

  // Outputs start as NaN: every kernel must overwrite, never accumulate.
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> y(y_n, nan), gx(x_n, nan), gw(w_n, nan);
  kiln::cpu::conv2d_forward<T>(p, x.data(), w.data(), bias, y.data());
  kiln::cpu::conv2d_backward_input<T>(p, gy.data(), w.data(), gx.data());
  kiln::cpu::conv2d_backward_weight<T>(p, gy.data(), x.data(), gw.data());

  expect_close(y, naive_forward(p, x, w, bias), "forward");
  expect_close(gx, naive_backward_input(p, gy, w), "backward_input");
  expect_close(gw, naive_backward_weight(p, gy, x), "backward_weight");

  if (!with_bias) {
    const double lhs = dot(y, gy), in_side = dot(x, gx), w_side = dot(w, gw);
    const double tol = tolerance<T>() * 10 * (1 + std::fabs(lhs) + std::sqrt(double(y_n)));
    EXPECT_NEAR(lhs, in_side, tol) << "<conv(x), g> vs <x, backward_input(g)>";
    EXPECT_NEAR(lhs, w_side, tol) << "<conv(x), g> vs <w, backward_weight(g)>";
  }
}

// N, C_in, H, W, C_out, kH, kW, stride h/w, pad h/w, dil h/w, groups
const Conv2dParams kConvCases[] = {
    {2, 3, 7, 9, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},      // padded 3x3
    {3, 4, 10, 8, 6, 3, 2, 2, 1, 1, 0, 1, 1, 2},     // groups, stride
    {1, 6, 11, 11, 6, 3, 3, 2, 2, 2, 2, 2, 2, 3},    // dilation
    {4, 8, 5, 5, 16, 1, 1, 1, 1, 0, 0, 1, 1, 1},     // pointwise fast path
    {4, 8, 5, 5, 16, 1, 1, 1, 1, 0, 0, 1, 1, 2},     // grouped pointwise
    {2, 4, 7, 7, 3, 1, 1, 2, 2, 0, 0, 1, 1, 1},      // 1x1 strided: general path
    {2, 5, 9, 7, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5},      // depthwise
    {3, 4, 12, 10, 4, 5, 3, 2, 3, 2, 1, 2, 1, 4},    // depthwise, stride, dilation
    {2, 3, 1, 20, 4, 1, 5, 1, 2, 0, 2, 1, 2, 1},     // 1-D as H == 1
    {5, 2, 6, 6, 3, 2, 2, 3, 3, 0, 0, 1, 1, 1},      // stride > kernel
    {1, 2, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1},      // 1x1 output
    {2, 2, 4, 4, 3, 2, 2, 1, 1, 3, 3, 1, 1, 1},      // outputs wholly in padding
    {8, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // batch split across threads
    {3, 6, 9, 9, 9, 3, 3, 1, 1, 1, 1, 1, 1, 3},      // odd batch: serial + threaded GEMM
    {6, 12, 8, 8, 24, 3, 3, 1, 1, 1, 1, 1, 1, 12},   // channel multiplier: not depthwise
    {16, 4, 6, 5, 6, 2, 3, 1, 2, 1, 1, 2, 1, 2},     // many small samples
    // Column matrices over 2 MB are built in bands of output rows (Note [Conv
    // column chunks]); bands run in parallel or, when too few, one by one.
    {2, 64, 32, 32, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // float: 2 bands per sample
    {1, 128, 40, 32, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // float: 3 bands, serial
    {2, 128, 81, 61, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1},  // strided, uneven last band
    {2, 256, 40, 40, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2},  // grouped, 4 bands
    // Output planes of at most 16 pixels batch samples into one GEMM (Note [Small planes
    // batch samples]), 512 columns at a time: whole batches, a short last batch, groups.
    {5, 6, 4, 4, 9, 3, 3, 1, 1, 1, 1, 1, 1, 3},      // grouped, 4x4 planes
    {35, 3, 4, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // 32 samples, then 3
    {130, 2, 2, 2, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // 2x2 planes: 128 samples, then 2
    {4, 3, 7, 7, 4, 3, 3, 2, 2, 2, 2, 2, 2, 1},      // strided, dilated, 4x4 planes
};

TEST(CpuConv2d, FloatMatchesNaive) {
  uint32_t seed = 1;
  for (const auto& p : kConvCases) {
    check_conv<float>(p, false, seed++);
    check_conv<float>(p, true, seed++);
  }
}

TEST(CpuConv2d, DoubleMatchesNaive) {
  uint32_t seed = 100;
  for (const auto& p : kConvCases) {
    check_conv<double>(p, false, seed++);
    check_conv<double>(p, true, seed++);
  }
}

TEST(CpuConv2d, SingleThreadMatchesNaive) {
  const int saved = kiln::get_num_threads();
  kiln::set_num_threads(1);
  uint32_t seed = 200;
  for (const auto& p : kConvCases) check_conv<double>(p, true, seed++);
  kiln::set_num_threads(saved);
}

TEST(CpuConv2d, OutputSize) {
  Conv2dParams p{1, 1, 10, 7, 1, 3, 2, 2, 3, 1, 0, 2, 1, 1};
  EXPECT_EQ(p.H_out(), (10 + 2 - 2 * 2 - 1) / 2 + 1);  // 4
  EXPECT_EQ(p.W_out(), (7 - 1 - 1) / 3 + 1);           // 2
  Conv2dParams tiny{1, 1, 2, 2, 1, 5, 5, 1, 1, 0, 0, 1, 1, 1};
  EXPECT_LE(tiny.H_out(), 0);
}

TEST(CpuConv2d, EmptyOutputStillOverwritesGradients) {
  Conv2dParams p{2, 2, 2, 2, 3, 5, 5, 1, 1, 0, 0, 1, 1, 1};
  std::vector<float> x(16, 1.f), w(3 * 2 * 25, 1.f), gx(16, NAN), gw(150, NAN);
  kiln::cpu::conv2d_forward<float>(p, x.data(), w.data(), nullptr, nullptr);
  kiln::cpu::conv2d_backward_input<float>(p, nullptr, w.data(), gx.data());
  kiln::cpu::conv2d_backward_weight<float>(p, nullptr, x.data(), gw.data());
  EXPECT_EQ(gx, std::vector<float>(16, 0.f));
  EXPECT_EQ(gw, std::vector<float>(150, 0.f));
}

TEST(CpuConv2d, RejectsBadGroups) {
  Conv2dParams p{1, 3, 4, 4, 4, 1, 1, 1, 1, 0, 0, 1, 1, 2};
  std::vector<float> buf(64);
  EXPECT_THROW(kiln::cpu::conv2d_forward<float>(p, buf.data(), buf.data(), nullptr, buf.data()),
               std::invalid_argument);
}

// --- Pooling ---

// Independent statement of PyTorch's pooling size rule.
int64_t naive_pool_size(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil) {
  const double span = double(in + 2 * pad - d * (k - 1) - 1) / double(s);
  int64_t out = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (out - 1) * s >= in + pad) --out;  // last window must start before the right pad
  return out;
}

struct PoolRef {
  std::vector<double> out;
  std::vector<int64_t> idx;
};

template <class T>
PoolRef naive_max_pool(const Pool2dParams& p, const std::vector<T>& x) {
  const int64_t Ho = p.H_out(), Wo = p.W_out();
  PoolRef r;
  for (int64_t pl = 0; pl < p.N * p.C; ++pl)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        double best = -INFINITY;
        int64_t best_i = -1;
        for (int64_t a = 0; a < p.kH; ++a)
          for (int64_t b = 0; b < p.kW; ++b) {
            const int64_t ih = oh * p.stride_h - p.pad_h + a * p.dil_h;
            const int64_t iw = ow * p.stride_w - p.pad_w + b * p.dil_w;
            if (ih < 0 || ih >= p.H || iw < 0 || iw >= p.W) continue;
            const double v = x[(pl * p.H + ih) * p.W + iw];
            // PyTorch starts from the first in-bounds tap, so an all -inf
            // window reports that tap; a NaN replaces anything, even a NaN.
            if (best_i < 0) best_i = ih * p.W + iw;
            if (v > best || std::isnan(v)) {
              best = v;
              best_i = ih * p.W + iw;
            }
          }
        r.out.push_back(best);
        r.idx.push_back(best_i);
      }
  return r;
}

// Visits every in-bounds tap of every avg-pool window as
// visit(input offset, output offset, divisor), the divisor following PyTorch:
// the override, else the window size counting padding (but not the part of a
// ceil-mode window beyond the padding), else the in-bounds tap count.
template <class F>
void for_each_avg_tap(const Pool2dParams& p, F visit) {
  const int64_t Ho = p.H_out(), Wo = p.W_out();
  for (int64_t pl = 0; pl < p.N * p.C; ++pl)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        int64_t in_bounds = 0, in_padded = 0;
        for (int pass = 0; pass < 2; ++pass)
          for (int64_t a = 0; a < p.kH; ++a)
            for (int64_t b = 0; b < p.kW; ++b) {
              const int64_t ih = oh * p.stride_h - p.pad_h + a;
              const int64_t iw = ow * p.stride_w - p.pad_w + b;
              const bool inside = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
              if (pass == 0) {
                in_padded += ih < p.H + p.pad_h && iw < p.W + p.pad_w;
                in_bounds += inside;
                continue;
              }
              if (!inside) continue;
              const int64_t div = p.divisor_override    ? p.divisor_override
                                  : p.count_include_pad ? in_padded
                                                        : in_bounds;
              visit((pl * p.H + ih) * p.W + iw, (pl * Ho + oh) * Wo + ow, double(div));
            }
      }
}

template <class T>
std::vector<double> naive_avg_pool(const Pool2dParams& p, const std::vector<T>& x) {
  std::vector<double> out(static_cast<size_t>(p.N * p.C * p.H_out() * p.W_out()), 0.0);
  for_each_avg_tap(p, [&](int64_t xi, int64_t yi, double div) { out[yi] += x[xi] / div; });
  return out;
}

template <class T>
std::vector<double> naive_avg_pool_backward(const Pool2dParams& p, const std::vector<T>& gy) {
  std::vector<double> gx(static_cast<size_t>(p.N * p.C * p.H * p.W), 0.0);
  for_each_avg_tap(p, [&](int64_t xi, int64_t yi, double div) { gx[xi] += gy[yi] / div; });
  return gx;
}

// N, C, H, W, kH, kW, stride h/w, pad h/w, dil h/w, ceil, count_include_pad, divisor
const Pool2dParams kPoolCases[] = {
    {2, 3, 8, 8, 2, 2, 2, 2, 0, 0, 1, 1, false, true, 0},
    {1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, true, true, 0},
    {1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, true, false, 0},
    {1, 2, 7, 9, 3, 3, 2, 2, 1, 1, 1, 1, false, false, 0},
    {1, 1, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, false, false, 4},
    {1, 2, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, true, true, 0},   // ceil window dropped
    {1, 1, 1, 11, 1, 3, 1, 2, 0, 1, 1, 1, true, true, 0},  // 1-D
    {3, 2, 6, 5, 4, 3, 1, 3, 2, 1, 1, 1, false, false, 0},
    {2, 3, 10, 11, 3, 3, 3, 2, 1, 1, 1, 1, true, true, 7},
    {4, 5, 16, 16, 3, 3, 2, 2, 1, 1, 1, 1, false, true, 0},
};

// Dilated windows only exist for max pooling.
const Pool2dParams kDilatedPoolCases[] = {
    {2, 1, 10, 7, 3, 2, 3, 2, 1, 1, 2, 1, true, true, 0},
    {1, 2, 9, 9, 3, 3, 1, 2, 1, 0, 2, 3, false, true, 0},
};

std::vector<Pool2dParams> max_pool_cases() {
  std::vector<Pool2dParams> all(std::begin(kPoolCases), std::end(kPoolCases));
  all.insert(all.end(), std::begin(kDilatedPoolCases), std::end(kDilatedPoolCases));
  return all;
}

TEST(CpuPool2d, OutputSizeRule) {
  for (const auto& p : max_pool_cases()) {
    SCOPED_TRACE(describe(p));
    EXPECT_EQ(p.H_out(), naive_pool_size(p.H, p.kH, p.pad_h, p.stride_h, p.dil_h, p.ceil_mode));
    EXPECT_EQ(p.W_out(), naive_pool_size(p.W, p.kW, p.pad_w, p.stride_w, p.dil_w, p.ceil_mode));
  }
  // Values PyTorch gives: 5 -> 3 with k=2,s=2 in ceil mode (2 in floor mode),
  // and 3 -> 2 with k=2,s=2,p=1 in ceil mode (a third window would start in padding).
  Pool2dParams a{1, 1, 5, 5, 2, 2, 2, 2, 0, 0, 1, 1, true, true, 0};
  EXPECT_EQ(a.H_out(), 3);
  a.ceil_mode = false;
  EXPECT_EQ(a.H_out(), 2);
  Pool2dParams b{1, 1, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, true, true, 0};
  EXPECT_EQ(b.H_out(), 2);
}

template <class T>
void check_max_pool(const Pool2dParams& p, std::vector<T> x) {
  SCOPED_TRACE(describe(p));
  const size_t out_n = p.N * p.C * p.H_out() * p.W_out();
  std::vector<T> y(out_n, T(7));
  std::vector<int64_t> idx(out_n, -5);
  kiln::cpu::max_pool2d_forward<T>(p, x.data(), y.data(), idx.data());
  const PoolRef ref = naive_max_pool(p, x);
  for (size_t i = 0; i < out_n; ++i) {
    const bool same_value =
        std::isnan(ref.out[i]) ? std::isnan(double(y[i])) : double(y[i]) == ref.out[i];
    if (!same_value || idx[i] != ref.idx[i]) {
      ADD_FAILURE() << "out[" << i << "] = " << y[i] << " @" << idx[i] << ", expected "
                    << ref.out[i] << " @" << ref.idx[i];
      return;
    }
  }
  // Backward: scatter-add of grad_out through the reference indices.
  std::mt19937 rng(11);
  auto gy = random_vector<T>(out_n, rng);
  std::vector<T> gx(x.size(), T(NAN));
  kiln::cpu::max_pool2d_backward<T>(p, gy.data(), idx.data(), gx.data());
  std::vector<double> want(x.size(), 0.0);
  const int64_t plane_out = p.H_out() * p.W_out();
  for (size_t o = 0; o < out_n; ++o) want[(o / plane_out) * p.H * p.W + ref.idx[o]] += gy[o];
  expect_close(gx, want, "max_pool2d_backward");
}

template <class T>
void check_avg_pool(const Pool2dParams& p, uint32_t seed) {
  SCOPED_TRACE(describe(p));
  std::mt19937 rng(seed);
  auto x = random_vector<T>(p.N * p.C * p.H * p.W, rng);
  const size_t out_n = p.N * p.C * p.H_out() * p.W_out();
  std::vector<T> y(out_n, T(NAN));
  kiln::cpu::avg_pool2d_forward<T>(p, x.data(), y.data());
  expect_close(y, naive_avg_pool(p, x), "avg_pool2d_forward");

  auto gy = random_vector<T>(out_n, rng);
  std::vector<T> gx(x.size(), T(NAN));
  kiln::cpu::avg_pool2d_backward<T>(p, gy.data(), gx.data());
  expect_close(gx, naive_avg_pool_backward(p, gy), "avg_pool2d_backward");
  // The backward is the adjoint of the (linear) forward.
  double lhs = 0, rhs = 0;
  for (size_t o = 0; o < out_n; ++o) lhs += double(y[o]) * gy[o];
  for (size_t i = 0; i < x.size(); ++i) rhs += double(x[i]) * gx[i];
  EXPECT_NEAR(lhs, rhs, tolerance<T>() * 10 * (1 + std::fabs(lhs) + std::sqrt(double(out_n))));
}

TEST(CpuPool2d, MaxMatchesNaive) {
  uint32_t seed = 300;
  for (const auto& p : max_pool_cases()) {
    std::mt19937 rng(seed++);
    check_max_pool<float>(p, random_vector<float>(p.N * p.C * p.H * p.W, rng));
    check_max_pool<double>(p, random_vector<double>(p.N * p.C * p.H * p.W, rng));
  }
}

TEST(CpuPool2d, MaxPropagatesNaN) {
  for (const auto& p : max_pool_cases()) {
    std::mt19937 rng(5);
    auto x = random_vector<float>(p.N * p.C * p.H * p.W, rng);
    for (size_t i = 0; i < x.size(); i += 5) x[i] = NAN;
    check_max_pool<float>(p, x);
  }
}

TEST(CpuPool2d, MaxTiesAndInfinities) {
  Pool2dParams p{1, 1, 4, 4, 2, 2, 1, 1, 1, 1, 1, 1, false, true, 0};
  std::vector<double> x(16, -INFINITY);  // all -inf: index of the first tap
  check_max_pool<double>(p, x);
  std::vector<double> ties(16, 1.0);  // equal values: first one wins
  check_max_pool<double>(p, ties);
}

TEST(CpuPool2d, AvgMatchesNaive) {
  uint32_t seed = 400;
  for (const auto& p : kPoolCases) {
    check_avg_pool<float>(p, seed++);
    check_avg_pool<double>(p, seed++);
  }
}

TEST(CpuPool2d, AvgRejectsDilation) {
  const Pool2dParams& p = kDilatedPoolCases[0];
  std::vector<float> x(p.N * p.C * p.H * p.W), y(p.N * p.C * p.H_out() * p.W_out());
  EXPECT_THROW(kiln::cpu::avg_pool2d_forward<float>(p, x.data(), y.data()), std::invalid_argument);
}

}  // namespace
