// Samples for convolution and pooling. References are direct fp64 loops over
// every kernel tap / window (no im2col, nothing shared with the kernels).
#include <limits>

#include "dispatch/dispatch.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

const std::vector<DType> kFloatTypes = {kFloat32, kFloat64, kFloat16, kBFloat16};
std::string tname(DType t) { return std::string(dtype_name(t)); }
Tensor in(const Shape& s, DType t, uint64_t seed, bool noncontig = false) {
  return make_input(s, t, seed, -2, 2, noncontig);
}

// ---- convolution reference ----
struct ConvCfg {
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1, oph = 0, opw = 0, groups = 1;
  bool transposed = false;
};

Shape conv_out(const Shape& x, const Shape& w, const ConvCfg& c) {
  if (!c.transposed)
    return {x[0], w[0], (x[2] + 2 * c.ph - c.dh * (w[2] - 1) - 1) / c.sh + 1,
            (x[3] + 2 * c.pw - c.dw * (w[3] - 1) - 1) / c.sw + 1};
  return {x[0], w[1] * c.groups, (x[2] - 1) * c.sh - 2 * c.ph + c.dh * (w[2] - 1) + c.oph + 1,
          (x[3] - 1) * c.sw - 2 * c.pw + c.dw * (w[3] - 1) + c.opw + 1};
}

// Calls tap(out_flat, x_flat, w_flat, out_channel) for every product the
// convolution sums: direct convs gather from the input, transposed convs
// scatter each input element through the kernel.
void conv_taps(const Shape& x, const Shape& w, const ConvCfg& c,
               const std::function<void(int64_t, int64_t, int64_t, int64_t)>& tap) {
  Shape o = conv_out(x, w, c);
  const int64_t N = x[0], H = x[2], W = x[3], kh = w[2], kw = w[3];
  if (!c.transposed) {
    const int64_t Co = w[0], Cig = w[1], Cog = Co / c.groups;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t co = 0; co < Co; ++co)
        for (int64_t oh = 0; oh < o[2]; ++oh)
          for (int64_t ow = 0; ow < o[3]; ++ow)
            for (int64_t cl = 0; cl < Cig; ++cl)
              for (int64_t i = 0; i < kh; ++i)
                for (int64_t j = 0; j < kw; ++j) {
                  const int64_t ih = oh * c.sh - c.ph + i * c.dh, iw = ow * c.sw - c.pw + j * c.dw;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const int64_t ci = (co / Cog) * Cig + cl;
                  tap(((n * Co + co) * o[2] + oh) * o[3] + ow, ((n * x[1] + ci) * H + ih) * W + iw,
                      ((co * Cig + cl) * kh + i) * kw + j, co);
                }
  } else {
    const int64_t Ci = x[1], Cog = w[1], Cig = Ci / c.groups, Co = o[1];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t ci = 0; ci < Ci; ++ci)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t ww = 0; ww < W; ++ww)
            for (int64_t cl = 0; cl < Cog; ++cl)
              for (int64_t i = 0; i < kh; ++i)
                for (int64_t j = 0; j < kw; ++j) {
                  const int64_t oh = h * c.sh - c.ph + i * c.dh, ow = ww * c.sw - c.pw + j * c.dw;
                  if (oh < 0 || oh >= o[2] || ow < 0 || ow >= o[3]) continue;
                  const int64_t co = (ci / Cig) * Cog + cl;
                  tap(((n * Co + co) * o[2] + oh) * o[3] + ow, ((n * Ci + ci) * H + h) * W + ww,
                      ((ci * Cog + cl) * kh + i) * kw + j, co);
                }
  }
}

Ref ref_conv(const Ref& x, const Ref& w, const Tensor& bias, const ConvCfg& c) {
  Ref out(conv_out(x.shape, w.shape, c));
  const int64_t plane = out.shape[2] * out.shape[3];
  if (bias.defined()) {
    Ref b = Ref::of(bias);
    for (int64_t i = 0; i < out.numel(); ++i) out.v[i] = b.v[(i / plane) % out.shape[1]];
  }
  conv_taps(x.shape, w.shape, c, [&](int64_t o, int64_t i, int64_t k, int64_t) { out.v[o] += x.v[i] * w.v[k]; });
  return out;
}

OpSample conv_sample(std::string name, TensorList inputs, OpFn fn, ConvCfg cfg) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = std::move(inputs);
  s.fn = std::move(fn);
  s.atol = 1e-4;
  s.reference = [cfg](const TensorList& t) {
    Ref x = Ref::of(t[0]), w = Ref::of(t[1]);
    // conv1d: [N, C, L] as [N, C, 1, L]; unbatched: a batch of one.
    const bool one_d = w.dim() == 3, unbatched = x.dim() == w.dim() - 1;
    if (unbatched) x.shape.insert(x.shape.begin(), 1);
    if (one_d) {
      w.shape.insert(w.shape.begin() + 2, 1);
      x.shape.insert(x.shape.begin() + 2, 1);
    }
    Ref out = ref_conv(x, w, t.size() > 2 ? t[2] : Tensor(), cfg);
    Shape os = out.shape;
    if (one_d) os.erase(os.begin() + 2);
    if (unbatched) os.erase(os.begin());
    out.shape = os;
    return TensorList{out.to(t[0].dtype())};
  };
  return s;
}

