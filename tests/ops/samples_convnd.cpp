// Samples for the 1-D/3-D convolutions and pools, adaptive max pooling and
// im2col/col2im, plus the integer 2-D convolution / avg pool. References are
// direct fp64 loops over 3 spatial dims (fewer dims are leading size-1 dims),
// sharing nothing with the kernels.
#include <array>

#include "dispatch/dispatch.h"
#include "kiln/nn/functional.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

using A3 = std::array<int64_t, 3>;
std::string tname(DType t) { return std::string(dtype_name(t)); }
Tensor in(const Shape& s, DType t, uint64_t seed, bool noncontig = false) {
  return make_input(s, t, seed, -2, 2, noncontig);
}

// Inserts n size-1 dims at position pos.
Shape with_ones(Shape s, size_t pos, int n) {
  s.insert(s.begin() + static_cast<int64_t>(pos), static_cast<size_t>(n), 1);
  return s;
}

// ---- convolution reference over [N, C, D, H, W] ----
struct Cfg {
  A3 s{1, 1, 1}, p{0, 0, 0}, d{1, 1, 1}, op{0, 0, 0};
  int64_t groups = 1;
  bool transposed = false;
};
// A cfg for nd spatial dims given right-aligned (the leading dims stay 1 / 0).
Cfg cfg(int nd, std::vector<int64_t> s, std::vector<int64_t> p, std::vector<int64_t> d, int64_t groups = 1,
        bool transposed = false, std::vector<int64_t> op = {}) {
  Cfg c;
  for (int i = 0; i < nd; ++i) {
    const size_t k = static_cast<size_t>(i);
    c.s[3 - nd + i] = s.size() == 1 ? s[0] : s[k];
    c.p[3 - nd + i] = p.size() == 1 ? p[0] : p[k];
    c.d[3 - nd + i] = d.size() == 1 ? d[0] : d[k];
    if (!op.empty()) c.op[3 - nd + i] = op.size() == 1 ? op[0] : op[k];
  }
  c.groups = groups, c.transposed = transposed;
  return c;
}

Shape conv_out(const Shape& x, const Shape& w, const Cfg& c) {
  Shape o{x[0], c.transposed ? w[1] * c.groups : w[0]};
  for (int i = 0; i < 3; ++i) {
    const int64_t n = x[2 + i], k = w[2 + i];
    o.push_back(c.transposed ? (n - 1) * c.s[i] - 2 * c.p[i] + c.d[i] * (k - 1) + c.op[i] + 1
                             : (n + 2 * c.p[i] - c.d[i] * (k - 1) - 1) / c.s[i] + 1);
  }
  return o;
}

// tap(out_flat, x_flat, w_flat) for every product the convolution sums.
void conv_taps(const Shape& x, const Shape& w, const Cfg& c,
               const std::function<void(int64_t, int64_t, int64_t)>& tap) {
  const Shape o = conv_out(x, w, c);
  const int64_t N = x[0];
  // The "small" side (gathering side) is the direct conv's output / the transposed conv's input.
  const Shape& lo = c.transposed ? x : o;  // positions iterated
  const Shape& hi = c.transposed ? o : x;  // positions read (direct) or written (transposed)
  const int64_t C_lo = lo[1], Cw1 = w[1];
  const int64_t lo_g = C_lo / c.groups, hi_g = hi[1] / c.groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t cl = 0; cl < C_lo; ++cl)
      for (int64_t a = 0; a < lo[2]; ++a)
        for (int64_t b = 0; b < lo[3]; ++b)
          for (int64_t e = 0; e < lo[4]; ++e)
            for (int64_t j = 0; j < hi_g; ++j)
              for (int64_t i0 = 0; i0 < w[2]; ++i0)
                for (int64_t i1 = 0; i1 < w[3]; ++i1)
                  for (int64_t i2 = 0; i2 < w[4]; ++i2) {
                    const int64_t q0 = a * c.s[0] - c.p[0] + i0 * c.d[0];
                    const int64_t q1 = b * c.s[1] - c.p[1] + i1 * c.d[1];
                    const int64_t q2 = e * c.s[2] - c.p[2] + i2 * c.d[2];
                    if (q0 < 0 || q0 >= hi[2] || q1 < 0 || q1 >= hi[3] || q2 < 0 || q2 >= hi[4]) continue;
                    const int64_t ch = (cl / lo_g) * hi_g + j;
                    const int64_t lo_flat = (((n * C_lo + cl) * lo[2] + a) * lo[3] + b) * lo[4] + e;
                    const int64_t hi_flat = (((n * hi[1] + ch) * hi[2] + q0) * hi[3] + q1) * hi[4] + q2;
                    // weight [C_out, C_in/g, ...] direct: (cl, j); transposed [C_in, C_out/g, ...]: (cl, j).
                    const int64_t w_flat = (((cl * Cw1 + j) * w[2] + i0) * w[3] + i1) * w[4] + i2;
                    if (c.transposed)
                      tap(hi_flat, lo_flat, w_flat);
                    else
                      tap(lo_flat, hi_flat, w_flat);
                  }
}

// Runs the reference on x/w given with nd spatial dims (maybe unbatched).
OpSample conv_sample(std::string name, TensorList inputs, OpFn fn, Cfg c, int nd) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = std::move(inputs);
  s.fn = std::move(fn);
  s.atol = 1e-4;
  s.reference = [c, nd](const TensorList& t) {
    Ref x = Ref::of(t[0]), w = Ref::of(t[1]);
    const bool ub = x.dim() == w.dim() - 1;
    if (ub) x.shape.insert(x.shape.begin(), 1);
    x.shape = with_ones(x.shape, 2, 3 - nd);
    w.shape = with_ones(w.shape, 2, 3 - nd);
    Ref out(conv_out(x.shape, w.shape, c));
    const int64_t plane = out.shape[2] * out.shape[3] * out.shape[4];
    if (t.size() > 2 && t[2].defined()) {
      Ref b = Ref::of(t[2]);
      for (int64_t i = 0; i < out.numel(); ++i) out.v[i] = b.v[(i / plane) % out.shape[1]];
    }
    conv_taps(x.shape, w.shape, c, [&](int64_t o, int64_t i, int64_t k) { out.v[o] += x.v[i] * w.v[k]; });
    Shape os = out.shape;
    os.erase(os.begin() + 2, os.begin() + 2 + (3 - nd));
    if (ub) os.erase(os.begin());
    out.shape = os;
    // Integer outputs: exact (products of small integers).
    return TensorList{out.to(t[0].dtype())};
  };
  if (!is_floating_point(s.inputs[0].dtype())) s.check_grad = false;
  return s;
}

