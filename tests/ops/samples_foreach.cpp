// Samples for the multi-tensor (foreach) ops: every position of the result is
// checked against an fp64 per-tensor reference (naive loops on Ref arrays).
// Inputs hold the lists one after another, as the op does (Note [Foreach ops]).
#include <gtest/gtest.h>

#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

struct Pos {
  Shape shape;
  DType dtype;
  bool noncontig = false;
};

// Mixed shapes and dtypes (0-d, empty, strided, reduced floats) in one list.
const std::vector<Pos> kMixed = {{{2, 3}, kFloat32},  {{}, kFloat64},           {{5}, kFloat16}, {{0, 3}, kFloat32},
                                 {{3, 4}, kBFloat16}, {{4, 3}, kFloat32, true}, {{7}, kFloat64}};
// Sizes that make the parallel ranges cross tensor boundaries and split tensors.
const std::vector<Pos> kLarge = {{{33000}, kFloat32}, {{3}, kFloat32}, {{130, 260}, kFloat32}, {{8000}, kFloat64}};

using Lists = std::vector<TensorList>;
using Range = std::pair<double, double>;
// The fp64 result at one position from the Refs of every list at that position.
using RefFn = std::function<Ref(size_t i, const std::vector<Ref>& args)>;

Lists split(const TensorList& in, size_t lists) {
  size_t n = in.size() / lists;
  Lists out(lists);
  for (size_t l = 0; l < lists; ++l) out[l].assign(in.begin() + l * n, in.begin() + (l + 1) * n);
  return out;
}

// A copy with the same layout (a strided view stays strided), so in-place ops see strided `self`.
Tensor fresh(const Tensor& t) {
  if (t.is_contiguous() || t.dim() == 0) return t.clone();
  Shape big = t.sizes().vec();
  big.back() *= 2;
  Tensor v = zeros(big, TensorOptions(t.dtype())).slice(-1, 0, std::nullopt, 2);
  v.copy_(t);
  return v;
}

std::vector<double> per_tensor(size_t n, double first, double step) {
  std::vector<double> v;
  for (size_t i = 0; i < n; ++i) v.push_back(first + step * static_cast<double>(i));
  return v;
}

// Builds a sample whose `call` gets fresh copies of the lists and returns the result list
// (for in-place ops, list 0 after the update).
OpSample sample(std::string name, const std::vector<Pos>& pos, const std::vector<Range>& ranges,
                std::function<TensorList(Lists&)> call, RefFn ref, uint64_t seed = 1) {
  OpSample s;
  s.name = std::move(name);
  const size_t lists = ranges.size();
  for (size_t l = 0; l < lists; ++l)
    for (size_t i = 0; i < pos.size(); ++i)
      s.inputs.push_back(make_input(pos[i].shape, pos[i].dtype, seed * 1000 + l * 100 + i, ranges[l].first,
                                    ranges[l].second, pos[i].noncontig));
  s.fn = [lists, call](const TensorList& in) {
    Lists L = split(in, lists);
    for (Tensor& t : L[0]) t = fresh(t);
    return call(L);
  };
  s.reference = [lists, ref](const TensorList& in) {
    Lists L = split(in, lists);
    TensorList out;
    for (size_t i = 0; i < L[0].size(); ++i) {
      std::vector<Ref> args;
      for (size_t l = 0; l < lists; ++l) args.push_back(Ref::of(L[l][i]));
      out.push_back(ref(i, args).to(L[0][i].dtype()));
    }
    return out;
  };
  return s;
}

ErrorSample err(std::string name, std::function<void()> call, std::string expect) {
  return {std::move(name), std::move(call), std::move(expect)};
}

double at(const std::vector<double>& v, size_t i) { return v.size() == 1 ? v[0] : v[i]; }

const Range kSym{-2.0, 2.0};
const Range kPos{0.5, 2.0};

