// Hand tests of CUDA paths the op samples reach only at small sizes: the block scan for long
// lines, sort/topk over long rows with NaN, -0 and ties, and pooling/convolution at model shapes.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "dispatch/dispatch.h"
#include "kiln/optim.h"
#include "tests/cuda/cuda_test.h"

namespace kiln {
namespace {

using testing::expect_close;

TEST(CudaNn, LongScansUseTheBlockScan) {
  KILN_REQUIRE_CUDA();
  manual_seed(21);
  Tensor x = randn({3, 5000}, kFloat64);
  expect_close(cumsum(x.cuda(), 1), cumsum(x, 1), 1e-10, 1e-10);
  Tensor f = randn({2, 9000});
  expect_close(cumsum(f.cuda(), -1), cumsum(f, -1), 1e-4, 1e-4);
  Tensor p = (rand({2, 3000}, kFloat64) * 0.02 + 0.99);
  expect_close(cumprod(p.cuda(), 1), cumprod(p, 1), 1e-9, 1e-12);
  Tensor i = randint(-1000, 1000, {2, 7000});  // wrapping int64 sums are exact in any order
  expect_close(cumsum(i.cuda(), 1), cumsum(i, 1), 0, 0);
}

TEST(CudaNn, SortAndTopkOrderAsTheCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(22);
  Tensor x = randint(0, 50, {4, 3000}).to(kFloat32);  // many ties
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x.index_put_({Tensor(tensor({0, 1, 2}, kInt64)), Tensor(tensor({5, 7, 9}, kInt64))}, tensor({nan, -0.0f, nan}));
  for (bool desc : {false, true}) {
    auto [v, i] = sort(x.cuda(), 1, desc, true);
    auto [cv, ci] = sort(x, 1, desc, true);
    expect_close(v, cv, 0, 0);
    expect_close(i, ci, 0, 0);
  }
  auto [tv, ti] = topk(x.cuda(), 17, 1);
  auto [ctv, cti] = topk(x, 17, 1);
  expect_close(tv, ctv, 0, 0);
  expect_close(ti, cti, 0, 0);
  Tensor h = randn({5, 300}).to(kFloat16);
  auto [hv, hi] = sort(h.cuda(), 0);
  auto [chv, chi] = sort(h, 0);
  expect_close(hv, chv, 0, 0);
  expect_close(hi, chi, 0, 0);
}

TEST(CudaNn, ConvAndPoolAtResnetShapes) {
  KILN_REQUIRE_CUDA();
  manual_seed(23);
  Tensor x = randn({2, 3, 64, 64}), w = randn({16, 3, 7, 7}) * 0.1, b = randn({16});
  Tensor gx = x.cuda().requires_grad_(true), gw = w.cuda().requires_grad_(true), gb = b.cuda().requires_grad_(true);
  Tensor cx = x.clone().requires_grad_(true), cw = w.clone().requires_grad_(true), cb = b.clone().requires_grad_(true);
  Tensor gy = max_pool2d(conv2d(gx, gw, gb, {2}, {3}), {3}, {2}, {1});
  Tensor cy = max_pool2d(conv2d(cx, cw, cb, {2}, {3}), {3}, {2}, {1});
  expect_close(gy, cy, 1e-4, 1e-4);
  (gy * gy).sum().backward();
  (cy * cy).sum().backward();
  expect_close(gx.grad(), cx.grad(), 1e-3, 1e-3);
  expect_close(gw.grad(), cw.grad(), 1e-3, 1e-2);
  expect_close(gb.grad(), cb.grad(), 1e-3, 1e-2);
}

// cuDNN's float32 convolutions run in TF32 by default (torch.backends.cudnn.allow_tf32): the
// result is within TF32's rounding of the float32 one, and switching it off gives float32 again.
TEST(CudaNn, Tf32ConvolutionsAreTheDefault) {
  KILN_REQUIRE_CUDA();
  // cuda_test.h turned it off at load time for the other tests; this is the library's default.
  backends::cudnn::allow_tf32(true);
  manual_seed(24);
  Tensor x = randn({4, 64, 32, 32}).cuda(), w = randn({64, 64, 3, 3}).cuda();
  Tensor want = conv2d(x.cpu().to(kFloat64), w.cpu().to(kFloat64), {}, {1}, {1});
  auto max_err = [&](const Tensor& got) { return (got.cpu().to(kFloat64) - want).abs().max().item<double>(); };
  double scale = want.abs().max().item<double>();
  double tf32 = max_err(conv2d(x, w, {}, {1}, {1}));
  backends::cudnn::allow_tf32(false);
  double fp32 = max_err(conv2d(x, w, {}, {1}, {1}));
  EXPECT_LE(tf32, 4e-3 * scale);  // 576 products rounded to 11 significant bits
  EXPECT_LE(fp32, 1e-5 * scale);
  EXPECT_LT(fp32, tf32);  // TF32 did run
}

// got (any device, any floating dtype) against a float64 CPU result, within tol of the largest
// magnitude of want (half types round each output once; the kernels accumulate in float32).
void expect_close_scaled(const Tensor& got, const Tensor& want, double tol) {
  Tensor w = want.detach().to(kFloat64);
  const double scale = std::max(1.0, w.abs().max().item<double>());
  expect_close(got.detach().cpu().to(kFloat64), w, tol, tol * scale);
}

// Depthwise convolutions (groups = in channels) run on kiln's own kernels (depthwise.cu), not
// cuDNN: the forward and all three gradients against the CPU in float64 on the same rounded inputs.
// A convolution `conv(x, w, b)` on CUDA against float64 on the CPU in every floating dtype: the
// output and the gradients of x, w (and b) under a random upstream gradient (rounded to the dtype
// on both sides, so it reaches every tap). `view` makes the input non-contiguous where asked.
void expect_conv_as_the_cpu(const std::string& name, const std::function<Tensor(const Tensor&, const Tensor&, const Tensor&)>& conv,
                            const std::function<Tensor(const Tensor&)>& view, const Tensor& x64, const Tensor& w64,
                            const Tensor& b64, bool bias) {
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(name + " " + std::string(dtype_name(t)));
    const double tol = t == kFloat64 ? 1e-10 : t == kFloat32 ? 1e-4 : 1e-2;
    auto leaf = [&](const Tensor& v, bool on_gpu) {
      Tensor r = on_gpu ? v.to(t).cuda() : v.to(t).to(kFloat64).clone();
      return r.requires_grad_(true);
    };
    Tensor cx = leaf(x64, false), cw = leaf(w64, false), cb = leaf(b64, false);
    Tensor gx = leaf(x64, true), gw = leaf(w64, true), gb = leaf(b64, true);
    Tensor cy = conv(view(cx), cw, bias ? cb : Tensor());
    Tensor gy = conv(view(gx), gw, bias ? gb : Tensor());
    ASSERT_EQ(gy.dtype(), t);
    expect_close_scaled(gy, cy, tol);
    const Tensor up = randn(cy.sizes(), kFloat64).to(t);
    (cy * up.to(kFloat64)).sum().backward();
    (gy * up.cuda()).sum().backward();
    expect_close_scaled(gx.grad(), cx.grad(), tol);
    expect_close_scaled(gw.grad(), cw.grad(), tol);
    if (bias) expect_close_scaled(gb.grad(), cb.grad(), tol);
  }
}

TEST(CudaNn, DepthwiseConvolutionAsTheCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(27);
  struct Case {
    std::string name;
    std::vector<int64_t> x, w, stride, pad, dil;
    bool bias, transposed_input;
  };
  const std::vector<Case> cases = {
      {"3x3 stride 1 pad 1 + bias", {2, 8, 13, 11}, {8, 1, 3, 3}, {1}, {1}, {1}, true, false},
      {"3x3 stride 2 pad 1", {2, 8, 14, 15}, {8, 1, 3, 3}, {2}, {1}, {1}, false, false},
      {"3x3 dilation 2 pad 2 multiplier 2 + bias", {2, 4, 12, 10}, {8, 1, 3, 3}, {1}, {2}, {2}, true, false},
      {"5x5 stride 2 pad 2 multiplier 2 + bias", {3, 4, 17, 16}, {8, 1, 5, 5}, {2}, {2}, {1}, true, false},
      {"1x7 stride (1,2) pad (0,3)", {2, 6, 5, 20}, {6, 1, 1, 7}, {1, 2}, {0, 3}, {1}, false, false},
      {"3x3 stride 2, non-contiguous input + bias", {2, 8, 13, 11}, {8, 1, 3, 3}, {2}, {1}, {1}, true, true},
      {"1-d stride 2 pad 1 multiplier 2 + bias", {2, 5, 30}, {10, 1, 3}, {2}, {1}, {1}, true, false},
      {"MobileNetV2's 3x3 stride 2", {4, 32, 56, 56}, {32, 1, 3, 3}, {2}, {1}, {1}, false, false},
  };
  for (const Case& k : cases) {
    const int64_t groups = k.x[1];
    auto conv = [&](const Tensor& x, const Tensor& w, const Tensor& b) {
      return k.x.size() == 3 ? conv1d(x, w, b, k.stride, k.pad, k.dil, groups)
                             : conv2d(x, w, b, k.stride, k.pad, k.dil, groups);
    };
    // The non-contiguous input is a transposed view of an [N, C, W, H] leaf.
    std::vector<int64_t> xs = k.x;
    if (k.transposed_input) std::swap(xs[2], xs[3]);
    auto view = [&](const Tensor& x) { return k.transposed_input ? x.transpose(2, 3) : x; };
    const Tensor x64 = randn(xs, kFloat64), w64 = randn(k.w, kFloat64) * 0.3, b64 = randn({k.w[0]}, kFloat64);
    expect_conv_as_the_cpu(k.name, conv, view, x64, w64, b64, k.bias);
  }
}

// 1x1 convolutions run as batched GEMMs (conv_gemm.cpp), forward and the three gradients (the
// weight's both ways: per-image products, or one GEMM over copies), against float64 CPU
// convolutions; the others (stride 2, groups, padding) stay on cuDNN.
TEST(CudaNn, OneByOneConvolutionAsTheCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(28);
  struct Case {
    std::string name;
    std::vector<int64_t> x, w;
    bool bias, transposed_input;
    std::vector<int64_t> stride;
  };
  const std::vector<Case> cases = {
      {"MobileNetV2's 32 -> 192 expansion + bias", {4, 32, 28, 28}, {192, 32, 1, 1}, true, false, {1}},
      {"192 -> 32 projection", {3, 192, 14, 14}, {32, 192, 1, 1}, false, false, {1}},
      {"non-contiguous input + bias", {2, 8, 9, 7}, {5, 8, 1, 1}, true, true, {1}},
      {"1-d + bias", {3, 6, 17}, {4, 6, 1}, true, false, {1}},
      {"one channel in", {2, 1, 5, 5}, {3, 1, 1, 1}, true, false, {1}},
      {"stride 2 (cuDNN)", {2, 8, 10, 10}, {6, 8, 1, 1}, true, false, {2}},
      // Many channels, small images: the weight gradient as one GEMM over copies of g and x.
      {"MobileNetV2's 320 -> 1280 at 7x7 + bias", {2, 320, 7, 7}, {1280, 320, 1, 1}, true, false, {1}},
      {"many channels, non-contiguous input", {2, 64, 2, 3}, {80, 64, 1, 1}, false, true, {1}},
  };
  for (const Case& k : cases) {
    auto conv = [&](const Tensor& x, const Tensor& w, const Tensor& b) {
      return k.x.size() == 3 ? conv1d(x, w, b, k.stride) : conv2d(x, w, b, k.stride);
    };
    std::vector<int64_t> xs = k.x;
    if (k.transposed_input) std::swap(xs[2], xs[3]);
    auto view = [&](const Tensor& x) { return k.transposed_input ? x.transpose(2, 3) : x; };
    const Tensor x64 = randn(xs, kFloat64), w64 = randn(k.w, kFloat64) * 0.3, b64 = randn({k.w[0]}, kFloat64);
    expect_conv_as_the_cpu(k.name, conv, view, x64, w64, b64, k.bias);
  }
}

TEST(CudaNn, SearchsortedAsTheCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(24);
  Tensor seq = std::get<0>(sort(randn({3, 40}), 1)), v = randn({3, 25});
  for (bool right : {false, true}) {
    expect_close(searchsorted(seq.cuda(), v.cuda(), false, right), searchsorted(seq, v, false, right), 0, 0);
    expect_close(searchsorted(seq[0].cuda(), v.cuda(), true, right), searchsorted(seq[0], v, true, right), 0, 0);
  }
  Tensor un = randn({3, 40});
  Tensor order = argsort(un, 1);
  expect_close(searchsorted(un.cuda(), v.cuda(), false, false, std::nullopt, order.cuda()),
               searchsorted(un, v, false, false, std::nullopt, order), 0, 0);
}

TEST(CudaNn, NonzeroAndMaskedSelect) {
  KILN_REQUIRE_CUDA();
  manual_seed(25);
  Tensor x = randint(-1, 2, {7, 9, 11}).to(kFloat32);  // a third zeros
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x.index_put_({Tensor(tensor({0, 1}, kInt64)), Tensor(tensor({0, 2}, kInt64)), Tensor(tensor({0, 3}, kInt64))},
               tensor({nan, -0.0f}));
  expect_close(nonzero(x.cuda()), nonzero(x), 0, 0);
  expect_close(nonzero(x.to(kInt8).cuda()), nonzero(x.to(kInt8)), 0, 0);
  expect_close(nonzero(zeros({0, 3}).cuda()), nonzero(zeros({0, 3})), 0, 0);
  Tensor m = gt(randn({9, 1}), Scalar(0.0));  // broadcast against [7, 9, 11]
  expect_close(masked_select(x.cuda(), m.cuda()), masked_select(x, m), 0, 0);
  Tensor y = randn({5, 6}).to(kFloat64), ym = gt(y, Scalar(0.2));
  expect_close(masked_select(y.cuda(), ym.cuda()), masked_select(y, ym), 0, 0);
  expect_close(y.cuda().index({ym.cuda()}), y.index({ym}), 0, 0);  // a 2-d mask: nonzero, then two index tensors
}

// The fused softmax's three paths (a warp per short row, a block per long row, a thread per
// column for other dims) and layer_norm's two, against the CPU kernels.
TEST(CudaNn, FusedSoftmaxAndLayerNorm) {
  KILN_REQUIRE_CUDA();
  manual_seed(26);
  Tensor x = randn({3, 5000}) * 4;
  expect_close(softmax(x.cuda(), 1), softmax(x, 1), 1e-5, 1e-8);
  expect_close(log_softmax(x.cuda(), -1), log_softmax(x, -1), 1e-5, 1e-5);
  Tensor d = randn({2, 3000}, kFloat64) * 10;
  expect_close(softmax(d.cuda(), 1), softmax(d, 1), 1e-10, 1e-14);
  expect_close(log_softmax(d.cuda(), 1), log_softmax(d, 1), 1e-10, 1e-10);
  Tensor y = randn({4, 37, 6});
  for (int64_t dim : {0, 1, 2, -1}) {
    expect_close(softmax(y.cuda(), dim), softmax(y, dim), 1e-5, 1e-7);
    expect_close(log_softmax(y.cuda(), dim), log_softmax(y, dim), 1e-5, 1e-5);
  }
  expect_close(softmax(y.cuda().transpose(1, 2), 1), softmax(y.transpose(1, 2), 1), 1e-5, 1e-7);  // strided input
  Tensor h = randn({5, 2000}).to(kFloat16);
  expect_close(softmax(h.cuda(), 1), softmax(h, 1), 1e-3, 1e-5);
  expect_close(softmax(h.cuda(), 1, kFloat32), softmax(h, 1, kFloat32), 1e-5, 1e-7);  // dtype: converted first
  expect_close(log_softmax(h.to(kBFloat16).cuda(), 0), log_softmax(h.to(kBFloat16), 0), 1e-2, 1e-2);
  // -inf adds nothing; a row of only -inf, or one with a NaN or +inf, is NaN throughout (as the CPU).
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t n : {40, 3000}) {
    Tensor s = randn({4, n});
    s.select(0, 0).fill_(-inf);
    s.select(0, 1).narrow(0, 3, 7).fill_(-inf);
    s.select(0, 2).narrow(0, 5, 1).fill_(nan);
    s.select(0, 3).narrow(0, 9, 1).fill_(inf);
    expect_close(softmax(s.cuda(), 1), softmax(s, 1), 1e-5, 1e-8);
    expect_close(log_softmax(s.cuda(), 1), log_softmax(s, 1), 1e-5, 1e-5);
    expect_close(softmax(s.t().contiguous().cuda(), 0), softmax(s.t().contiguous(), 0), 1e-5, 1e-8);
  }
  expect_close(softmax(randn({0, 7}).cuda(), 1), softmax(randn({0, 7}), 1));
  Tensor one = randn({});
  expect_close(softmax(one.cuda(), 0), softmax(one, 0));
  for (int64_t n : {64, 3000}) {
    Tensor a = randn({6, 2, n}) * 3 + 1, w = randn({2, n}), b = randn({2, n});
    expect_close(layer_norm(a.cuda(), {2, n}, w.cuda(), b.cuda()), layer_norm(a, {2, n}, w, b), 1e-4, 1e-4);
    expect_close(layer_norm(a.cuda(), {n}), layer_norm(a, {n}), 1e-4, 1e-4);
    Tensor ah = a.to(kBFloat16);
    expect_close(layer_norm(ah.cuda(), {n}, w[0].cuda(), b[0].cuda()), layer_norm(ah, {n}, w[0], b[0]), 2e-2, 2e-2);
  }
}