std::vector<OpSample> conv2d_samples() {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes) {
    ConvCfg c;
    c.ph = c.pw = 1;
    v.push_back(conv_sample("3x3 pad 1 + bias " + tname(t), {in({2, 2, 4, 4}, t, 1), in({3, 2, 3, 3}, t, 2), in({3}, t, 3)},
                            [](const TensorList& x) { return TensorList{conv2d(x[0], x[1], x[2], 1, 1)}; }, c));
  }
  {
    ConvCfg c;
    c.sh = 2, c.sw = 1, c.ph = 1, c.pw = 0, c.dh = 2, c.dw = 1, c.groups = 2;
    v.push_back(conv_sample("stride (2,1) pad (1,0) dilation (2,1) groups 2", {in({1, 4, 6, 5}, kFloat64, 4), in({4, 2, 2, 2}, kFloat64, 5)},
                            [](const TensorList& x) {
                              return TensorList{conv2d(x[0], x[1], {}, Shape{2, 1}, Shape{1, 0}, Shape{2, 1}, 2)};
                            }, c));
  }
  {
    ConvCfg c;
    c.ph = c.pw = 1, c.groups = 3;
    v.push_back(conv_sample("depthwise", {in({2, 3, 5, 5}, kFloat32, 6), in({3, 1, 3, 3}, kFloat32, 7), in({3}, kFloat32, 8)},
                            [](const TensorList& x) { return TensorList{conv2d(x[0], x[1], x[2], 1, 1, 1, 3)}; }, c));
    v.push_back(conv_sample("depthwise multiplier 2", {in({1, 2, 4, 4}, kFloat64, 9), in({4, 1, 3, 3}, kFloat64, 10)},
                            [](const TensorList& x) { return TensorList{conv2d(x[0], x[1], {}, 1, 1, 1, 2)}; },
                            [] { ConvCfg k; k.ph = k.pw = 1; k.groups = 2; return k; }()));
  }
  v.push_back(conv_sample("1x1", {in({2, 3, 3, 3}, kFloat64, 11), in({2, 3, 1, 1}, kFloat64, 12)},
                          [](const TensorList& x) { return TensorList{conv2d(x[0], x[1])}; }, ConvCfg{}));
  {
    ConvCfg c;
    c.sh = c.sw = 2;
    v.push_back(conv_sample("unbatched, stride 2", {in({2, 5, 5}, kFloat64, 13), in({2, 2, 3, 3}, kFloat64, 14), in({2}, kFloat64, 15)},
                            [](const TensorList& x) { return TensorList{conv2d(x[0], x[1], x[2], 2)}; }, c));
  }
  v.push_back(conv_sample("non-contiguous", {in({1, 2, 4, 4}, kFloat32, 16, true), in({2, 2, 2, 2}, kFloat32, 17, true)},
                          [](const TensorList& x) { return TensorList{conv2d(x[0], x[1])}; }, ConvCfg{}));
  {
    ConvCfg c;
    c.sh = c.sw = 3, c.ph = c.pw = 2;
    v.push_back(conv_sample("larger float32", {in({2, 8, 11, 9}, kFloat32, 18), in({6, 8, 3, 3}, kFloat32, 19), in({6}, kFloat32, 20)},
                            [](const TensorList& x) { return TensorList{conv2d(x[0], x[1], x[2], 3, 2)}; }, c));
    v.back().check_grad = false;
  }
  OpSample e = conv_sample("empty batch", {in({0, 2, 4, 4}, kFloat32, 21), in({3, 2, 3, 3}, kFloat32, 22)},
                           [](const TensorList& x) { return TensorList{conv2d(x[0], x[1])}; }, ConvCfg{});
  e.check_grad = false;
  v.push_back(e);
  return v;
}
std::vector<ErrorSample> conv2d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"channel mismatch", [f] { conv2d(f({1, 4, 5, 5}), f({3, 3, 3, 3})); },
           "weight of size [3, 3, 3, 3], expected input[1, 4, 5, 5] to have 3 channels, but got 4 channels instead"},
          {"groups do not divide", [f] { conv2d(f({1, 4, 5, 5}), f({3, 2, 3, 3}), {}, 1, 0, 1, 2); },
           "expected weight to be divisible by 2"},
          {"kernel larger than padded input", [f] { conv2d(f({1, 1, 2, 2}), f({1, 1, 5, 5}), {}, 1, 1); },
           "Kernel size can't be greater than actual input size"},
          {"bias size", [f] { conv2d(f({1, 1, 4, 4}), f({2, 1, 3, 3}), f({3})); }, "expected bias to be 1-dimensional with 2 elements"},
          {"dtype mismatch", [f] { conv2d(f({1, 1, 4, 4}), in({1, 1, 3, 3}, kFloat64, 2)); }, "should be the same"},
          {"bool input", [] { conv2d(in({1, 1, 4, 4}, kBool, 1), in({1, 1, 3, 3}, kBool, 2)); }, "not implemented"},
          {"5-D input", [f] { conv2d(f({1, 1, 1, 4, 4}), f({1, 1, 3, 3})); }, "expected 3-D (unbatched) or 4-D"}};
}
KILN_OP_SAMPLES(conv2d, conv2d_samples, conv2d_errors);