// ---- out of place ----
std::vector<OpSample> samples_neg() {
  std::vector<OpSample> out;
  for (const auto* pos : {&kMixed, &kLarge})
    out.push_back(sample(
        pos == &kMixed ? "mixed" : "large", *pos, {kSym}, [](Lists& L) { return _foreach_neg(L[0]); },
        [](size_t, const std::vector<Ref>& a) { return ref_map(a[0], [](double x) { return -x; }); }));
  return out;
}
std::vector<ErrorSample> errors_neg() {
  return {err(
              "empty list", [] { _foreach_neg({}); }, "at least one tensor"),
          err(
              "integer tensor",
              [] {
                _foreach_neg({zeros({2}), zeros({2}, TensorOptions(kInt64))});
              },
              "expected floating-point tensors, got dtype int64 for self[1]"),
          err(
              "undefined tensor",
              [] {
                _foreach_neg({zeros({2}), Tensor()});
              },
              "self[1] is undefined")};
}

std::vector<OpSample> samples_sqrt() {
  std::vector<OpSample> out;
  for (const auto* pos : {&kMixed, &kLarge})
    out.push_back(sample(
        pos == &kMixed ? "mixed" : "large", *pos, {{0.0, 4.0}}, [](Lists& L) { return _foreach_sqrt(L[0]); },
        [](size_t, const std::vector<Ref>& a) { return ref_map(a[0], [](double x) { return std::sqrt(x); }); }));
  return out;
}
std::vector<ErrorSample> errors_sqrt() {
  return {err(
      "empty list", [] { _foreach_sqrt({}); }, "at least one tensor")};
}

Ref ref_add(const std::vector<Ref>& a, double alpha) {
  return ref_map2(a[0], a[1], [alpha](double x, double y) { return x + alpha * y; });
}
std::vector<OpSample> samples_add() {
  std::vector<OpSample> out;
  out.push_back(sample(
      "mixed alpha -0.5", kMixed, {kSym, kSym}, [](Lists& L) { return _foreach_add(L[0], L[1], -0.5); },
      [](size_t, const std::vector<Ref>& a) { return ref_add(a, -0.5); }));
  out.push_back(sample(
      "mixed alpha 1", kMixed, {kSym, kSym}, [](Lists& L) { return _foreach_add(L[0], L[1]); },
      [](size_t, const std::vector<Ref>& a) { return ref_add(a, 1.0); }));
  out.push_back(sample(
      "large alpha 3", kLarge, {kSym, kSym}, [](Lists& L) { return _foreach_add(L[0], L[1], 3); },
      [](size_t, const std::vector<Ref>& a) { return ref_add(a, 3.0); }));
  return out;
}
std::vector<ErrorSample> errors_add() {
  return {
      err(
          "list lengths",
          [] {
            _foreach_add({zeros({2}), zeros({2})}, {zeros({2})});
          },
          "expected all tensor lists to have the same length, got 2 (self) and 1 (other)"),
      err(
          "shape mismatch",
          [] {
            _foreach_add({zeros({2}), zeros({3})}, {zeros({2}), zeros({1, 3})});
          },
          "expected other[1] to have the shape of self[1], [3], but got [1, 3]"),
      err(
          "dtype mismatch", [] { _foreach_add({zeros({2})}, {zeros({2}, TensorOptions(kFloat64))}); },
          "expected other[0] to have the dtype of self[0], float32, but got float64"),
      err(
          "requires grad", [] { _foreach_add({zeros({2})}, {zeros({2}).requires_grad_()}); }, "not differentiable")};
}