// Note [CUDA foreach]: a foreach step over many tensors (several launches' worth, one split
// across launches, an empty one, a strided one, three dtypes) equals the loop of single-tensor
// ops bit for bit.
TEST(CudaNn, ForeachEqualsTheLoopOfSingleOps) {
  KILN_REQUIRE_CUDA();
  manual_seed(27);
  std::vector<std::vector<int64_t>> shapes = {{0}, {1}, {7, 3}, {65539}, {300001}, {11000000}};
  for (int64_t i = 0; i < 30; ++i) shapes.push_back({i + 1, 5});
  auto make = [&]() {
    std::vector<Tensor> v;
    for (const auto& s : shapes) v.push_back(rand(s).add(0.25).cuda());
    v.push_back(rand({40, 30}).add(0.25).cuda().t());  // not contiguous
    v.push_back(rand({9, 4}, kFloat64).add(0.25).cuda());
    v.push_back(rand({33}).add(0.25).to(kFloat16).cuda());
    v.push_back(rand({17}).add(0.25).to(kBFloat16).cuda());
    return v;
  };
  // Copies keeping each layout (the strided one stays strided).
  auto copies = [](const std::vector<Tensor>& v) {
    std::vector<Tensor> c;
    for (const Tensor& x : v) c.push_back(x.is_contiguous() ? x.clone() : x.t().clone().t());
    return c;
  };
  auto expect_same = [](const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i], want[i].cpu(), 0, 0);
  };
  const std::vector<Tensor> self = make(), t1 = make(), t2 = make();
  ASSERT_FALSE(self[shapes.size()].is_contiguous());
  const size_t n = self.size();
  std::vector<double> per(n);
  for (size_t i = 0; i < n; ++i) per[i] = 0.05 + 0.01 * static_cast<double>(i);
  std::vector<Tensor> a = copies(self), b = copies(self);
  _foreach_mul_(a, 0.9);
  _foreach_add_(a, t1, 0.1);
  _foreach_add_(a, t2);
  _foreach_addcmul_(a, t1, t2, per);
  _foreach_addcdiv_(a, t1, t2, -0.3);
  _foreach_lerp_(a, t2, per);
  _foreach_maximum_(a, t1);
  _foreach_add_(a, per);
  _foreach_div_(a, 1.7);
  _foreach_mul_(a, per);
  for (size_t i = 0; i < n; ++i) {
    b[i].mul_(0.9);
    b[i].add_(t1[i], 0.1);
    b[i].add_(t2[i]);
    b[i].addcmul_(t1[i], t2[i], per[i]);
    b[i].addcdiv_(t1[i], t2[i], -0.3);
    b[i].lerp_(t2[i], per[i]);
    b[i].copy_(maximum(b[i], t1[i]));
    b[i].add_(Scalar(per[i]));
    b[i].div_(1.7);
    b[i].mul_(Scalar(per[i]));
  }
  expect_same(a, b);
  std::vector<Tensor> want_sqrt, want_neg, want_add, want_addcmul;
  for (size_t i = 0; i < n; ++i) {
    want_sqrt.push_back(sqrt(b[i]));
    want_neg.push_back(neg(b[i]));
    want_add.push_back(add(b[i], t1[i], 2));
    want_addcmul.push_back(addcmul(b[i], t1[i], t2[i], per[i]));
  }
  expect_same(_foreach_sqrt(a), want_sqrt);
  expect_same(_foreach_neg(a), want_neg);
  expect_same(_foreach_add(a, t1, 2), want_add);
  expect_same(_foreach_addcmul(a, t1, t2, per), want_addcmul);
}