std::vector<OpSample> conv1d_samples() {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes) {
    ConvCfg c;
    c.sw = 2, c.pw = 1;
    v.push_back(conv_sample("stride 2 pad 1 + bias " + tname(t), {in({2, 3, 7}, t, 1), in({4, 3, 3}, t, 2), in({4}, t, 3)},
                            [](const TensorList& x) { return TensorList{conv1d(x[0], x[1], x[2], 2, 1)}; }, c));
  }
  ConvCfg c;
  c.dw = 2, c.groups = 2;
  v.push_back(conv_sample("dilation 2 groups 2, unbatched", {in({4, 8}, kFloat64, 4), in({2, 2, 3}, kFloat64, 5)},
                          [](const TensorList& x) { return TensorList{conv1d(x[0], x[1], {}, 1, 0, 2, 2)}; }, c));
  for (DType t : {kFloat32, kBFloat16}) {
    ConvCfg d;
    d.sw = 2, d.pw = 1, d.groups = 3;
    v.push_back(conv_sample("depthwise stride 2 pad 1 multiplier 2 + bias " + tname(t),
                            {in({2, 3, 9}, t, 6), in({6, 1, 3}, t, 7), in({6}, t, 8)},
                            [](const TensorList& x) { return TensorList{conv1d(x[0], x[1], x[2], 2, 1, 1, 3)}; }, d));
  }
  return v;
}
std::vector<ErrorSample> conv1d_errors() {
  return {{"4-D input", [] { conv1d(in({1, 1, 4, 4}, kFloat32, 1), in({1, 1, 3}, kFloat32, 2)); }, "conv1d"},
          {"channel mismatch", [] { conv1d(in({1, 2, 5}, kFloat32, 1), in({1, 3, 3}, kFloat32, 2)); }, "channels"}};
}
KILN_OP_SAMPLES(conv1d, conv1d_samples, conv1d_errors);

std::vector<OpSample> conv_transpose2d_samples() {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes) {
    ConvCfg c;
    c.transposed = true, c.sh = c.sw = 2, c.ph = c.pw = 1, c.oph = c.opw = 1;
    v.push_back(conv_sample("stride 2 pad 1 output_padding 1 + bias " + tname(t),
                            {in({1, 3, 3, 3}, t, 1), in({3, 2, 3, 3}, t, 2), in({2}, t, 3)},
                            [](const TensorList& x) { return TensorList{conv_transpose2d(x[0], x[1], x[2], 2, 1, 1)}; }, c));
  }
  ConvCfg c;
  c.transposed = true, c.groups = 2, c.dh = c.dw = 2, c.sh = 1, c.sw = 2, c.opw = 1;
  v.push_back(conv_sample("groups 2 dilation 2 stride (1,2) output_padding (0,1)",
                          {in({2, 4, 3, 2}, kFloat64, 4), in({4, 1, 2, 2}, kFloat64, 5)},
                          [](const TensorList& x) {
                            return TensorList{conv_transpose2d(x[0], x[1], {}, Shape{1, 2}, 0, Shape{0, 1}, 2, 2)};
                          }, c));
  ConvCfg u;
  u.transposed = true;
  v.push_back(conv_sample("unbatched", {in({2, 3, 3}, kFloat64, 6), in({2, 3, 2, 2}, kFloat64, 7), in({3}, kFloat64, 8)},
                          [](const TensorList& x) { return TensorList{conv_transpose2d(x[0], x[1], x[2])}; }, u));
  v.push_back(conv_sample("non-contiguous", {in({1, 2, 3, 3}, kFloat32, 9, true), in({2, 2, 2, 2}, kFloat32, 10, true)},
                          [](const TensorList& x) { return TensorList{conv_transpose2d(x[0], x[1])}; }, u));
  return v;
}
std::vector<ErrorSample> conv_transpose2d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"output_padding too large", [f] { conv_transpose2d(f({1, 2, 3, 3}), f({2, 2, 3, 3}), {}, 2, 0, 2); },
           "output padding must be smaller than either stride or dilation"},
          {"channel mismatch", [f] { conv_transpose2d(f({1, 3, 3, 3}), f({2, 2, 3, 3})); }, "to have 2 channels, but got 3"}};
}
KILN_OP_SAMPLES(conv_transpose2d, conv_transpose2d_samples, conv_transpose2d_errors);