Ref ref_addcmul(const std::vector<Ref>& a, double v) {
  return ref_map3(a[0], a[1], a[2], [v](double x, double y, double z) { return x + v * y * z; });
}
Ref ref_addcdiv(const std::vector<Ref>& a, double v) {
  return ref_map3(a[0], a[1], a[2], [v](double x, double y, double z) { return x + v * y / z; });
}
std::vector<OpSample> samples_addcmul() {
  std::vector<OpSample> out;
  out.push_back(sample(
      "mixed value -1", kMixed, {kSym, kSym, kSym}, [](Lists& L) { return _foreach_addcmul(L[0], L[1], L[2], -1); },
      [](size_t, const std::vector<Ref>& a) { return ref_addcmul(a, -1.0); }));
  const auto vals = per_tensor(kMixed.size(), 0.5, -0.25);
  out.push_back(sample(
      "mixed per-tensor values", kMixed, {kSym, kSym, kSym},
      [vals](Lists& L) { return _foreach_addcmul(L[0], L[1], L[2], vals); },
      [vals](size_t i, const std::vector<Ref>& a) { return ref_addcmul(a, vals[i]); }));
  return out;
}
std::vector<ErrorSample> errors_addcmul() {
  return {
      err(
          "scalar count",
          [] {
            _foreach_addcmul({zeros({2}), zeros({2})}, {zeros({2}), zeros({2})}, {zeros({2}), zeros({2})},
                             std::vector<double>{1, 2, 3});
          },
          "expected 1 scalar or one per tensor (2), got 3"),
      err(
          "list lengths", [] { _foreach_addcmul({zeros({2})}, {zeros({2})}, {}); }, "got 1 (self) and 0 (tensor2)")};
}

// ---- in place ----
std::vector<OpSample> samples_add_() {
  std::vector<OpSample> out;
  out.push_back(sample(
      "mixed alpha 0.25", kMixed, {kSym, kSym},
      [](Lists& L) {
        _foreach_add_(L[0], L[1], 0.25);
        return L[0];
      },
      [](size_t, const std::vector<Ref>& a) { return ref_add(a, 0.25); }));
  out.push_back(sample(
      "large alpha -2", kLarge, {kSym, kSym},
      [](Lists& L) {
        _foreach_add_(L[0], L[1], -2.0);
        return L[0];
      },
      [](size_t, const std::vector<Ref>& a) { return ref_add(a, -2.0); }));
  out.push_back(sample(
      "self as other", kMixed, {kSym},
      [](Lists& L) {
        _foreach_add_(L[0], L[0], 0.5);
        return L[0];
      },
      [](size_t, const std::vector<Ref>& a) {
        return ref_add({a[0], a[0]}, 0.5);
      }));
  return out;
}
std::vector<ErrorSample> errors_add_() {
  return {
      err(
          "partial overlap",
          [] {
            Tensor x = zeros({4});
            _foreach_add_({x.narrow(0, 0, 3)}, {x.narrow(0, 1, 3)});
          },
          "other[0] partly overlaps self[0]"),
      err(
          "expanded self", [] { _foreach_add_({zeros({1}).expand({3})}, {zeros({3})}); },
          "refers to a single memory location"),
      err(
          "requires grad", [] { _foreach_add_({zeros({2}).requires_grad_()}, {zeros({2})}); }, "not differentiable")};
}