// Small integers, so no sum overflows (int8 sums stay within +-127).
Tensor intin(const Shape& s, uint64_t seed, DType t = kInt64) {
  const double r = t == kInt8 ? 2 : 4;
  return make_input(s, t, seed, -r, r);
}

std::vector<OpSample> conv3d_samples() {
  std::vector<OpSample> v;
  for (DType t : {kFloat32, kFloat64, kBFloat16}) {
    v.push_back(conv_sample(
        "stride 2 pad 1 + bias " + tname(t), {in({2, 3, 4, 5, 5}, t, 1), in({4, 3, 3, 2, 3}, t, 2), in({4}, t, 3)},
        [](const TensorList& x) { return TensorList{conv3d(x[0], x[1], x[2], 2, 1)}; }, cfg(3, {2}, {1}, {1}), 3));
  }
  v.push_back(conv_sample(
      "groups 2 dilation (1,2,1) stride (1,1,2) pad (0,1,1)",
      {in({1, 4, 4, 5, 6}, kFloat64, 4), in({2, 2, 2, 2, 3}, kFloat64, 5)},
      [](const TensorList& x) {
        return TensorList{conv3d(x[0], x[1], {}, Shape{1, 1, 2}, Shape{0, 1, 1}, Shape{1, 2, 1}, 2)};
      },
      cfg(3, {1, 1, 2}, {0, 1, 1}, {1, 2, 1}, 2), 3));
  v.push_back(conv_sample(
      "unbatched", {in({2, 3, 4, 4}, kFloat64, 6), in({3, 2, 2, 2, 2}, kFloat64, 7), in({3}, kFloat64, 8)},
      [](const TensorList& x) { return TensorList{conv3d(x[0], x[1], x[2])}; }, cfg(3, {1}, {0}, {1}), 3));
  v.push_back(conv_sample(
      "non-contiguous", {in({1, 2, 3, 4, 4}, kFloat32, 9, true), in({2, 2, 2, 2, 2}, kFloat32, 10, true)},
      [](const TensorList& x) { return TensorList{conv3d(x[0], x[1])}; }, cfg(3, {1}, {0}, {1}), 3));
  v.push_back(conv_sample(
      "depthwise", {in({2, 3, 3, 4, 4}, kFloat32, 11), in({3, 1, 2, 3, 3}, kFloat32, 12)},
      [](const TensorList& x) { return TensorList{conv3d(x[0], x[1], {}, 1, 1, 1, 3)}; }, cfg(3, {1}, {1}, {1}, 3), 3));
  for (DType t : {kInt64, kInt32})
    v.push_back(conv_sample(
        "integer " + tname(t), {intin({1, 2, 3, 3, 4}, 13, t), intin({2, 2, 2, 2, 2}, 14, t), intin({2}, 15, t)},
        [](const TensorList& x) { return TensorList{conv3d(x[0], x[1], x[2], 1, 1)}; }, cfg(3, {1}, {1}, {1}), 3));
  return v;
}
std::vector<ErrorSample> conv3d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"4-D weight",
           [f] {
             conv3d(f({1, 1, 3, 3, 3}), f({1, 1, 3, 3}));
           },
           "expected a 5-D weight"},
          {"6-D input",
           [f] {
             conv3d(f({1, 1, 1, 3, 3, 3}), f({1, 1, 3, 3, 3}));
           },
           "expected 4-D (unbatched) or 5-D"},
          {"channel mismatch",
           [f] {
             conv3d(f({1, 2, 3, 3, 3}), f({1, 3, 2, 2, 2}));
           },
           "channels"},
          {"kernel too large",
           [f] {
             conv3d(f({1, 1, 2, 3, 3}), f({1, 1, 3, 3, 3}));
           },
           "Kernel size can't be greater"},
          {"stride pair",
           [f] {
             conv3d(f({1, 1, 3, 3, 3}), f({1, 1, 2, 2, 2}), {}, Shape{1, 2});
           },
           "stride"},
          {"bool input",
           [] {
             conv3d(in({1, 1, 3, 3, 3}, kBool, 1), in({1, 1, 2, 2, 2}, kBool, 2));
           },
           "not implemented"}};
}
KILN_OP_SAMPLES(conv3d, conv3d_samples, conv3d_errors);

std::vector<OpSample> conv_transpose1d_samples() {
  std::vector<OpSample> v;
  for (DType t : {kFloat32, kFloat64, kFloat16})
    v.push_back(conv_sample(
        "stride 2 pad 1 output_padding 1 + bias " + tname(t), {in({2, 3, 5}, t, 1), in({3, 2, 3}, t, 2), in({2}, t, 3)},
        [](const TensorList& x) { return TensorList{conv_transpose1d(x[0], x[1], x[2], 2, 1, 1)}; },
        cfg(1, {2}, {1}, {1}, 1, true, {1}), 1));
  v.push_back(conv_sample(
      "groups 2 dilation 2, unbatched", {in({4, 6}, kFloat64, 4), in({4, 1, 3}, kFloat64, 5)},
      [](const TensorList& x) { return TensorList{conv_transpose1d(x[0], x[1], {}, 1, 0, 0, 2, 2)}; },
      cfg(1, {1}, {0}, {2}, 2, true), 1));
  v.push_back(conv_sample(
      "int64", {intin({1, 2, 4}, 6), intin({2, 3, 2}, 7)},
      [](const TensorList& x) { return TensorList{conv_transpose1d(x[0], x[1], {}, 3)}; },
      cfg(1, {3}, {0}, {1}, 1, true), 1));
  return v;
}
std::vector<ErrorSample> conv_transpose1d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"output_padding too large",
           [f] {
             conv_transpose1d(f({1, 2, 3}), f({2, 2, 3}), {}, 2, 0, 2);
           },
           "output padding must be smaller than either stride or dilation"},
          {"4-D weight",
           [f] {
             conv_transpose1d(f({1, 2, 3}), f({2, 2, 3, 3}));
           },
           "expected a 3-D weight"}};
}
KILN_OP_SAMPLES(conv_transpose1d, conv_transpose1d_samples, conv_transpose1d_errors);