// The prim, through the composites and called directly (as decompositions
// and the compiler call it; it has no public function of its own).
std::vector<OpSample> convolution_samples() {
  std::vector<OpSample> v;
  auto direct = [](const ConvCfg& c) {
    return [c](const TensorList& x) {
      Attrs a{Shape{c.sh, c.sw}, Shape{c.ph, c.pw}, Shape{c.dh, c.dw}, c.transposed, Shape{c.oph, c.opw}, c.groups};
      return call_op(OpId::convolution, {x[0], x[1], x[2]}, a);
    };
  };
  ConvCfg c;
  c.ph = c.pw = 1, c.groups = 2;
  TensorList ci{in({2, 4, 4, 4}, kFloat64, 1), in({2, 2, 3, 3}, kFloat64, 2), in({2}, kFloat64, 3)};
  v.push_back(conv_sample(
      "conv2d groups 2", ci, [](const TensorList& x) { return TensorList{conv2d(x[0], x[1], x[2], 1, 1, 1, 2)}; }, c));
  v.push_back(conv_sample("direct groups 2", ci, direct(c), c));
  ConvCfg t;
  t.transposed = true, t.sh = t.sw = 2;
  TensorList ti{in({1, 2, 3, 3}, kFloat64, 4), in({2, 2, 2, 2}, kFloat64, 5), in({2}, kFloat64, 6)};
  v.push_back(conv_sample(
      "transposed stride 2", ti, [](const TensorList& x) { return TensorList{conv_transpose2d(x[0], x[1], x[2], 2)}; },
      t));
  ConvCfg td = t;
  td.oph = td.opw = 1, td.dh = 2;
  v.push_back(conv_sample("direct transposed, output_padding, dilation", ti, direct(td), td));
  ConvCfg d;
  d.sh = 2, d.dw = 2;
  v.push_back(conv_sample("direct stride and dilation, no bias",
                          {in({1, 3, 6, 7}, kFloat32, 7), in({4, 3, 2, 2}, kFloat32, 8), Tensor()}, direct(d), d));
  // Depthwise (groups = in channels): CUDA runs its own kernels for these, not cuDNN.
  ConvCfg dw;
  dw.sh = dw.sw = 2, dw.ph = dw.pw = 2, dw.dh = dw.dw = 2, dw.groups = 3;
  for (DType t : kFloatTypes)
    v.push_back(conv_sample("direct depthwise 5x5 stride 2 pad 2 dilation 2 multiplier 2 + bias " + tname(t),
                            {in({1, 3, 9, 8}, t, 9), in({6, 1, 5, 5}, t, 10), in({6}, t, 11)}, direct(dw), dw));
  ConvCfg row;
  row.pw = 3, row.groups = 4;
  v.push_back(conv_sample("direct depthwise 1x7 pad (0,3), non-contiguous input",
                          {in({2, 4, 3, 9}, kFloat32, 12, true), in({4, 1, 1, 7}, kFloat32, 13), Tensor()}, direct(row),
                          row));
  return v;
}
std::vector<ErrorSample> convolution_errors() {
  return {{"groups 0", [] {
             Attrs a{Shape{1, 1}, Shape{0, 0}, Shape{1, 1}, false, Shape{0, 0}, int64_t(0)};
             call_op(OpId::convolution, {in({1, 1, 3, 3}, kFloat32, 1), in({1, 1, 2, 2}, kFloat32, 2), Tensor()}, a);
           }, "non-positive groups is not supported"}};
}
KILN_OP_SAMPLES(convolution, convolution_samples, convolution_errors);

// convolution_backward against the adjoint of the reference taps.
OpSample conv_bwd_sample(std::string name, Shape xs, Shape ws, ConvCfg c, DType t, std::vector<int64_t> mask) {
  Shape os = conv_out(xs, ws, c);
  OpSample s;
  s.name = std::move(name) + " " + tname(t);
  s.inputs = {in(os, t, 1), in(xs, t, 2), in(ws, t, 3)};
  s.atol = 1e-4;
  s.fn = [c, mask](const TensorList& x) {
    Attrs a{Shape{c.sh, c.sw}, Shape{c.ph, c.pw}, Shape{c.dh, c.dw}, c.transposed, Shape{c.oph, c.opw}, c.groups, mask};
    return call_op(OpId::convolution_backward, {x[0], x[1], x[2]}, a);
  };
  s.reference = [c, mask](const TensorList& x) {
    Ref g = Ref::of(x[0]), xr = Ref::of(x[1]), w = Ref::of(x[2]);
    Ref gx(xr.shape), gw(w.shape), gb({g.shape[1]});
    conv_taps(xr.shape, w.shape, c, [&](int64_t o, int64_t i, int64_t k, int64_t) {
      gx.v[i] += g.v[o] * w.v[k];
      gw.v[k] += g.v[o] * xr.v[i];
    });
    const int64_t plane = g.shape[2] * g.shape[3];
    for (int64_t i = 0; i < g.numel(); ++i) gb.v[(i / plane) % g.shape[1]] += g.v[i];
    TensorList out;
    Ref* r[3] = {&gx, &gw, &gb};
    for (size_t k = 0; k < 3; ++k) out.push_back(mask[k] ? r[k]->to(x[1].dtype()) : Ref(Shape{0}).to(x[1].dtype()));
    return out;
  };
  return s;
}