template <class Call>
std::vector<OpSample> scalar_samples(const Call& call, double (*f)(double, double), Range range) {
  std::vector<OpSample> out;
  out.push_back(sample(
      "mixed one scalar", kMixed, {range},
      [call](Lists& L) {
        call(L[0], std::vector<double>{-1.5});
        return L[0];
      },
      [f](size_t, const std::vector<Ref>& a) { return ref_map(a[0], [f](double x) { return f(x, -1.5); }); }));
  const auto s = per_tensor(kMixed.size(), 0.75, 0.5);
  out.push_back(sample(
      "mixed per-tensor scalars", kMixed, {range},
      [call, s](Lists& L) {
        call(L[0], s);
        return L[0];
      },
      [f, s](size_t i, const std::vector<Ref>& a) {
        return ref_map(a[0], [f, v = s[i]](double x) { return f(x, v); });
      }));
  const auto sl = per_tensor(kLarge.size(), 1.25, -0.5);
  out.push_back(sample(
      "large per-tensor scalars", kLarge, {range},
      [call, sl](Lists& L) {
        call(L[0], sl);
        return L[0];
      },
      [f, sl](size_t i, const std::vector<Ref>& a) {
        return ref_map(a[0], [f, v = sl[i]](double x) { return f(x, v); });
      }));
  return out;
}
std::vector<OpSample> samples_add_scalar_() {
  auto out = scalar_samples([](const TensorList& s, const std::vector<double>& v) { _foreach_add_(s, v); },
                            [](double x, double v) { return x + v; }, kSym);
  out.push_back(sample(
      "Scalar overload, int", kMixed, {kSym},
      [](Lists& L) {
        _foreach_add_(L[0], 2);
        return L[0];
      },
      [](size_t, const std::vector<Ref>& a) { return ref_map(a[0], [](double x) { return x + 2; }); }));
  return out;
}
std::vector<OpSample> samples_mul_scalar_() {
  auto out = scalar_samples([](const TensorList& s, const std::vector<double>& v) { _foreach_mul_(s, v); },
                            [](double x, double v) { return x * v; }, kSym);
  out.push_back(sample(
      "Scalar overload", kMixed, {kSym},
      [](Lists& L) {
        _foreach_mul_(L[0], 0.5);
        return L[0];
      },
      [](size_t, const std::vector<Ref>& a) { return ref_map(a[0], [](double x) { return x * 0.5; }); }));
  return out;
}
std::vector<OpSample> samples_div_scalar_() {
  auto out = scalar_samples([](const TensorList& s, const std::vector<double>& v) { _foreach_div_(s, v); },
                            [](double x, double v) { return x / v; }, kSym);
  out.push_back(sample(
      "Scalar overload", kMixed, {kSym},
      [](Lists& L) {
        _foreach_div_(L[0], 4.0);
        return L[0];
      },
      [](size_t, const std::vector<Ref>& a) { return ref_map(a[0], [](double x) { return x / 4; }); }));
  return out;
}
std::vector<ErrorSample> errors_scalar_() {
  return {err(
              "scalar count",
              [] {
                _foreach_mul_({zeros({2}), zeros({2}), zeros({1})}, std::vector<double>{1, 2});
              },
              "expected 1 scalar or one per tensor (3), got 2"),
          err(
              "empty list", [] { _foreach_div_({}, 2.0); }, "at least one tensor"),
          err(
              "integer tensor", [] { _foreach_add_({zeros({2}, TensorOptions(kInt32))}, 1); },
              "expected floating-point tensors")};
}

template <bool Div>
std::vector<OpSample> addc_samples_() {
  auto ref = [](const std::vector<Ref>& a, double v) { return Div ? ref_addcdiv(a, v) : ref_addcmul(a, v); };
  auto call = [](const TensorList& s, const TensorList& a, const TensorList& b, const std::vector<double>& v) {
    if (Div)
      _foreach_addcdiv_(s, a, b, v);
    else
      _foreach_addcmul_(s, a, b, v);
  };
  const Range third = Div ? kPos : kSym;
  std::vector<OpSample> out;
  out.push_back(sample(
      "mixed value 0.3", kMixed, {kSym, kSym, third},
      [call](Lists& L) {
        call(L[0], L[1], L[2], {0.3});
        return L[0];
      },
      [ref](size_t, const std::vector<Ref>& a) { return ref(a, 0.3); }));
  const auto v = per_tensor(kMixed.size(), -1.0, 0.3);
  out.push_back(sample(
      "mixed per-tensor values", kMixed, {kSym, kSym, third},
      [call, v](Lists& L) {
        call(L[0], L[1], L[2], v);
        return L[0];
      },
      [ref, v](size_t i, const std::vector<Ref>& a) { return ref(a, at(v, i)); }));
  const auto vl = per_tensor(kLarge.size(), 0.5, 0.25);
  out.push_back(sample(
      "large per-tensor values", kLarge, {kSym, kSym, third},
      [call, vl](Lists& L) {
        call(L[0], L[1], L[2], vl);
        return L[0];
      },
      [ref, vl](size_t i, const std::vector<Ref>& a) { return ref(a, at(vl, i)); }));
  // As in Adam's second moment: self += value * g * g with tensor1 and tensor2 the same tensor.
  out.push_back(sample(
      "tensor1 is tensor2", kMixed, {kSym, third},
      [call](Lists& L) {
        call(L[0], L[1], L[1], {0.5});
        return L[0];
      },
      [ref](size_t, const std::vector<Ref>& a) {
        return ref({a[0], a[1], a[1]}, 0.5);
      }));
  if (!Div)
    out.push_back(sample(
        "Scalar overload", kMixed, {kSym, kSym, kSym},
        [](Lists& L) {
          _foreach_addcmul_(L[0], L[1], L[2]);
          return L[0];
        },
        [ref](size_t, const std::vector<Ref>& a) { return ref(a, 1.0); }));
  else
    out.push_back(sample(
        "Scalar overload", kMixed, {kSym, kSym, kPos},
        [](Lists& L) {
          _foreach_addcdiv_(L[0], L[1], L[2], -2.0);
          return L[0];
        },
        [ref](size_t, const std::vector<Ref>& a) { return ref(a, -2.0); }));
  return out;
}
std::vector<ErrorSample> errors_addc_() {
  return {err(
              "shape mismatch",
              [] {
                _foreach_addcdiv_({zeros({2, 2})}, {zeros({2, 2})}, {zeros({4})});
              },
              "expected tensor2[0] to have the shape of self[0], [2, 2], but got [4]"),
          err(
              "dtype mismatch",
              [] { _foreach_addcmul_({zeros({2})}, {zeros({2}, TensorOptions(kFloat16))}, {zeros({2})}); },
              "expected tensor1[0] to have the dtype of self[0], float32, but got float16")};
}