std::vector<OpSample> conv_transpose3d_samples() {
  std::vector<OpSample> v;
  for (DType t : {kFloat32, kFloat64})
    v.push_back(conv_sample(
        "stride 2 pad 1 output_padding (1,0,1) + bias " + tname(t),
        {in({1, 3, 2, 3, 3}, t, 1), in({3, 2, 3, 2, 3}, t, 2), in({2}, t, 3)},
        [](const TensorList& x) {
          return TensorList{conv_transpose3d(x[0], x[1], x[2], 2, 1, Shape{1, 0, 1})};
        },
        cfg(3, {2}, {1}, {1}, 1, true, {1, 0, 1}), 3));
  v.push_back(conv_sample(
      "groups 2 dilation 2, unbatched", {in({4, 2, 2, 3}, kFloat64, 4), in({4, 1, 2, 2, 2}, kFloat64, 5)},
      [](const TensorList& x) { return TensorList{conv_transpose3d(x[0], x[1], {}, 1, 0, 0, 2, 2)}; },
      cfg(3, {1}, {0}, {2}, 2, true), 3));
  v.push_back(conv_sample(
      "int64 + bias", {intin({1, 2, 2, 2, 2}, 6), intin({2, 2, 2, 2, 2}, 7), intin({2}, 8)},
      [](const TensorList& x) { return TensorList{conv_transpose3d(x[0], x[1], x[2], 2)}; },
      cfg(3, {2}, {0}, {1}, 1, true), 3));
  return v;
}
std::vector<ErrorSample> conv_transpose3d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"channel mismatch",
           [f] {
             conv_transpose3d(f({1, 3, 2, 2, 2}), f({2, 2, 2, 2, 2}));
           },
           "to have 2 channels, but got 3"}};
}
KILN_OP_SAMPLES(conv_transpose3d, conv_transpose3d_samples, conv_transpose3d_errors);

// The integer 2-D convolution (torch's slow path), through the N-d kernels.
std::vector<OpSample> conv2d_int_samples() {
  std::vector<OpSample> v;
  for (DType t : {kInt64, kInt16, kInt8})
    v.push_back(conv_sample(
        "integer " + tname(t) + " stride 2 pad 1 groups 2 + bias",
        {intin({2, 4, 5, 5}, 1, t), intin({2, 2, 3, 3}, 2, t), intin({2}, 3, t)},
        [](const TensorList& x) { return TensorList{conv2d(x[0], x[1], x[2], 2, 1, 1, 2)}; }, cfg(2, {2}, {1}, {1}, 2),
        2));
  return v;
}
KILN_OP_SAMPLES(conv2d, conv2d_int_samples, nullptr);

std::vector<OpSample> conv1d_int_samples() {
  return {conv_sample(
      "int64 dilation 2", {intin({1, 2, 6}, 4), intin({3, 2, 3}, 5)},
      [](const TensorList& x) { return TensorList{conv1d(x[0], x[1], {}, 1, 0, 2)}; }, cfg(1, {1}, {0}, {2}), 1)};
}
KILN_OP_SAMPLES(conv1d, conv1d_int_samples, nullptr);

// The prim with 3 spatial dims, called directly, and its backward.
std::vector<OpSample> convolution3d_samples() {
  std::vector<OpSample> v;
  Cfg c = cfg(3, {1, 2, 1}, {1, 0, 1}, {2, 1, 1}, 2);
  v.push_back(conv_sample(
      "direct 3-D", {in({1, 4, 5, 4, 4}, kFloat64, 1), in({2, 2, 2, 2, 2}, kFloat64, 2), in({2}, kFloat64, 3)},
      [](const TensorList& x) {
        Attrs a{Shape{1, 2, 1}, Shape{1, 0, 1}, Shape{2, 1, 1}, false, Shape{0, 0, 0}, int64_t(2)};
        return call_op(OpId::convolution, {x[0], x[1], x[2]}, a);
      },
      c, 3));
  Cfg t = cfg(1, {2}, {0}, {1}, 1, true, {1});
  v.push_back(conv_sample(
      "direct transposed 1-D", {in({2, 2, 4}, kFloat64, 4), in({2, 3, 2}, kFloat64, 5), Tensor()},
      [](const TensorList& x) {
        Attrs a{Shape{2}, Shape{0}, Shape{1}, true, Shape{1}, int64_t(1)};
        return call_op(OpId::convolution, {x[0], x[1], x[2]}, a);
      },
      t, 1));
  return v;
}
KILN_OP_SAMPLES(convolution, convolution3d_samples, nullptr);

OpSample conv_bwd_sample(std::string name, Shape xs, Shape ws, Cfg c, DType t, std::vector<int64_t> mask) {
  Shape os = conv_out(xs, ws, c);
  OpSample s;
  s.name = std::move(name) + " " + tname(t);
  s.inputs = {in(os, t, 1), in(xs, t, 2), in(ws, t, 3)};
  s.atol = 1e-4;
  s.fn = [c, mask](const TensorList& x) {
    Shape st(c.s.begin(), c.s.end()), p(c.p.begin(), c.p.end()), d(c.d.begin(), c.d.end()),
        op(c.op.begin(), c.op.end());
    Attrs a{st, p, d, c.transposed, op, c.groups, mask};
    return call_op(OpId::convolution_backward, {x[0], x[1], x[2]}, a);
  };
  s.reference = [c, mask](const TensorList& x) {
    Ref g = Ref::of(x[0]), xr = Ref::of(x[1]), w = Ref::of(x[2]);
    Ref gx(xr.shape), gw(w.shape), gb({g.shape[1]});
    conv_taps(xr.shape, w.shape, c, [&](int64_t o, int64_t i, int64_t k) {
      gx.v[i] += g.v[o] * w.v[k];
      gw.v[k] += g.v[o] * xr.v[i];
    });
    const int64_t plane = g.shape[2] * g.shape[3] * g.shape[4];
    for (int64_t i = 0; i < g.numel(); ++i) gb.v[(i / plane) % g.shape[1]] += g.v[i];
    TensorList out;
    Ref* r[3] = {&gx, &gw, &gb};
    for (size_t k = 0; k < 3; ++k) out.push_back(mask[k] ? r[k]->to(x[1].dtype()) : Ref(Shape{0}).to(x[1].dtype()));
    return out;
  };
  return s;
}
std::vector<OpSample> convolution_backward3d_samples() {
  std::vector<OpSample> v;
  for (DType t : {kFloat32, kFloat64})
    v.push_back(conv_bwd_sample("3-D direct", {2, 4, 4, 5, 4}, {4, 2, 3, 2, 2},
                                cfg(3, {2, 1, 1}, {1, 0, 1}, {1, 2, 1}, 2), t, {1, 1, 1}));
  v.push_back(conv_bwd_sample("3-D transposed", {1, 4, 2, 3, 3}, {4, 1, 2, 3, 2},
                              cfg(3, {2}, {1}, {1}, 2, true, {1, 0, 1}), kFloat64, {1, 1, 1}));
  v.push_back(
      conv_bwd_sample("3-D weight only", {1, 2, 3, 3, 3}, {3, 2, 2, 2, 2}, cfg(3, {1}, {0}, {1}), kFloat64, {0, 1, 0}));
  return v;
}
KILN_OP_SAMPLES(convolution_backward, convolution_backward3d_samples, nullptr);