std::vector<OpSample> convolution_backward_samples() {
  std::vector<OpSample> v;
  ConvCfg c;
  c.sh = 2, c.ph = c.pw = 1, c.dw = 2, c.groups = 2;
  for (DType t : kFloatTypes) v.push_back(conv_bwd_sample("direct", {2, 4, 5, 6}, {4, 2, 3, 2}, c, t, {1, 1, 1}));
  v.push_back(conv_bwd_sample("direct grad_input only", {1, 2, 4, 4}, {3, 2, 3, 3}, ConvCfg{}, kFloat64, {1, 0, 0}));
  ConvCfg tc;
  tc.transposed = true, tc.sh = tc.sw = 2, tc.ph = 1, tc.oph = 1, tc.groups = 2;
  for (DType t : {kFloat32, kFloat64}) v.push_back(conv_bwd_sample("transposed", {2, 4, 3, 3}, {4, 1, 3, 3}, tc, t, {1, 1, 1}));
  ConvCfg dw;
  dw.ph = dw.pw = 1, dw.groups = 3;
  v.push_back(conv_bwd_sample("depthwise", {2, 3, 5, 5}, {3, 1, 3, 3}, dw, kFloat32, {1, 1, 1}));
  ConvCfg dm;
  dm.sh = dm.sw = 2, dm.ph = dm.pw = 2, dm.dh = dm.dw = 2, dm.groups = 3;
  for (DType t : kFloatTypes)
    v.push_back(conv_bwd_sample("depthwise stride 2 pad 2 dilation 2 multiplier 2", {1, 3, 5, 6}, {6, 1, 3, 3}, dm, t,
                                {1, 1, 1}));
  ConvCfg d5;
  d5.ph = d5.pw = 2, d5.groups = 2;
  v.push_back(conv_bwd_sample("depthwise 5x5 grad_weight only", {1, 2, 5, 5}, {2, 1, 5, 5}, d5, kFloat64, {0, 1, 0}));
  ConvCfg d17;
  d17.sw = 2, d17.pw = 3, d17.groups = 2;
  v.push_back(conv_bwd_sample("depthwise 1x7 stride (1,2), no grad_weight", {1, 2, 2, 9}, {2, 1, 1, 7}, d17, kFloat32,
                              {1, 0, 1}));
  return v;
}
std::vector<ErrorSample> convolution_backward_errors() {
  return {{"grad_out shape", [] {
             Attrs a{Shape{1, 1}, Shape{0, 0}, Shape{1, 1}, false, Shape{0, 0}, int64_t(1), Shape{1, 1, 1}};
             call_op(OpId::convolution_backward,
                     {in({1, 1, 3, 3}, kFloat32, 1), in({1, 1, 4, 4}, kFloat32, 2), in({1, 1, 3, 3}, kFloat32, 3)}, a);
           }, "expected grad_out of shape [1, 1, 2, 2]"}};
}
KILN_OP_SAMPLES(convolution_backward, convolution_backward_samples, convolution_backward_errors);

// ---- pooling reference ----
struct PoolCfg {
  int64_t kh, kw, sh, sw, ph = 0, pw = 0, dh = 1, dw = 1;
  bool ceil = false, count_include_pad = true;
  int64_t divisor = 0;
};
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// Visits every output of each plane with its window: cb(out_flat, plane_base, in_positions, divisor).
void pool_windows(const Shape& xs, const PoolCfg& c, bool is_max,
                  const std::function<void(int64_t, int64_t, const std::vector<int64_t>&, double)>& cb, Shape& os) {
  const int64_t H = xs[xs.size() - 2], W = xs.back();
  const int64_t Ho = pool_out(H, c.kh, c.sh, c.ph, c.dh, c.ceil), Wo = pool_out(W, c.kw, c.sw, c.pw, c.dw, c.ceil);
  os = xs;
  os[os.size() - 2] = Ho;
  os.back() = Wo;
  const int64_t planes = ref_numel(xs) / (H * W);
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t oh = 0; oh < Ho; ++oh)
      for (int64_t ow = 0; ow < Wo; ++ow) {
        std::vector<int64_t> pos;
        double div = 0;
        if (is_max) {
          for (int64_t i = 0; i < c.kh; ++i)
            for (int64_t j = 0; j < c.kw; ++j) {
              const int64_t h = oh * c.sh - c.ph + i * c.dh, w = ow * c.sw - c.pw + j * c.dw;
              if (h >= 0 && h < H && w >= 0 && w < W) pos.push_back(h * W + w);
            }
        } else {
          int64_t h0 = oh * c.sh - c.ph, w0 = ow * c.sw - c.pw;
          int64_t h1 = std::min(h0 + c.kh, H + c.ph), w1 = std::min(w0 + c.kw, W + c.pw);
          const int64_t pool = (h1 - h0) * (w1 - w0);
          h0 = std::max<int64_t>(h0, 0), w0 = std::max<int64_t>(w0, 0);
          h1 = std::min(h1, H), w1 = std::min(w1, W);
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) pos.push_back(h * W + w);
          div = c.divisor ? static_cast<double>(c.divisor)
                          : static_cast<double>(c.count_include_pad ? pool : (h1 - h0) * (w1 - w0));
        }
        cb((pl * Ho + oh) * Wo + ow, pl * H * W, pos, div);
      }
}