std::vector<OpSample> samples_lerp_() {
  std::vector<OpSample> out;
  auto ref = [](const std::vector<Ref>& a, double w) {
    return ref_map2(a[0], a[1], [w](double s, double e) { return s + w * (e - s); });
  };
  // Weights exact in bfloat16: like lerp_ with a Scalar weight, the weight is taken in the tensor's dtype.
  for (double w : {0.125, 0.875, 1.0})
    out.push_back(sample(
        "mixed weight " + std::to_string(w), kMixed, {kSym, kSym},
        [w](Lists& L) {
          _foreach_lerp_(L[0], L[1], w);
          return L[0];
        },
        [ref, w](size_t, const std::vector<Ref>& a) { return ref(a, w); }));
  const auto w = per_tensor(kLarge.size(), 0.2, 0.25);
  out.push_back(sample(
      "large per-tensor weights", kLarge, {kSym, kSym},
      [w](Lists& L) {
        _foreach_lerp_(L[0], L[1], w);
        return L[0];
      },
      [ref, w](size_t i, const std::vector<Ref>& a) { return ref(a, w[i]); }));
  return out;
}
std::vector<ErrorSample> errors_lerp_() {
  return {err(
      "list lengths",
      [] {
        _foreach_lerp_({zeros({2})}, {zeros({2}), zeros({2})}, 0.5);
      },
      "got 1 (self) and 2 (end)")};
}

double ref_max(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNan : std::max(a, b); }
std::vector<OpSample> samples_maximum_() {
  std::vector<OpSample> out;
  for (const auto* pos : {&kMixed, &kLarge})
    out.push_back(sample(
        pos == &kMixed ? "mixed" : "large", *pos, {kSym, kSym},
        [](Lists& L) {
          _foreach_maximum_(L[0], L[1]);
          return L[0];
        },
        [](size_t, const std::vector<Ref>& a) { return ref_map2(a[0], a[1], ref_max); }));
  OpSample s;
  s.name = "NaN propagates";
  s.inputs = {kiln::tensor<double>({1.0, kNan, -2.0, kNan}, {4}, kFloat64).to(kFloat32),
              kiln::tensor<double>({kNan, 0.0, 3.0, 1.0}, {4}, kFloat64).to(kFloat32)};
  s.fn = [](const TensorList& in) {
    TensorList self{in[0].clone()};
    _foreach_maximum_(self, {in[1]});
    return self;
  };
  s.reference = [](const TensorList& in) {
    return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), ref_max).to(kFloat32)};
  };
  out.push_back(std::move(s));
  return out;
}
std::vector<ErrorSample> errors_maximum_() {
  return {err(
      "undefined other", [] { _foreach_maximum_({zeros({2})}, {Tensor()}); }, "other[0] is undefined")};
}

