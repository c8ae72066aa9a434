// Float32 convolutions through both CPU paths, oneDNN (when built with it) and kiln's own
// kernels (kiln::backends::onednn::set_enabled(false), as KILN_ONEDNN=0), against the float64
// convolution of the same values (kiln's double kernels, which oneDNN never takes), with
// gradients of x, weight and bias.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/onednn_conv.h"
#include "core/parallel.h"
#include "kiln/backends.h"
#include "kiln/kiln.h"

namespace {

using namespace kiln;
using ConvFn = std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>;

// Restores the oneDNN switch when a test ends.
struct OneDnnSwitch {
  bool prev = backends::onednn::enabled();
  explicit OneDnnSwitch(bool on) { backends::onednn::set_enabled(on); }
  ~OneDnnSwitch() { backends::onednn::set_enabled(prev); }
};

struct Case {
  std::string name;
  std::vector<int64_t> x, w;
  bool bias;
  ConvFn f;
  bool non_contiguous = false;  // x is a transposed view of its storage
};

// float32: 1e-4 relative; bfloat16 (one rounding of a float32 sum, 2^-9): 1e-2 of the
// largest magnitude, as sums that cancel lose their relative accuracy.
void expect_near(const Tensor& got, const Tensor& want, DType dt, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_EQ(got.dtype(), dt) << what;
  const Tensor g = got.to(kFloat64).contiguous(), w = want.contiguous();
  const double* a = g.data_ptr<double>();
  const double* b = w.data_ptr<double>();
  double scale = 1;
  for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::abs(b[i]));
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double tol = dt == kFloat32 ? 1e-4 * (1 + std::abs(b[i])) : 1e-2 * scale;
    if (!(std::abs(a[i] - b[i]) <= tol)) {
      ADD_FAILURE() << what << "[" << i << "] = " << a[i] << ", expected " << b[i];
      return;
    }
  }
}

// Forward and backward (loss = sum(y * gy)) in dt on the chosen path and in float64.
void check(const Case& c, bool onednn, DType dt = kFloat32) {
  SCOPED_TRACE(c.name + (onednn ? " (oneDNN)" : " (kiln kernels)") + (dt == kFloat32 ? "" : " bfloat16"));
  manual_seed(7);
  Tensor x = randn(c.x).to(dt);
  if (c.non_contiguous) {
    // The same shape, laid out with the last two dims swapped.
    std::vector<int64_t> s = c.x;
    std::swap(s[s.size() - 1], s[s.size() - 2]);
    const int64_t r = static_cast<int64_t>(s.size());
    x = randn(s).to(dt).transpose(r - 1, r - 2);
    ASSERT_FALSE(x.is_contiguous());
  }
  Tensor w = randn(c.w).to(dt), b;
  Tensor x64 = x.to(kFloat64), w64 = w.to(kFloat64);
  x.requires_grad_(), w.requires_grad_(), x64.requires_grad_(), w64.requires_grad_();
  Tensor y64 = c.f(x64, w64, Tensor());  // only for the output's channel count
  const int64_t C_out = y64.sizes()[1];
  Tensor b64;
  if (c.bias) {
    b = randn({C_out}).to(dt);
    b64 = b.to(kFloat64);
    b.requires_grad_(), b64.requires_grad_();
    y64 = c.f(x64, w64, b64);
  }
  const int64_t before = cpu::onednn::executions();
  Tensor y;
  {
    OneDnnSwitch on(onednn);
    y = c.f(x, w, b);
    expect_near(y, y64, dt, "y");
    Tensor gy = randn(y.sizes()).to(dt);
    (y * gy).sum().backward();
    (y64 * gy.to(kFloat64)).sum().backward();
  }
  expect_near(x.grad(), x64.grad(), dt, "grad x");
  expect_near(w.grad(), w64.grad(), dt, "grad weight");
  if (c.bias) expect_near(b.grad(), b64.grad(), dt, "grad bias");
  // Forward, grad x and grad weight each ran on the path asked for (bf16: natively where the
  // CPU has bf16 dot products, else in float32, on oneDNN too).
  const int64_t ran = cpu::onednn::executions() - before;
  if (onednn && backends::onednn::is_available())
    EXPECT_GE(ran, 3);
  else
    EXPECT_EQ(ran, 0);
}