TensorList ref_max_pool(const Tensor& x, const PoolCfg& c) {
  Ref r = Ref::of(x);
  Shape os;
  std::vector<double> vals, idx;
  pool_windows(r.shape, c, true, [&](int64_t, int64_t base, const std::vector<int64_t>& pos, double) {
    int64_t best = pos[0];
    for (int64_t p : pos)
      if (r.v[base + p] > r.v[base + best]) best = p;
    vals.push_back(r.v[base + best]);
    idx.push_back(static_cast<double>(best));
  }, os);
  Ref o(os), oi(os);
  o.v = vals;
  oi.v = idx;
  return {o.to(x.dtype()), oi.to(kInt64)};
}

Ref ref_avg_pool(const Tensor& x, const PoolCfg& c) {
  Ref r = Ref::of(x);
  Shape os;
  std::vector<double> vals;
  pool_windows(r.shape, c, false, [&](int64_t, int64_t base, const std::vector<int64_t>& pos, double div) {
    double s = 0;
    for (int64_t p : pos) s += r.v[base + p];
    vals.push_back(s / div);
  }, os);
  Ref o(os);
  o.v = vals;
  return o;
}

std::vector<int64_t> stride_arg(const PoolCfg& c) { return {c.sh, c.sw}; }

const std::vector<std::pair<std::string, PoolCfg>>& pool_cases() {
  static const std::vector<std::pair<std::string, PoolCfg>> cases = [] {
    std::vector<std::pair<std::string, PoolCfg>> v;
    v.push_back({"k2", PoolCfg{2, 2, 2, 2}});
    PoolCfg a{3, 3, 2, 2};
    a.ph = a.pw = 1;
    v.push_back({"k3 s2 p1", a});
    PoolCfg b{3, 2, 2, 1};
    b.ceil = true;
    v.push_back({"k(3,2) s(2,1) ceil_mode", b});
    PoolCfg d{2, 3, 1, 2};
    d.ph = 1, d.pw = 1, d.ceil = true;
    v.push_back({"k(2,3) s(1,2) p1 ceil_mode", d});
    return v;
  }();
  return cases;
}

// ---- max_pool2d ----
std::vector<OpSample> max_pool2d_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 1;
  for (auto& [name, c] : pool_cases()) {
    PoolCfg cfg = c;
    OpSample s;
    s.name = name;
    s.inputs = {in({2, 2, 5, 6}, kFloat64, seed++)};
    s.fn = [cfg](const TensorList& x) {
      return TensorList{max_pool2d(x[0], {cfg.kh, cfg.kw}, stride_arg(cfg), {cfg.ph, cfg.pw}, 1, cfg.ceil)};
    };
    s.reference = [cfg](const TensorList& x) { return TensorList{ref_max_pool(x[0], cfg)[0]}; };
    v.push_back(s);
  }
  for (DType t : kFloatTypes) {
    PoolCfg c{2, 2, 1, 1};
    c.dh = c.dw = 2, c.ph = 1;
    OpSample s;
    s.name = "with indices, dilation 2 " + tname(t);
    s.inputs = {in({1, 3, 6, 5}, t, seed++)};
    s.fn = [](const TensorList& x) {
      auto [o, i] = max_pool2d_with_indices(x[0], 2, 1, Shape{1, 0}, 2);
      return TensorList{o, i};
    };
    s.reference = [c](const TensorList& x) { return ref_max_pool(x[0], c); };
    s.check_grad = false;
    v.push_back(s);
  }
  PoolCfg u{2, 2, 2, 2};
  OpSample s;
  s.name = "unbatched, stride defaults to kernel";
  s.inputs = {in({2, 4, 5}, kFloat32, seed++)};
  s.fn = [](const TensorList& x) { return TensorList{max_pool2d(x[0], 2)}; };
  s.reference = [u](const TensorList& x) { return TensorList{ref_max_pool(x[0], u)[0]}; };
  v.push_back(s);
  OpSample n = s;
  n.name = "non-contiguous";
  n.inputs = {in({1, 2, 4, 4}, kFloat32, seed++, true)};
  v.push_back(n);
  return v;
}
std::vector<ErrorSample> max_pool2d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"pad too large", [f] { max_pool2d(f({1, 1, 5, 5}), 3, 1, 2); }, "pad should be at most half"},
          {"output too small", [f] { max_pool2d(f({1, 1, 2, 2}), 3); }, "too small"},
          {"stride 0", [f] { max_pool2d(f({1, 1, 4, 4}), 2, 0); }, "stride should be greater than zero"},
          {"2-D input", [f] { max_pool2d(f({4, 4}), 2); }, "3-D or 4-D"},
          {"integer input", [] { max_pool2d(in({1, 1, 4, 4}, kInt64, 1), 2); }, "floating"}};
}
KILN_OP_SAMPLES(max_pool2d, max_pool2d_samples, max_pool2d_errors);