// _fused_adam_ (Note [Fused Adam]) on CUDA: AdamW and Adam(amsgrad, maximize, coupled weight decay)
// over five steps against the CPU's foreach step; sizes around the 64K-element chunk and the
// 320-block launch table, a 16-byte-unaligned view, an empty tensor; fused is the default here.
TEST(CudaNn, FusedAdamMatchesCpuForeach) {
  KILN_REQUIRE_CUDA();
  const std::vector<std::vector<int64_t>> shapes = {{0},     {1},      {7, 3},     {65536},
                                                    {65539}, {300001}, {11000000}, {768, 768}};
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "AdamW" : "Adam amsgrad maximize weight_decay");
    manual_seed(31);
    std::vector<Tensor> cpu, gpu;
    for (const auto& s : shapes) gpu.push_back(randn(s).cuda());
    gpu.push_back(randn({1001}).cuda().slice(0, 1));  // dense, but one element past 16-byte alignment
    for (Tensor& t : gpu) {
      cpu.push_back(t.cpu().requires_grad_());
      t.requires_grad_();
    }
    auto make = [&](std::vector<Tensor> params, std::optional<bool> fused) -> std::unique_ptr<optim::Optimizer> {
      if (variant == 0)
        return std::make_unique<optim::AdamW>(params,
                                              optim::AdamWOptions{.lr = 0.01, .weight_decay = 0.1, .fused = fused});
      return std::make_unique<optim::Adam>(
          params,
          optim::AdamOptions{.lr = 0.01, .weight_decay = 0.05, .amsgrad = true, .maximize = true, .fused = fused});
    };
    auto ref = make(cpu, false);
    auto opt = make(gpu, std::nullopt);  // unset: dense CUDA tensors take the fused step
    std::vector<uint32_t> counts(kNumOps, 0);
    for (int t = 0; t < 5; ++t) {
      Generator gen(300 + static_cast<uint64_t>(t));
      for (size_t k = 0; k < cpu.size(); ++k) {
        Tensor g = randn(cpu[k].sizes(), {}, &gen);
        cpu[k].set_grad(g);
        gpu[k].set_grad(g.cuda());
      }
      ref->step();
      set_op_call_counts(&counts);
      opt->step();
      set_op_call_counts(nullptr);
    }
    EXPECT_EQ(counts[static_cast<size_t>(OpId::_fused_adam_)], 5u);
    for (size_t k = 0; k < cpu.size(); ++k) {
      SCOPED_TRACE("parameter " + std::to_string(k));
      expect_close(gpu[k].detach().cpu(), cpu[k].detach(), 1e-5, 1e-6);
    }
    auto sd = opt->state_dict(), sd_ref = ref->state_dict();
    for (const auto& [key, v] : sd_ref.state) {
      SCOPED_TRACE(key);
      expect_close(sd.state.at(key).cpu(), v, 1e-5, 1e-6);
    }
  }
}