// ---- pooling reference over [planes, D, H, W] ----
struct PoolCfg {
  A3 k{1, 1, 1}, s{1, 1, 1}, p{0, 0, 0}, d{1, 1, 1};
  bool ceil = false, cip = true;
  int64_t divisor = 0;
};
PoolCfg pcfg(int nd, std::vector<int64_t> k, std::vector<int64_t> s, std::vector<int64_t> p,
             std::vector<int64_t> d = {1}, bool ceil = false) {
  PoolCfg c;
  for (int i = 0; i < nd; ++i) {
    auto at = [&](const std::vector<int64_t>& v) { return v.size() == 1 ? v[0] : v[static_cast<size_t>(i)]; };
    c.k[3 - nd + i] = at(k), c.s[3 - nd + i] = s.empty() ? at(k) : at(s), c.p[3 - nd + i] = at(p);
    c.d[3 - nd + i] = at(d);
  }
  c.ceil = ceil;
  return c;
}
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// Pools x (its last nd dims spatial) with cb(window positions, divisor) -> value;
// returns values (and argmax positions for max) in x's layout.
struct PoolResult {
  Ref out, idx;
};
PoolResult ref_pool(const Ref& x, int nd, const PoolCfg& c, bool is_max) {
  Shape sp(3, 1);
  for (int i = 0; i < nd; ++i) sp[3 - nd + i] = x.shape[x.shape.size() - nd + i];
  A3 o;
  for (int i = 0; i < 3; ++i) o[i] = pool_out(sp[i], c.k[i], c.s[i], c.p[i], c.d[i], c.ceil);
  Shape os = x.shape;
  for (int i = 0; i < nd; ++i) os[os.size() - nd + i] = o[3 - nd + i];
  PoolResult r{Ref(os), Ref(os)};
  const int64_t plane = sp[0] * sp[1] * sp[2], planes = x.numel() / plane;
  int64_t k = 0;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t a = 0; a < o[0]; ++a)
      for (int64_t b = 0; b < o[1]; ++b)
        for (int64_t e = 0; e < o[2]; ++e, ++k) {
          const int64_t oo[3] = {a, b, e};
          if (is_max) {
            double best = -kInf;
            int64_t bi = -1;
            for (int64_t i0 = 0; i0 < c.k[0]; ++i0)
              for (int64_t i1 = 0; i1 < c.k[1]; ++i1)
                for (int64_t i2 = 0; i2 < c.k[2]; ++i2) {
                  const int64_t q[3] = {a * c.s[0] - c.p[0] + i0 * c.d[0], b * c.s[1] - c.p[1] + i1 * c.d[1],
                                        e * c.s[2] - c.p[2] + i2 * c.d[2]};
                  bool ok = true;
                  for (int i = 0; i < 3; ++i) ok = ok && q[i] >= 0 && q[i] < sp[i];
                  if (!ok) continue;
                  const int64_t pos = (q[0] * sp[1] + q[1]) * sp[2] + q[2];
                  if (bi < 0 || x.v[pl * plane + pos] > best) best = x.v[pl * plane + pos], bi = pos;
                }
            r.out.v[k] = best;
            r.idx.v[k] = static_cast<double>(bi);
          } else {
            int64_t lo[3], hi[3], padded = 1, inside = 1;
            for (int i = 0; i < 3; ++i) {
              lo[i] = oo[i] * c.s[i] - c.p[i];
              hi[i] = std::min(lo[i] + c.k[i], sp[i] + c.p[i]);
              padded *= hi[i] - lo[i];
              lo[i] = std::max<int64_t>(lo[i], 0), hi[i] = std::min(hi[i], sp[i]);
              inside *= hi[i] - lo[i];
            }
            double sum = 0;
            for (int64_t q0 = lo[0]; q0 < hi[0]; ++q0)
              for (int64_t q1 = lo[1]; q1 < hi[1]; ++q1)
                for (int64_t q2 = lo[2]; q2 < hi[2]; ++q2) sum += x.v[pl * plane + (q0 * sp[1] + q1) * sp[2] + q2];
            const double div = static_cast<double>(c.divisor ? c.divisor : c.cip ? padded : inside);
            // int64 pools truncate toward zero; the caller converts.
            r.out.v[k] = sum / div;
            r.idx.v[k] = div;
          }
        }
  return r;
}

OpSample pool_sample(std::string name, Tensor x, OpFn fn, PoolCfg c, int nd, bool is_max, bool with_indices) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = {std::move(x)};
  s.fn = std::move(fn);
  s.reference = [c, nd, is_max, with_indices](const TensorList& t) {
    PoolResult r = ref_pool(Ref::of(t[0]), nd, c, is_max);
    if (t[0].dtype() == kInt64)
      for (double& v : r.out.v) v = std::trunc(v);
    TensorList out{r.out.to(t[0].dtype())};
    if (with_indices) out.push_back(r.idx.to(kInt64));
    return out;
  };
  if (!is_floating_point(s.inputs[0].dtype())) s.check_grad = false;
  return s;
}