// ---- _fused_adam_ (Note [Fused Adam]): params, exp_avgs, exp_avg_sqs (and max_exp_avg_sqs)
// after one step, position i at step count i + 1, against Adam's formulas in fp64 ----
struct AdamCase {
  double lr, beta1, beta2, eps, wd;
  bool amsgrad, maximize, decoupled;
};

OpSample adam_sample(std::string name, const std::vector<Pos>& pos, const AdamCase& h, double tol = 0) {
  const size_t lists = h.amsgrad ? 5 : 4;
  std::vector<double> step_size, bc2;
  for (size_t i = 0; i < pos.size(); ++i) {
    const double t = static_cast<double>(i + 1);
    step_size.push_back(h.lr / (1 - std::pow(h.beta1, t)));
    bc2.push_back(std::sqrt(1 - std::pow(h.beta2, t)));
  }
  const std::vector<Range> ranges = {kSym, kSym, kSym, {0.25, 1.0}, {0.5, 1.5}};  // p, g, m, v, vmax
  OpSample s;
  s.name = std::move(name);
  for (size_t l = 0; l < lists; ++l)
    for (size_t i = 0; i < pos.size(); ++i)
      s.inputs.push_back(make_input(pos[i].shape, pos[i].dtype, 7000 + l * 100 + i, ranges[l].first, ranges[l].second,
                                    pos[i].noncontig));
  s.atol = s.rtol = tol;
  s.fn = [=](const TensorList& in) {
    Lists L = split(in, lists);
    TensorList out;
    for (size_t l = 0; l < lists; ++l)
      if (l != 1)
        for (Tensor& t : L[l]) t = fresh(t);
    _fused_adam_(L[0], L[1], L[2], L[3], h.amsgrad ? L[4] : TensorList{}, step_size, bc2, h.lr, h.beta1, h.beta2, h.eps,
                 h.wd, h.amsgrad, h.maximize, h.decoupled);
    for (size_t l = 0; l < lists; ++l)
      if (l != 1) out.insert(out.end(), L[l].begin(), L[l].end());
    return out;
  };
  s.reference = [=](const TensorList& in) {
    Lists L = split(in, lists);
    std::vector<TensorList> outs(lists);
    for (size_t i = 0; i < L[0].size(); ++i) {
      Ref p = Ref::of(L[0][i]), g = Ref::of(L[1][i]), m = Ref::of(L[2][i]), v = Ref::of(L[3][i]);
      Ref vmax = h.amsgrad ? Ref::of(L[4][i]) : v;
      for (int64_t e = 0; e < p.numel(); ++e) {
        double& pe = p.v[e];
        double ge = h.maximize ? -g.v[e] : g.v[e];
        if (h.wd != 0) {
          if (h.decoupled)
            pe *= 1 - h.lr * h.wd;
          else
            ge += h.wd * pe;
        }
        m.v[e] += (1 - h.beta1) * (ge - m.v[e]);
        v.v[e] = h.beta2 * v.v[e] + (1 - h.beta2) * ge * ge;
        double d = v.v[e];
        if (h.amsgrad) d = vmax.v[e] = std::max(vmax.v[e], v.v[e]);
        pe -= step_size[i] * m.v[e] / (std::sqrt(d) / bc2[i] + h.eps);
      }
      const DType t = L[0][i].dtype();
      outs[0].push_back(p.to(t));
      outs[2].push_back(m.to(t));
      outs[3].push_back(v.to(t));
      if (h.amsgrad) outs[4].push_back(vmax.to(t));
    }
    TensorList out;
    for (size_t l = 0; l < lists; ++l) out.insert(out.end(), outs[l].begin(), outs[l].end());
    return out;
  };
  return s;
}