// tril/triu, roll, repeat and one_hot: the kernels' index forms (negative and large diagonals,
// several rolled dims, the flattened roll, leading repeat dims, a repeat past 8 dims) and
// one_hot's error for a class value out of range.
TEST(CudaNn, TriRollRepeatOneHot) {
  KILN_REQUIRE_CUDA();
  manual_seed(28);
  Tensor x = randn({2, 5, 7});
  for (int64_t k : {-7, -2, 0, 1, 3, 9}) {
    expect_close(tril(x.cuda(), k), tril(x, k), 0, 0);
    expect_close(triu(x.cuda().transpose(1, 2), k), triu(x.transpose(1, 2), k), 0, 0);
    expect_close(triu(x.to(kFloat16).cuda(), k), triu(x.to(kFloat16), k), 0, 0);
  }
  Tensor xi = randint(-9, 9, {6, 4, 5});
  expect_close(roll(xi.cuda(), {2, -1}, {0, 2}), roll(xi, {2, -1}, {0, 2}), 0, 0);
  expect_close(roll(xi.cuda(), {13}, {1}), roll(xi, {13}, {1}), 0, 0);
  expect_close(roll(xi.cuda().transpose(0, 2), {-7}, {}), roll(xi.transpose(0, 2), {-7}, {}), 0, 0);
  expect_close(xi.cuda().repeat({2, 1, 3, 2}), xi.repeat({2, 1, 3, 2}), 0, 0);
  expect_close(xi.cuda().transpose(0, 1).repeat({1, 2, 1}), xi.transpose(0, 1).repeat({1, 2, 1}), 0, 0);
  Tensor small = randn({2, 1, 2});
  std::vector<int64_t> many = {1, 2, 1, 2, 1, 2, 1, 2, 2};  // 9 dims, more than one copy can take split
  expect_close(small.cuda().repeat(many), small.repeat(many), 0, 0);
  Tensor cls = randint(0, 6, {3, 4});
  expect_close(one_hot(cls.cuda(), 6), one_hot(cls, 6), 0, 0);
  Tensor wrong = cls.clone();
  wrong.select(0, 1).select(0, 2).fill_(6);
  EXPECT_THROW(one_hot(wrong.cuda(), 6), Error);
  wrong.select(0, 0).select(0, 3).fill_(-1);
  EXPECT_THROW(one_hot(wrong.cuda(), 6), Error);
}