// ---- max_pool1d / max_pool3d ----
std::vector<OpSample> max_pool1d_samples() {
  std::vector<OpSample> v;
  v.push_back(pool_sample(
      "k3 s2 p1", in({2, 3, 9}, kFloat64, 1), [](const TensorList& x) { return TensorList{max_pool1d(x[0], 3, 2, 1)}; },
      pcfg(1, {3}, {2}, {1}), 1, true, false));
  v.push_back(pool_sample(
      "k2 dilation 2 ceil_mode, with indices", in({1, 2, 8}, kFloat32, 2),
      [](const TensorList& x) {
        auto [o, i] = max_pool1d_with_indices(x[0], 2, 2, 0, 2, true);
        return TensorList{o, i};
      },
      pcfg(1, {2}, {2}, {0}, {2}, true), 1, true, true));
  v.push_back(pool_sample(
      "unbatched, non-contiguous, stride defaults to kernel", in({3, 7}, kFloat32, 3, true),
      [](const TensorList& x) { return TensorList{max_pool1d(x[0], 2)}; }, pcfg(1, {2}, {}, {0}), 1, true, false));
  return v;
}
std::vector<ErrorSample> max_pool1d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"4-D input",
           [f] {
             max_pool1d(f({1, 1, 4, 4}), 2);
           },
           "expected a 2-D or 3-D"},
          {"kernel pair",
           [f] {
             max_pool1d(f({1, 1, 4}), Shape{2, 2});
           },
           "kernel_size"},
          {"pad too large",
           [f] {
             max_pool1d(f({1, 1, 5}), 2, 1, 2);
           },
           "pad should be at most half"}};
}
KILN_OP_SAMPLES(max_pool1d, max_pool1d_samples, max_pool1d_errors);

std::vector<OpSample> max_pool3d_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 1;
  for (DType t : {kFloat32, kFloat64, kBFloat16})
    v.push_back(pool_sample(
        "k2 " + tname(t), in({2, 2, 4, 4, 5}, t, seed++),
        [](const TensorList& x) { return TensorList{max_pool3d(x[0], 2)}; }, pcfg(3, {2}, {}, {0}), 3, true, false));
  v.push_back(pool_sample(
      "k(3,2,3) s(2,1,2) p(1,0,1) ceil_mode with indices", in({1, 2, 5, 4, 6}, kFloat64, seed++),
      [](const TensorList& x) {
        auto [o, i] = max_pool3d_with_indices(x[0], Shape{3, 2, 3}, Shape{2, 1, 2}, Shape{1, 0, 1}, 1, true);
        return TensorList{o, i};
      },
      pcfg(3, {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1}, true), 3, true, true));
  v.push_back(pool_sample(
      "dilation 2, unbatched, non-contiguous", in({2, 5, 5, 5}, kFloat32, seed++, true),
      [](const TensorList& x) { return TensorList{max_pool3d(x[0], 2, 1, 0, 2)}; }, pcfg(3, {2}, {1}, {0}, {2}), 3,
      true, false));
  return v;
}
std::vector<ErrorSample> max_pool3d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"3-D input",
           [f] {
             max_pool3d(f({4, 4, 4}), 2);
           },
           "4-D or 5-D"},
          {"output too small",
           [f] {
             max_pool3d(f({1, 1, 2, 2, 2}), 3);
           },
           "too small"},
          {"stride 0",
           [f] {
             max_pool3d(f({1, 1, 4, 4, 4}), 2, 0);
           },
           "stride should be greater than zero"},
          {"integer input",
           [] {
             max_pool3d(in({1, 1, 4, 4, 4}, kInt64, 1), 2);
           },
           "floating"}};
}
KILN_OP_SAMPLES(max_pool3d, max_pool3d_samples, max_pool3d_errors);

// ---- avg_pool1d / avg_pool3d (+ int64 avg_pool2d) ----
std::vector<OpSample> avg_pool1d_samples() {
  std::vector<OpSample> v;
  for (bool cip : {true, false}) {
    PoolCfg c = pcfg(1, {3}, {2}, {1}, {1}, true);
    c.cip = cip;
    v.push_back(pool_sample(
        std::string("k3 s2 p1 ceil_mode") + (cip ? "" : " exclude pad"), in({2, 3, 8}, kFloat64, 1),
        [cip](const TensorList& x) { return TensorList{avg_pool1d(x[0], 3, 2, 1, true, cip)}; }, c, 1, false, false));
  }
  v.push_back(pool_sample(
      "unbatched float32", in({3, 7}, kFloat32, 2), [](const TensorList& x) { return TensorList{avg_pool1d(x[0], 2)}; },
      pcfg(1, {2}, {}, {0}), 1, false, false));
  v.push_back(pool_sample(
      "int64 k3 p1", make_input({2, 9}, kInt64, 3, -20, 20),
      [](const TensorList& x) { return TensorList{avg_pool1d(x[0], 3, 2, 1)}; }, pcfg(1, {3}, {2}, {1}), 1, false,
      false));
  return v;
}
std::vector<ErrorSample> avg_pool1d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"4-D input",
           [f] {
             avg_pool1d(f({1, 1, 4, 4}), 2);
           },
           "expected a 2-D or 3-D"},
          {"int32 input",
           [] {
             avg_pool1d(in({1, 1, 4}, kInt32, 1), 2);
           },
           "not implemented"}};
}
KILN_OP_SAMPLES(avg_pool1d, avg_pool1d_samples, avg_pool1d_errors);