std::vector<OpSample> samples_fused_adam_() {
  // Large tensors cross the parallel ranges (CPU) and the 64K-element chunks (CUDA); odd sizes leave tails.
  const std::vector<Pos> f32 = {{{70001}, kFloat32},    {{3}, kFloat32}, {{0}, kFloat32},
                                {{130, 261}, kFloat32}, {{}, kFloat32},  {{4, 4}, kFloat32}};
  const std::vector<Pos> f64 = {{{8000}, kFloat64}, {{0, 2}, kFloat64}, {{5}, kFloat64}, {{3, 7}, kFloat64}};
  std::vector<OpSample> out;
  out.push_back(adam_sample("float32 Adam", f32, {0.01, 0.9, 0.999, 1e-8, 0, false, false, false}));
  out.push_back(adam_sample("float32 AdamW", f32, {0.01, 0.9, 0.999, 1e-8, 0.1, false, false, true}));
  out.push_back(
      adam_sample("float32 Adam amsgrad maximize weight_decay", f32, {0.003, 0.8, 0.99, 1e-6, 0.2, true, true, false}));
  out.push_back(adam_sample("float64 AdamW amsgrad", f64, {0.01, 0.9, 0.999, 1e-8, 0.05, true, false, true}));
  // Half/BFloat16 round only what they store (Note [Fused Adam]): looser than the decomposition's op-by-op rounding.
  out.push_back(adam_sample("mixed dtypes, strided AdamW amsgrad", kMixed,
                            {0.01, 0.9, 0.999, 1e-8, 0.1, true, false, true}, 2e-2));
  return out;
}
std::vector<ErrorSample> errors_fused_adam_() {
  const TensorList one{zeros({2})};
  return {err(
              "list lengths",
              [one] {
                _fused_adam_(one, one, one, {zeros({2}), zeros({2})}, {}, {0.1}, {1.0}, 0.1, 0.9, 0.999, 1e-8, 0, false,
                             false, false);
              },
              "got 1 (params) and 2 (exp_avg_sqs)"),
          err(
              "max_exp_avg_sqs without amsgrad",
              [one] {
                _fused_adam_(one, one, {zeros({2})}, {zeros({2})}, {zeros({2})}, {0.1}, {1.0}, 0.1, 0.9, 0.999, 1e-8, 0,
                             false, false, false);
              },
              "max_exp_avg_sqs must be empty without amsgrad"),
          err(
              "step sizes",
              [] {
                _fused_adam_({zeros({2})}, {zeros({2})}, {zeros({2})}, {zeros({2})}, {}, {0.1, 0.2}, {1.0}, 0.1, 0.9,
                             0.999, 1e-8, 0, false, false, false);
              },
              "expected one step size per tensor (1), got 2"),
          err(
              "shape mismatch",
              [] {
                _fused_adam_({zeros({2})}, {zeros({2})}, {zeros({3})}, {zeros({2})}, {}, {0.1}, {1.0}, 0.1, 0.9, 0.999,
                             1e-8, 0, false, false, false);
              },
              "expected exp_avgs[0] to have the shape of params[0], [2], but got [3]")};
}

KILN_OP_SAMPLES(_foreach_neg, samples_neg, errors_neg);
KILN_OP_SAMPLES(_foreach_sqrt, samples_sqrt, errors_sqrt);
KILN_OP_SAMPLES(_foreach_add, samples_add, errors_add);
KILN_OP_SAMPLES(_foreach_addcmul, samples_addcmul, errors_addcmul);
KILN_OP_SAMPLES(_foreach_add_, samples_add_, errors_add_);
KILN_OP_SAMPLES(_foreach_add_scalar_, samples_add_scalar_, errors_scalar_);
KILN_OP_SAMPLES(_foreach_mul_scalar_, samples_mul_scalar_, errors_scalar_);
KILN_OP_SAMPLES(_foreach_div_scalar_, samples_div_scalar_, errors_scalar_);
KILN_OP_SAMPLES(_foreach_addcmul_, addc_samples_<false>, errors_addc_);
KILN_OP_SAMPLES(_foreach_addcdiv_, addc_samples_<true>, errors_addc_);
KILN_OP_SAMPLES(_foreach_lerp_, samples_lerp_, errors_lerp_);
KILN_OP_SAMPLES(_foreach_maximum_, samples_maximum_, errors_maximum_);
KILN_OP_SAMPLES(_fused_adam_, samples_fused_adam_, errors_fused_adam_);

}  // namespace
}  // namespace kiln::test