// batch_norm's CUDA kernels (statistics in Welford partials, then one normalising pass; the
// backward's _batch_norm_backward) against the CPU's decomposition and its double-precision
// _batch_norm_backward, in training: output, running statistics after the call (updated in
// place without a version bump), and the input's, weight's and bias's gradients; then in
// evaluation, output and the input's and weight's gradients.
TEST(CudaNn, BatchNormTrainingAsTheCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(27);
  // Largest difference relative to the largest magnitude of the CPU's values.
  auto expect_rel = [](const Tensor& got, const Tensor& want, double tol) {
    ASSERT_EQ(got.dtype(), want.dtype());
    const Tensor w = want.to(kFloat64);
    const double scale = std::max(w.abs().max().item<double>(), 1e-30);
    const double err = (got.cpu().to(kFloat64) - w).abs().max().item<double>();
    EXPECT_LE(err, tol * scale) << "largest difference " << err << " of values up to " << scale;
  };
  for (DType t : {kFloat32, kBFloat16}) {
    const double tol = t == kFloat32 ? 2e-5 : 2e-2;
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{8, 64, 28, 28}, std::vector<int64_t>{64, 300}, std::vector<int64_t>{4, 16, 1000}}) {
      SCOPED_TRACE(std::to_string(shape.size()) + "-d input of " + std::to_string(shape[1]) + " channels, " +
                   std::string(dtype_name(t)));
      const int64_t C = shape[1];
      Tensor x = (randn(shape) * 3 + 5).to(t);  // an offset mean: the variance must not cancel
      Tensor w = randn({C}).to(t), b = randn({C}).to(t), r = randn(shape).to(t);
      Tensor rm = randn({C}), rv = rand({C}) + 0.5;
      Tensor grm = rm.cuda(), grv = rv.cuda(), crm = rm.clone(), crv = rv.clone();
      Tensor gx = x.cuda().requires_grad_(true), gw = w.cuda().requires_grad_(true), gb = b.cuda().requires_grad_(true);
      Tensor cx = x.clone().requires_grad_(true), cw = w.clone().requires_grad_(true),
             cb = b.clone().requires_grad_(true);
      const uint32_t v0 = grm._version();
      Tensor gy = batch_norm(gx, grm, grv, gw, gb, /*training=*/true, 0.1, 1e-5);
      Tensor cy = batch_norm(cx, crm, crv, cw, cb, /*training=*/true, 0.1, 1e-5);
      expect_rel(gy, cy, tol);
      expect_close(grm, crm, 1e-5, 1e-5);
      expect_close(grv, crv, 1e-5, 1e-5);
      EXPECT_EQ(grm._version(), v0);
      (gy * r.cuda()).sum().backward();
      (cy * r).sum().backward();
      expect_rel(gx.grad(), cx.grad(), t == kFloat32 ? 1e-4 : 3e-2);
      expect_rel(gw.grad(), cw.grad(), t == kFloat32 ? 1e-4 : 3e-2);
      expect_rel(gb.grad(), cb.grad(), t == kFloat32 ? 1e-4 : 3e-2);
      // Evaluation with the updated statistics, and without bias.
      Tensor ex = x.cuda().requires_grad_(true), ew = w.cuda().requires_grad_(true);
      Tensor cex = x.clone().requires_grad_(true), cew = w.clone().requires_grad_(true);
      Tensor ey = batch_norm(ex, grm, grv, ew, {}, false, 0.1, 1e-5);
      Tensor cey = batch_norm(cex, crm, crv, cew, {}, false, 0.1, 1e-5);
      expect_rel(ey, cey, tol);
      (ey * r.cuda()).sum().backward();
      (cey * r).sum().backward();
      expect_rel(ex.grad(), cex.grad(), t == kFloat32 ? 1e-4 : 3e-2);
      expect_rel(ew.grad(), cew.grad(), t == kFloat32 ? 1e-4 : 3e-2);
    }
  }
  // A strided input and no running statistics; an empty batch leaves the statistics alone.
  Tensor x = randn({6, 5, 7});
  expect_close(batch_norm(x.cuda().transpose(0, 2), {}, {}, {}, {}, true),
               batch_norm(x.transpose(0, 2), {}, {}, {}, {}, true), 1e-5, 1e-5);
  Tensor grm = zeros({5}).cuda(), grv = ones({5}).cuda();
  Tensor e = batch_norm(zeros({0, 5, 3}).cuda(), grm, grv, {}, {}, true);
  EXPECT_EQ(e.numel(), 0);
  expect_close(grm, zeros({5}), 0, 0);
  expect_close(grv, ones({5}), 0, 0);
}

}  // namespace
}  // namespace kiln