std::vector<Case> cases() {
  using T = const Tensor&;
  return {
      // Outputs over 16 wide: on smaller planes kiln runs the weight gradient wherever oneDNN
      // would use its gemm fallback (onednn_conv.cpp's route), and this test wants oneDNN.
      {"conv1d stride 2 pad 1 dil 2 bias",
       {2, 4, 41},
       {6, 4, 3},
       true,
       [](T x, T w, T b) { return conv1d(x, w, b, 2, 1, 2); }},
      {"conv1d groups 2 no bias batch 1",
       {1, 4, 19},
       {6, 2, 2},
       false,
       [](T x, T w, T b) { return conv1d(x, w, b, 1, 0, 1, 2); }},
      {"conv1d depthwise", {3, 5, 19}, {5, 1, 3}, true, [](T x, T w, T b) { return conv1d(x, w, b, 1, 1, 1, 5); }},
      {"conv2d 3x3 pad 1 bias batch 1",
       {1, 3, 7, 6},
       {5, 3, 3, 3},
       true,
       [](T x, T w, T b) { return conv2d(x, w, b, 1, 1); }},
      {"conv2d stride (2,1) pad (1,2) dil (1,2) no bias",
       {3, 4, 9, 8},
       {6, 4, 3, 2},
       false,
       [](T x, T w, T b) {
         return conv2d(x, w, b, {2, 1}, {1, 2}, {1, 2});
       }},
      {"conv2d stride 2 no pad, rows left over",
       {2, 3, 8, 9},
       {4, 3, 3, 3},
       true,
       [](T x, T w, T b) { return conv2d(x, w, b, 2, 0); }},
      {"conv2d groups 3", {2, 6, 7, 7}, {9, 2, 3, 3}, true, [](T x, T w, T b) { return conv2d(x, w, b, 1, 1, 1, 3); }},
      {"conv2d depthwise",
       {2, 8, 10, 10},
       {8, 1, 3, 3},
       true,
       [](T x, T w, T b) { return conv2d(x, w, b, 1, 1, 1, 8); }},
      {"conv2d depthwise multiplier 2 stride 2",
       {2, 4, 9, 9},
       {8, 1, 3, 3},
       false,
       [](T x, T w, T b) { return conv2d(x, w, b, 2, 1, 1, 4); }},
      {"conv2d 1x1", {4, 16, 5, 5}, {32, 16, 1, 1}, true, [](T x, T w, T b) { return conv2d(x, w, b); }},
      {"conv2d 7x7 stride 2 pad 3 (resnet stem)",
       {2, 3, 20, 20},
       {8, 3, 7, 7},
       false,
       [](T x, T w, T b) { return conv2d(x, w, b, 2, 3); }},
      {"conv2d non-contiguous input",
       {2, 4, 6, 7},
       {5, 4, 3, 3},
       true,
       [](T x, T w, T b) { return conv2d(x, w, b, 1, 1); },
       true},
      {"conv2d depthwise non-contiguous input",
       {2, 4, 6, 7},
       {4, 1, 3, 3},
       false,
       [](T x, T w, T b) { return conv2d(x, w, b, 1, 1, 1, 4); },
       true},
      {"conv3d stride 2 pad 1 groups 2",
       {2, 4, 5, 6, 5},
       {6, 2, 3, 3, 3},
       true,
       [](T x, T w, T b) { return conv3d(x, w, b, 2, 1, 1, 2); }},
      {"conv_transpose2d stride 2 pad 1 output_padding 1",
       {2, 4, 5, 6},
       {4, 6, 3, 3},
       true,
       [](T x, T w, T b) { return conv_transpose2d(x, w, b, 2, 1, 1); }},
      {"conv_transpose2d groups 2 dil 2 batch 1",
       {1, 4, 5, 5},
       {4, 3, 3, 3},
       false,
       [](T x, T w, T b) { return conv_transpose2d(x, w, b, 1, 0, 0, 2, 2); }},
      {"conv_transpose2d non-contiguous input",
       {2, 3, 4, 5},
       {3, 2, 2, 2},
       true,
       [](T x, T w, T b) { return conv_transpose2d(x, w, b, 2); },
       true},
      {"conv_transpose1d stride 3",
       {2, 3, 7},
       {3, 4, 4},
       true,
       [](T x, T w, T b) { return conv_transpose1d(x, w, b, 3, 1); }},
  };
}

TEST(OneDnnConv, OneDnnPathMatchesFloat64) {
  for (const Case& c : cases()) check(c, true);
}

TEST(OneDnnConv, KilnKernelsMatchFloat64) {
  for (const Case& c : cases()) check(c, false);
}

TEST(OneDnnConv, BFloat16BothPathsMatchFloat64) {
  for (const Case& c : cases()) {
    check(c, true, kBFloat16);
    check(c, false, kBFloat16);
  }
}

// Float64 convolutions never go to oneDNN (it has no f64 convolution); the result is kiln's.
TEST(OneDnnConv, Float64StaysOnKilnKernels) {
  OneDnnSwitch on(true);
  const int64_t before = cpu::onednn::executions();
  Tensor y = conv2d(randn({1, 2, 5, 5}, kFloat64), randn({3, 2, 3, 3}, kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_EQ(cpu::onednn::executions(), before);
}

// Called from inside a kiln parallel region (oneDNN then runs on one thread per caller, so
// threads never multiply), each conv still gives the answer it gives outside.
TEST(OneDnnConv, InsideKilnParallelRegion) {
  OneDnnSwitch on(true);
  manual_seed(3);
  std::vector<Tensor> xs;
  for (int i = 0; i < 4; ++i) xs.push_back(randn({2, 16, 9, 9}));
  Tensor w = randn({16, 16, 3, 3});
  std::vector<Tensor> outside, inside(xs.size());
  for (const Tensor& x : xs) outside.push_back(conv2d(x, w, {}, 1, 1));
  parallel_for(0, static_cast<int64_t>(xs.size()), 1, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) inside[i] = conv2d(xs[i], w, {}, 1, 1);
  });
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_TRUE(allclose(inside[i], outside[i], 1e-5, 1e-5)) << i;
}

TEST(OneDnnConv, InfoStrings) {
  if (backends::onednn::is_available()) {
    EXPECT_FALSE(backends::onednn::version().empty());
    EXPECT_FALSE(backends::onednn::isa().empty());
  } else {
    EXPECT_FALSE(backends::onednn::enabled());
    EXPECT_TRUE(backends::onednn::version().empty());
  }
}

}  // namespace