std::vector<OpSample> avg_pool3d_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 1;
  for (bool cip : {true, false})
    for (int64_t div : {int64_t(0), int64_t(5)}) {
      PoolCfg c = pcfg(3, {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1}, true);
      c.cip = cip, c.divisor = div;
      v.push_back(pool_sample(
          std::string("k(3,2,3) s(2,1,2) p(1,0,1) ceil_mode") + (cip ? "" : " exclude pad") + (div ? " divisor 5" : ""),
          in({1, 2, 5, 4, 6}, kFloat64, seed++),
          [c](const TensorList& x) {
            return TensorList{avg_pool3d(x[0], Shape{3, 2, 3}, Shape{2, 1, 2}, Shape{1, 0, 1}, true, c.cip,
                                         c.divisor ? std::optional<int64_t>(c.divisor) : std::nullopt)};
          },
          c, 3, false, false));
    }
  for (DType t : {kFloat32, kFloat16})
    v.push_back(pool_sample(
        "k2 " + tname(t), in({2, 2, 4, 4, 4}, t, seed++),
        [](const TensorList& x) { return TensorList{avg_pool3d(x[0], 2)}; }, pcfg(3, {2}, {}, {0}), 3, false, false));
  v.push_back(pool_sample(
      "unbatched, non-contiguous", in({2, 4, 4, 4}, kFloat32, seed++, true),
      [](const TensorList& x) { return TensorList{avg_pool3d(x[0], 3, 1, 1)}; }, pcfg(3, {3}, {1}, {1}), 3, false,
      false));
  v.push_back(pool_sample(
      "int64 k3 s2 p1", make_input({1, 2, 5, 5, 5}, kInt64, seed++, -20, 20),
      [](const TensorList& x) { return TensorList{avg_pool3d(x[0], 3, 2, 1)}; }, pcfg(3, {3}, {2}, {1}), 3, false,
      false));
  return v;
}
std::vector<ErrorSample> avg_pool3d_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"divisor 0",
           [f] {
             avg_pool3d(f({1, 1, 4, 4, 4}), 2, {}, 0, false, true, 0);
           },
           "divisor must be not zero"},
          {"pad too large",
           [f] {
             avg_pool3d(f({1, 1, 4, 4, 4}), 2, 1, 2);
           },
           "pad should be at most half"},
          {"int32 input",
           [] {
             avg_pool3d(in({1, 1, 4, 4, 4}, kInt32, 1), 2);
           },
           "not implemented"}};
}
KILN_OP_SAMPLES(avg_pool3d, avg_pool3d_samples, avg_pool3d_errors);

std::vector<OpSample> avg_pool2d_int_samples() {
  std::vector<OpSample> v;
  PoolCfg c = pcfg(2, {3}, {2}, {1}, {1}, true);
  c.cip = false;
  v.push_back(pool_sample(
      "int64 k3 s2 p1 ceil_mode exclude pad", make_input({2, 2, 5, 6}, kInt64, 1, -20, 20),
      [](const TensorList& x) { return TensorList{avg_pool2d(x[0], 3, 2, 1, true, false)}; }, c, 2, false, false));
  return v;
}
KILN_OP_SAMPLES(avg_pool2d, avg_pool2d_int_samples, nullptr);

// avg_pool3d_backward against the adjoint of the reference windows.
std::vector<OpSample> avg_pool3d_backward_samples() {
  std::vector<OpSample> v;
  for (bool cip : {true, false}) {
    PoolCfg c = pcfg(3, {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1}, true);
    c.cip = cip;
    Tensor x = in({1, 2, 5, 4, 6}, kFloat64, 1);
    Shape os = ref_pool(Ref::of(x), 3, c, false).out.shape;
    OpSample s;
    s.name = std::string("ceil_mode") + (cip ? "" : " exclude pad");
    s.inputs = {in(os, kFloat64, 2), x};
    s.fn = [cip](const TensorList& t) {
      Attrs a{Shape{3, 2, 3}, Shape{2, 1, 2}, Shape{1, 0, 1}, true, cip, std::monostate{}};
      return TensorList{call_op1(OpId::avg_pool3d_backward, {t[0], t[1]}, a)};
    };
    s.reference = [c](const TensorList& t) {
      // gx = J^T g with J the linear map x -> avg_pool3d(x), column by column.
      Ref g = Ref::of(t[0]), xr = Ref::of(t[1]), gx(xr.shape);
      for (int64_t i = 0; i < xr.numel(); ++i) {
        Ref e(xr.shape);
        e.v[i] = 1;
        Ref col = ref_pool(e, 3, c, false).out;
        for (int64_t k = 0; k < col.numel(); ++k) gx.v[i] += col.v[k] * g.v[k];
      }
      return TensorList{gx.to(kFloat64)};
    };
    v.push_back(s);
  }
  return v;
}
KILN_OP_SAMPLES(avg_pool3d_backward, avg_pool3d_backward_samples, nullptr);

// ---- adaptive pools ----
// torch's windows per dim: [floor(i*In/Out), ceil((i+1)*In/Out)).
PoolResult ref_adaptive(const Ref& x, int nd, const Shape& out_size, bool is_max) {
  Shape sp(3, 1), o(3, 1);
  for (int i = 0; i < nd; ++i) {
    sp[3 - nd + i] = x.shape[x.shape.size() - nd + i];
    o[3 - nd + i] = out_size[static_cast<size_t>(i)];
  }
  Shape os = x.shape;
  for (int i = 0; i < nd; ++i) os[os.size() - nd + i] = o[3 - nd + i];
  PoolResult r{Ref(os), Ref(os)};
  const int64_t plane = sp[0] * sp[1] * sp[2], planes = x.numel() / plane;
  auto lo = [&](int i, int64_t a) { return a * sp[i] / o[i]; };
  auto hi = [&](int i, int64_t a) { return ((a + 1) * sp[i] + o[i] - 1) / o[i]; };
  int64_t k = 0;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t a = 0; a < o[0]; ++a)
      for (int64_t b = 0; b < o[1]; ++b)
        for (int64_t e = 0; e < o[2]; ++e, ++k) {
          double best = -kInf, sum = 0;
          int64_t bi = -1, n = 0;
          for (int64_t q0 = lo(0, a); q0 < hi(0, a); ++q0)
            for (int64_t q1 = lo(1, b); q1 < hi(1, b); ++q1)
              for (int64_t q2 = lo(2, e); q2 < hi(2, e); ++q2) {
                const int64_t pos = (q0 * sp[1] + q1) * sp[2] + q2;
                const double val = x.v[pl * plane + pos];
                if (bi < 0 || val > best) best = val, bi = pos;
                sum += val, ++n;
              }
          r.out.v[k] = is_max ? best : sum / static_cast<double>(n);
          r.idx.v[k] = static_cast<double>(bi);
        }
  return r;
}
OpSample adaptive_sample(std::string name, Tensor x, OpFn fn, int nd, Shape out, bool is_max) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = {std::move(x)};
  s.fn = std::move(fn);
  if (s.inputs[0].dtype() == kFloat32 || s.inputs[0].dtype() == kFloat64) s.atol = 1e-5;
  s.reference = [nd, out, is_max](const TensorList& t) {
    PoolResult r = ref_adaptive(Ref::of(t[0]), nd, out, is_max);
    TensorList o{r.out.to(t[0].dtype())};
    if (is_max) o.push_back(r.idx.to(kInt64));
    return o;
  };
  return s;
}