// ---- avg_pool2d ----
std::vector<OpSample> avg_pool2d_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 1;
  for (auto [name, c] : pool_cases())
    for (bool cip : {true, false})
      for (int64_t div : {int64_t(0), int64_t(3)}) {
        if (div && !cip) continue;
        c.count_include_pad = cip, c.divisor = div;
        OpSample s;
        s.name = name + (cip ? "" : " exclude pad") + (div ? " divisor 3" : "");
        s.inputs = {in({1, 2, 5, 6}, kFloat64, seed++)};
        s.fn = [c](const TensorList& x) {
          return TensorList{avg_pool2d(x[0], {c.kh, c.kw}, stride_arg(c), {c.ph, c.pw}, c.ceil, c.count_include_pad,
                                       c.divisor ? std::optional<int64_t>(c.divisor) : std::nullopt)};
        };
        s.reference = [c](const TensorList& x) { return TensorList{ref_avg_pool(x[0], c).to(x[0].dtype())}; };
        v.push_back(s);
      }
  for (DType t : kFloatTypes) {
    PoolCfg c{3, 3, 2, 2};
    c.ph = c.pw = 1;
    OpSample s;
    s.name = "k3 s2 p1 " + tname(t);
    s.inputs = {in({2, 3, 5, 5}, t, seed++)};
    s.fn = [](const TensorList& x) { return TensorList{avg_pool2d(x[0], 3, 2, 1)}; };
    s.reference = [c](const TensorList& x) { return TensorList{ref_avg_pool(x[0], c).to(x[0].dtype())}; };
    v.push_back(s);
  }
  PoolCfg u{2, 2, 2, 2};
  OpSample s;
  s.name = "unbatched, non-contiguous";
  s.inputs = {in({2, 4, 4}, kFloat32, seed++, true)};
  s.fn = [](const TensorList& x) { return TensorList{avg_pool2d(x[0], 2)}; };
  s.reference = [u](const TensorList& x) { return TensorList{ref_avg_pool(x[0], u).to(x[0].dtype())}; };
  v.push_back(s);
  return v;
}
std::vector<ErrorSample> avg_pool2d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"divisor 0", [f] { avg_pool2d(f({1, 1, 4, 4}), 2, {}, 0, false, true, 0); }, "divisor must be not zero"},
          {"pad too large", [f] { avg_pool2d(f({1, 1, 4, 4}), 2, 1, 2); }, "pad should be at most half"},
          {"output too small", [f] { avg_pool2d(f({1, 1, 2, 2}), 3); }, "too small"}};
}
KILN_OP_SAMPLES(avg_pool2d, avg_pool2d_samples, avg_pool2d_errors);

// ---- pooling backward prims against the adjoint windows ----
std::vector<OpSample> max_pool2d_backward_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 1;
  for (auto& [name, c] : pool_cases())
    for (DType t : {kFloat32, kFloat64, kBFloat16}) {
      PoolCfg cfg = c;
      Tensor x = in({2, 2, 5, 6}, t, seed++);
      Shape os;
      pool_windows(x.sizes().vec(), cfg, true, [](int64_t, int64_t, const std::vector<int64_t>&, double) {}, os);
      OpSample s;
      s.name = name + " " + tname(t);
      s.inputs = {in(os, t, seed++), x};
      s.fn = [cfg](const TensorList& x) {
        Attrs a{Shape{cfg.kh, cfg.kw}, stride_arg(cfg), Shape{cfg.ph, cfg.pw}, Shape{1, 1}, cfg.ceil};
        Tensor idx = std::get<1>(max_pool2d_with_indices(x[1], {cfg.kh, cfg.kw}, stride_arg(cfg), {cfg.ph, cfg.pw}, 1, cfg.ceil));
        return TensorList{call_op1(OpId::max_pool2d_backward, {x[0], x[1], idx}, a)};
      };
      s.reference = [cfg](const TensorList& x) {
        Ref idx = Ref::of(ref_max_pool(x[1], cfg)[1]);
        Ref g = Ref::of(x[0]);
        Ref gx(x[1].sizes().vec());
        const int64_t plane_in = gx.shape[2] * gx.shape[3], plane_out = g.shape[2] * g.shape[3];
        for (int64_t i = 0; i < g.numel(); ++i) gx.v[(i / plane_out) * plane_in + static_cast<int64_t>(idx.v[i])] += g.v[i];
        return TensorList{gx.to(x[0].dtype())};
      };
      v.push_back(s);
    }
  return v;
}
KILN_OP_SAMPLES(max_pool2d_backward, max_pool2d_backward_samples, nullptr);