std::vector<OpSample> adaptive_avg_pool1d_samples() {
  return {adaptive_sample(
              "7 -> 3", in({2, 3, 7}, kFloat64, 1),
              [](const TensorList& x) { return TensorList{adaptive_avg_pool1d(x[0], 3)}; }, 1, {3}, false),
          adaptive_sample(
              "8 -> 4 unbatched float32", in({3, 8}, kFloat32, 2),
              [](const TensorList& x) { return TensorList{adaptive_avg_pool1d(x[0], 4)}; }, 1, {4}, false)};
}
std::vector<ErrorSample> adaptive_avg_pool1d_errors() {
  return {{"4-D input", [] { adaptive_avg_pool1d(in({1, 1, 4, 4}, kFloat32, 1), 2); }, "expected a 2-D or 3-D"}};
}
KILN_OP_SAMPLES(adaptive_avg_pool1d, adaptive_avg_pool1d_samples, adaptive_avg_pool1d_errors);

std::vector<OpSample> adaptive_avg_pool3d_samples() {
  return {adaptive_sample(
              "(5,4,7) -> (3,2,3)", in({2, 2, 5, 4, 7}, kFloat64, 1),
              [](const TensorList& x) {
                return TensorList{adaptive_avg_pool3d(x[0], Shape{3, 2, 3})};
              },
              3, {3, 2, 3}, false),
          adaptive_sample(
              "(4,4,6) -> (2,1,3) divides, unbatched float32", in({3, 4, 4, 6}, kFloat32, 2),
              [](const TensorList& x) {
                return TensorList{adaptive_avg_pool3d(x[0], Shape{2, 1, 3})};
              },
              3, {2, 1, 3}, false),
          adaptive_sample(
              "bfloat16 (3,3,3) -> 2", in({1, 2, 3, 3, 3}, kBFloat16, 3),
              [](const TensorList& x) { return TensorList{adaptive_avg_pool3d(x[0], 2)}; }, 3, {2, 2, 2}, false)};
}
std::vector<ErrorSample> adaptive_avg_pool3d_errors() {
  return {{"3-D input",
           [] {
             adaptive_avg_pool3d(in({4, 4, 4}, kFloat32, 1), 2);
           },
           "expected a 4-D or 5-D"},
          {"empty spatial dim",
           [] {
             adaptive_avg_pool3d(in({1, 1, 0, 4, 4}, kFloat32, 1), 2);
           },
           "non-zero size"}};
}
KILN_OP_SAMPLES(adaptive_avg_pool3d, adaptive_avg_pool3d_samples, adaptive_avg_pool3d_errors);

std::vector<OpSample> adaptive_max_pool1d_samples() {
  return {adaptive_sample(
              "7 -> 3 with indices", in({2, 3, 7}, kFloat64, 1),
              [](const TensorList& x) {
                auto [o, i] = adaptive_max_pool1d_with_indices(x[0], 3);
                return TensorList{o, i};
              },
              1, {3}, true),
          adaptive_sample(
              "unbatched 5 -> 5", in({2, 5}, kFloat32, 2),
              [](const TensorList& x) {
                auto [o, i] = adaptive_max_pool1d_with_indices(x[0], 5);
                return TensorList{o, i};
              },
              1, {5}, true)};
}
std::vector<ErrorSample> adaptive_max_pool1d_errors() {
  return {{"4-D input", [] { adaptive_max_pool1d(in({1, 1, 4, 4}, kFloat32, 1), 2); }, "expected a 2-D or 3-D"}};
}
KILN_OP_SAMPLES(adaptive_max_pool1d, adaptive_max_pool1d_samples, adaptive_max_pool1d_errors);

std::vector<OpSample> adaptive_max_pool2d_samples() {
  std::vector<OpSample> v;
  for (DType t : {kFloat32, kFloat64, kFloat16})
    v.push_back(adaptive_sample(
        "(5,7) -> (2,3) " + tname(t), in({2, 2, 5, 7}, t, 1),
        [](const TensorList& x) {
          auto [o, i] = adaptive_max_pool2d_with_indices(x[0], Shape{2, 3});
          return TensorList{o, i};
        },
        2, {2, 3}, true));
  v.push_back(adaptive_sample(
      "unbatched, non-contiguous (4,4) -> 2", in({3, 4, 4}, kFloat32, 2, true),
      [](const TensorList& x) {
        auto [o, i] = adaptive_max_pool2d_with_indices(x[0], 2);
        return TensorList{o, i};
      },
      2, {2, 2}, true));
  return v;
}
std::vector<ErrorSample> adaptive_max_pool2d_errors() {
  return {{"5-D input",
           [] {
             adaptive_max_pool2d(in({1, 1, 1, 4, 4}, kFloat32, 1), 2);
           },
           "expected a 3-D or 4-D"},
          {"integer input",
           [] {
             adaptive_max_pool2d(in({1, 1, 4, 4}, kInt64, 1), 2);
           },
           "floating"}};
}
KILN_OP_SAMPLES(adaptive_max_pool2d, adaptive_max_pool2d_samples, adaptive_max_pool2d_errors);

std::vector<OpSample> adaptive_max_pool3d_samples() {
  return {adaptive_sample(
              "(5,4,7) -> (3,2,3)", in({2, 2, 5, 4, 7}, kFloat64, 1),
              [](const TensorList& x) {
                auto [o, i] = adaptive_max_pool3d_with_indices(x[0], Shape{3, 2, 3});
                return TensorList{o, i};
              },
              3, {3, 2, 3}, true),
          adaptive_sample(
              "unbatched float32 -> 2", in({2, 3, 4, 5}, kFloat32, 2),
              [](const TensorList& x) {
                auto [o, i] = adaptive_max_pool3d_with_indices(x[0], 2);
                return TensorList{o, i};
              },
              3, {2, 2, 2}, true)};
}
std::vector<ErrorSample> adaptive_max_pool3d_errors() {
  return {{"output_size pair",
           [] {
             adaptive_max_pool3d(in({1, 1, 4, 4, 4}, kFloat32, 1), Shape{2, 2});
           },
           "output_size"}};
}
KILN_OP_SAMPLES(adaptive_max_pool3d, adaptive_max_pool3d_samples, adaptive_max_pool3d_errors);