std::vector<OpSample> avg_pool2d_backward_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 1;
  for (auto [name, c] : pool_cases())
    for (bool cip : {true, false}) {
      c.count_include_pad = cip;
      Tensor x = in({1, 2, 5, 6}, kFloat64, seed++);
      Shape os;
      pool_windows(x.sizes().vec(), c, false, [](int64_t, int64_t, const std::vector<int64_t>&, double) {}, os);
      OpSample s;
      s.name = name + (cip ? "" : " exclude pad");
      s.inputs = {in(os, kFloat64, seed++), x};
      s.fn = [c](const TensorList& x) {
        Attrs a{Shape{c.kh, c.kw}, stride_arg(c), Shape{c.ph, c.pw}, c.ceil, c.count_include_pad, std::monostate{}};
        return TensorList{call_op1(OpId::avg_pool2d_backward, {x[0], x[1]}, a)};
      };
      s.reference = [c](const TensorList& x) {
        Ref g = Ref::of(x[0]);
        Ref gx(x[1].sizes().vec());
        Shape os2;
        pool_windows(gx.shape, c, false, [&](int64_t o, int64_t base, const std::vector<int64_t>& pos, double div) {
          for (int64_t p : pos) gx.v[base + p] += g.v[o] / div;
        }, os2);
        return TensorList{gx.to(x[0].dtype())};
      };
      v.push_back(s);
    }
  return v;
}
KILN_OP_SAMPLES(avg_pool2d_backward, avg_pool2d_backward_samples, nullptr);

// ---- adaptive_avg_pool2d ----
Ref ref_adaptive(const Ref& x, int64_t oh, int64_t ow) {
  const int64_t H = x.shape[x.dim() - 2], W = x.shape.back();
  Shape os = x.shape;
  os[os.size() - 2] = oh;
  os.back() = ow;
  Ref out(os);
  const int64_t planes = x.numel() / (H * W);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t h0 = static_cast<int64_t>(std::floor(double(i * H) / double(oh)));
        const int64_t h1 = static_cast<int64_t>(std::ceil(double((i + 1) * H) / double(oh)));
        const int64_t w0 = static_cast<int64_t>(std::floor(double(j * W) / double(ow)));
        const int64_t w1 = static_cast<int64_t>(std::ceil(double((j + 1) * W) / double(ow)));
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += x.v[p * H * W + h * W + w];
        out.v[(p * oh + i) * ow + j] = s / double((h1 - h0) * (w1 - w0));
      }
  return out;
}

std::vector<OpSample> adaptive_avg_pool2d_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 1;
  auto add = [&](std::string name, Shape xs, int64_t oh, int64_t ow, DType t) {
    OpSample s;
    s.name = name + " " + tname(t);
    s.inputs = {in(xs, t, seed++)};
    s.fn = [oh, ow](const TensorList& x) { return TensorList{adaptive_avg_pool2d(x[0], {oh, ow})}; };
    s.reference = [oh, ow](const TensorList& x) { return TensorList{ref_adaptive(Ref::of(x[0]), oh, ow).to(x[0].dtype())}; };
    v.push_back(s);
  };
  for (DType t : kFloatTypes) add("5x7 -> 3x4", {1, 2, 5, 7}, 3, 4, t);
  add("divisible 4x6 -> 2x3", {2, 2, 4, 6}, 2, 3, kFloat64);
  add("global 1x1", {2, 3, 3, 3}, 1, 1, kFloat32);
  add("unbatched 3x5 -> 2x2", {2, 3, 5}, 2, 2, kFloat64);
  add("upsampling 2x2 -> 3x3", {1, 1, 2, 2}, 3, 3, kFloat64);
  return v;
}
std::vector<ErrorSample> adaptive_avg_pool2d_errors() {
  return {{"2-D input", [] { adaptive_avg_pool2d(in({4, 4}, kFloat32, 1), {2, 2}); }, "3-D or 4-D"},
          {"integer input", [] { adaptive_avg_pool2d(in({1, 4, 4}, kInt64, 1), {2, 2}); }, "floating"}};
}
KILN_OP_SAMPLES(adaptive_avg_pool2d, adaptive_avg_pool2d_samples, adaptive_avg_pool2d_errors);

}  // namespace
}  // namespace kiln::test