// ---- im2col / col2im ----
// Calls f(col_flat, img_flat) for every (block element, image position) pair
// inside the image: cols [N, C*kh*kw, L], image [N, C, H, W].
void fold_pairs(int64_t N, int64_t C, int64_t H, int64_t W, A3 k, A3 d, A3 p, A3 s,
                const std::function<void(int64_t, int64_t)>& f) {
  const int64_t oh = (H + 2 * p[1] - d[1] * (k[1] - 1) - 1) / s[1] + 1,
                ow = (W + 2 * p[2] - d[2] * (k[2] - 1) - 1) / s[2] + 1;
  const int64_t rows = C * k[1] * k[2], L = oh * ow;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < k[1]; ++i)
        for (int64_t j = 0; j < k[2]; ++j)
          for (int64_t a = 0; a < oh; ++a)
            for (int64_t b = 0; b < ow; ++b) {
              const int64_t h = a * s[1] - p[1] + i * d[1], w = b * s[2] - p[2] + j * d[2];
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              f((n * rows + (c * k[1] + i) * k[2] + j) * L + a * ow + b, ((n * C + c) * H + h) * W + w);
            }
}

OpSample unfold_sample(std::string name, Tensor x, A3 k, A3 d, A3 p, A3 s) {
  OpSample o;
  o.name = std::move(name);
  o.inputs = {std::move(x)};
  o.fn = [k, d, p, s](const TensorList& t) {
    return TensorList{
        nn::functional::unfold(t[0], Shape{k[1], k[2]}, Shape{d[1], d[2]}, Shape{p[1], p[2]}, Shape{s[1], s[2]})};
  };
  o.reference = [k, d, p, s](const TensorList& t) {
    Ref x = Ref::of(t[0]);
    const bool ub = x.dim() == 3;
    if (ub) x.shape.insert(x.shape.begin(), 1);
    const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
    const int64_t oh = (H + 2 * p[1] - d[1] * (k[1] - 1) - 1) / s[1] + 1,
                  ow = (W + 2 * p[2] - d[2] * (k[2] - 1) - 1) / s[2] + 1;
    Ref out({N, C * k[1] * k[2], oh * ow});
    fold_pairs(N, C, H, W, k, d, p, s, [&](int64_t col, int64_t img) { out.v[col] = x.v[img]; });
    if (ub) out.shape.erase(out.shape.begin());
    return TensorList{out.to(t[0].dtype())};
  };
  return o;
}
std::vector<OpSample> im2col_samples() {
  return {unfold_sample("k(2,3) float64", in({2, 3, 4, 5}, kFloat64, 1), {1, 2, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}),
          unfold_sample("k3 dilation (2,1) pad 1 stride (1,2) float32", in({1, 2, 6, 7}, kFloat32, 2), {1, 3, 3},
                        {1, 2, 1}, {0, 1, 1}, {1, 1, 2}),
          unfold_sample("unbatched, non-contiguous, bfloat16", in({2, 4, 4}, kBFloat16, 3, true), {1, 2, 2}, {1, 1, 1},
                        {0, 0, 0}, {1, 2, 2})};
}
std::vector<ErrorSample> im2col_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"blocks < 1",
           [f] {
             nn::functional::unfold(f({1, 1, 2, 2}), 3);
           },
           "must be at least one"},
          {"2-D input",
           [f] {
             nn::functional::unfold(f({4, 4}), 2);
           },
           "Expected 3D or 4D"},
          {"negative padding",
           [f] {
             nn::functional::unfold(f({1, 1, 4, 4}), 2, 1, -1);
           },
           "padding should be non-negative"}};
}
KILN_OP_SAMPLES(im2col, im2col_samples, im2col_errors);

OpSample fold_sample(std::string name, Tensor x, Shape out_hw, A3 k, A3 d, A3 p, A3 s) {
  OpSample o;
  o.name = std::move(name);
  o.inputs = {std::move(x)};
  o.fn = [out_hw, k, d, p, s](const TensorList& t) {
    return TensorList{
        nn::functional::fold(t[0], out_hw, Shape{k[1], k[2]}, Shape{d[1], d[2]}, Shape{p[1], p[2]}, Shape{s[1], s[2]})};
  };
  o.reference = [out_hw, k, d, p, s](const TensorList& t) {
    Ref x = Ref::of(t[0]);
    const bool ub = x.dim() == 2;
    if (ub) x.shape.insert(x.shape.begin(), 1);
    const int64_t N = x.shape[0], C = x.shape[1] / (k[1] * k[2]);
    Ref out({N, C, out_hw[0], out_hw[1]});
    fold_pairs(N, C, out_hw[0], out_hw[1], k, d, p, s, [&](int64_t col, int64_t img) { out.v[img] += x.v[col]; });
    if (ub) out.shape.erase(out.shape.begin());
    return TensorList{out.to(t[0].dtype())};
  };
  return o;
}
std::vector<OpSample> col2im_samples() {
  // [2, 3*2*3, 3*3] folds to [2, 3, 4, 5] with k(2,3); overlapping blocks sum.
  return {
      fold_sample("k(2,3) float64", in({2, 18, 9}, kFloat64, 1), {4, 5}, {1, 2, 3}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}),
      fold_sample("k3 dilation (2,1) pad 1 stride (1,2) float32", in({1, 18, 16}, kFloat32, 2), {6, 7}, {1, 3, 3},
                  {1, 2, 1}, {0, 1, 1}, {1, 1, 2}),
      fold_sample("unbatched float64", in({8, 4}, kFloat64, 3), {4, 4}, {1, 2, 2}, {1, 1, 1}, {0, 0, 0}, {1, 2, 2})};
}
std::vector<ErrorSample> col2im_errors() {
  auto f = [](Shape s) { return in(s, kFloat32, 1); };
  return {{"rows not divisible",
           [f] {
             nn::functional::fold(f({1, 5, 9}), Shape{4, 4}, 2);
           },
           "divisible by the product"},
          {"block count",
           [f] {
             nn::functional::fold(f({1, 4, 8}), Shape{4, 4}, 2);
           },
           "calculated number of sliding blocks"}};
}
KILN_OP_SAMPLES(col2im, col2im_samples, col2im_errors);

}  // namespace
}  // namespace kiln::test
