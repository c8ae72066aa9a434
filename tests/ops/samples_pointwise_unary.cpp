// Samples for the unary pointwise ops: every dtype, non-contiguous, empty, 0-d
// and special values, against float64 references from <cmath>.
#include <cmath>
#include <limits>
#include <map>

#include "dispatch/dispatch.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

enum class Kind {
  Float,      // float math: integral/bool inputs give float32
  FloatOnly,  // floating inputs only (gelu, silu)
  Same,       // keeps the dtype, integers included (neg, floor, ...)
  BoolOut,    // isnan, logical_not, ...
};

struct UnarySpec {
  std::function<Tensor(const Tensor&)> fn;
  std::function<double(double)> ref;
  double lo, hi;
  Kind kind;
  bool bool_ok = true;      // accepts bool input
  bool unsigned_ok = true;  // uint8 input stays in range
};

double sinc_ref(double x) { return x == 0 ? 1.0 : std::sin(M_PI * x) / (M_PI * x); }
double sign_ref(double x) { return std::isnan(x) ? 0.0 : double((0 < x) - (x < 0)); }
double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double gelu_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
// erfinv by bisection on erf (independent of kiln's series + Halley iteration).
double erfinv_ref(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return kNan;
  if (y == 1) return kInf;
  if (y == -1) return -kInf;
  double lo = -7, hi = 7;
  for (int i = 0; i < 200; ++i) {
    double mid = 0.5 * (lo + hi);
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

const std::map<OpId, UnarySpec>& specs() {
  static const std::map<OpId, UnarySpec> m = {
      {OpId::neg, {[](const Tensor& x) { return kiln::neg(x); }, [](double x) { return -x; }, -3, 3, Kind::Same, false, false}},
      {OpId::abs, {[](const Tensor& x) { return kiln::abs(x); }, [](double x) { return std::abs(x); }, -3, 3, Kind::Same}},
      {OpId::sign, {[](const Tensor& x) { return kiln::sign(x); }, sign_ref, -3, 3, Kind::Same}},
      {OpId::exp, {[](const Tensor& x) { return kiln::exp(x); }, [](double x) { return std::exp(x); }, -3, 3, Kind::Float}},
      {OpId::exp2, {[](const Tensor& x) { return kiln::exp2(x); }, [](double x) { return std::exp2(x); }, -3, 3, Kind::Float}},
      {OpId::log, {[](const Tensor& x) { return kiln::log(x); }, [](double x) { return std::log(x); }, 0.1, 4, Kind::Float}},
      {OpId::log2, {[](const Tensor& x) { return kiln::log2(x); }, [](double x) { return std::log2(x); }, 0.1, 4, Kind::Float}},
      {OpId::log10, {[](const Tensor& x) { return kiln::log10(x); }, [](double x) { return std::log10(x); }, 0.1, 4, Kind::Float}},
      {OpId::log1p, {[](const Tensor& x) { return kiln::log1p(x); }, [](double x) { return std::log1p(x); }, -0.5, 3, Kind::Float}},
      {OpId::expm1, {[](const Tensor& x) { return kiln::expm1(x); }, [](double x) { return std::expm1(x); }, -2, 2, Kind::Float}},
      {OpId::sqrt, {[](const Tensor& x) { return kiln::sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.1, 4, Kind::Float}},
      {OpId::rsqrt, {[](const Tensor& x) { return kiln::rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.2, 4, Kind::Float}},
      {OpId::reciprocal, {[](const Tensor& x) { return kiln::reciprocal(x); }, [](double x) { return 1 / x; }, 0.3, 3, Kind::Float}},
      {OpId::square, {[](const Tensor& x) { return kiln::square(x); }, [](double x) { return x * x; }, -3, 3, Kind::Same, true, false}},
      {OpId::sin, {[](const Tensor& x) { return kiln::sin(x); }, [](double x) { return std::sin(x); }, -3, 3, Kind::Float}},
      {OpId::cos, {[](const Tensor& x) { return kiln::cos(x); }, [](double x) { return std::cos(x); }, -3, 3, Kind::Float}},
      {OpId::tan, {[](const Tensor& x) { return kiln::tan(x); }, [](double x) { return std::tan(x); }, -1.2, 1.2, Kind::Float}},
      {OpId::tanh, {[](const Tensor& x) { return kiln::tanh(x); }, [](double x) { return std::tanh(x); }, -3, 3, Kind::Float}},
      {OpId::sigmoid, {[](const Tensor& x) { return kiln::sigmoid(x); }, sigmoid_ref, -4, 4, Kind::Float}},
      {OpId::relu, {[](const Tensor& x) { return kiln::relu(x); }, [](double x) { return x < 0 ? 0.0 : x; }, -3, 3, Kind::Same, false}},
      {OpId::gelu, {[](const Tensor& x) { return kiln::gelu(x); }, gelu_ref, -3, 3, Kind::FloatOnly}},
      {OpId::silu, {[](const Tensor& x) { return kiln::silu(x); }, [](double x) { return x * sigmoid_ref(x); }, -4, 4, Kind::FloatOnly}},
      {OpId::erf, {[](const Tensor& x) { return kiln::erf(x); }, [](double x) { return std::erf(x); }, -2.5, 2.5, Kind::Float}},
      {OpId::erfinv, {[](const Tensor& x) { return kiln::erfinv(x); }, erfinv_ref, -0.95, 0.95, Kind::Float}},
      {OpId::erfc, {[](const Tensor& x) { return kiln::erfc(x); }, [](double x) { return std::erfc(x); }, -2.5, 2.5, Kind::Float}},
      {OpId::asin, {[](const Tensor& x) { return kiln::asin(x); }, [](double x) { return std::asin(x); }, -0.95, 0.95, Kind::Float}},
      {OpId::acos, {[](const Tensor& x) { return kiln::acos(x); }, [](double x) { return std::acos(x); }, -0.95, 0.95, Kind::Float}},
      {OpId::atan, {[](const Tensor& x) { return kiln::atan(x); }, [](double x) { return std::atan(x); }, -3, 3, Kind::Float}},
      {OpId::sinh, {[](const Tensor& x) { return kiln::sinh(x); }, [](double x) { return std::sinh(x); }, -3, 3, Kind::Float}},
      {OpId::cosh, {[](const Tensor& x) { return kiln::cosh(x); }, [](double x) { return std::cosh(x); }, -3, 3, Kind::Float}},
      {OpId::asinh, {[](const Tensor& x) { return kiln::asinh(x); }, [](double x) { return std::asinh(x); }, -3, 3, Kind::Float}},
      {OpId::acosh, {[](const Tensor& x) { return kiln::acosh(x); }, [](double x) { return std::acosh(x); }, 1.1, 4, Kind::Float}},
      {OpId::atanh, {[](const Tensor& x) { return kiln::atanh(x); }, [](double x) { return std::atanh(x); }, -0.9, 0.9, Kind::Float}},
      {OpId::frac, {[](const Tensor& x) { return kiln::frac(x); }, [](double x) { return x - std::trunc(x); }, -3, 3, Kind::FloatOnly}},
      {OpId::logit, {[](const Tensor& x) { return kiln::logit(x); }, [](double x) { return std::log(x / (1 - x)); }, 0.05, 0.95, Kind::Float}},
      {OpId::floor, {[](const Tensor& x) { return kiln::floor(x); }, [](double x) { return std::floor(x); }, -3, 3, Kind::Same}},
      {OpId::ceil, {[](const Tensor& x) { return kiln::ceil(x); }, [](double x) { return std::ceil(x); }, -3, 3, Kind::Same}},
      {OpId::round, {[](const Tensor& x) { return kiln::round(x); }, [](double x) { return std::nearbyint(x); }, -3, 3, Kind::Same}},
      {OpId::trunc, {[](const Tensor& x) { return kiln::trunc(x); }, [](double x) { return std::trunc(x); }, -3, 3, Kind::Same}},
      {OpId::isnan, {[](const Tensor& x) { return kiln::isnan(x); }, [](double x) { return double(std::isnan(x)); }, -3, 3, Kind::BoolOut}},
      {OpId::isinf, {[](const Tensor& x) { return kiln::isinf(x); }, [](double x) { return double(std::isinf(x)); }, -3, 3, Kind::BoolOut}},
      {OpId::isfinite, {[](const Tensor& x) { return kiln::isfinite(x); }, [](double x) { return double(std::isfinite(x)); }, -3, 3, Kind::BoolOut}},
      {OpId::logical_not, {[](const Tensor& x) { return kiln::logical_not(x); }, [](double x) { return double(x == 0); }, -2, 2, Kind::BoolOut}},
      {OpId::nan_to_num, {[](const Tensor& x) { return kiln::nan_to_num(x); }, [](double x) { return x; }, -3, 3, Kind::Same}},
      {OpId::clone, {[](const Tensor& x) { return kiln::clone(x); }, [](double x) { return x; }, -3, 3, Kind::Same}},
      {OpId::sinc, {[](const Tensor& x) { return kiln::sinc(x); }, sinc_ref, -3, 3, Kind::Float}},
      {OpId::isneginf, {[](const Tensor& x) { return kiln::isneginf(x); }, [](double x) { return double(x == -kInf); }, -3, 3, Kind::BoolOut}},
      {OpId::isposinf, {[](const Tensor& x) { return kiln::isposinf(x); }, [](double x) { return double(x == kInf); }, -3, 3, Kind::BoolOut}},
      {OpId::signbit, {[](const Tensor& x) { return kiln::signbit(x); }, [](double x) { return double(std::signbit(x)); }, -3, 3, Kind::BoolOut}},
  };
  return m;
}

DType out_dtype(Kind k, DType in) {
  switch (k) {
    case Kind::Float: return is_floating_point(in) ? in : kFloat32;
    case Kind::BoolOut: return DType::Bool;
    default: return in;
  }
}

OpSample unary_sample(const UnarySpec& s, std::string name, Tensor x, DType out, bool grad = true) {
  OpSample o;
  o.name = std::move(name);
  o.inputs = {x};
  auto fn = s.fn;
  auto ref = s.ref;
  o.fn = [fn](const TensorList& in) { return TensorList{fn(in[0])}; };
  o.reference = [ref, out](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), ref).to(out)}; };
  o.check_grad = grad;
  return o;
}

std::vector<OpSample> unary_samples_for(OpId op, const UnarySpec& s) {
  std::vector<OpSample> v;
  const std::vector<DType> floats{kFloat32, kFloat64, DType::Float16, DType::BFloat16};
  uint64_t seed = static_cast<uint64_t>(op) * 100;
  for (DType t : floats)
    v.push_back(unary_sample(s, std::string(dtype_name(t)) + " [3,4]", make_input({3, 4}, t, ++seed, s.lo, s.hi), out_dtype(s.kind, t),
                             t == kFloat32));
  v.push_back(unary_sample(s, "noncontig float32 [4,3]", make_input({4, 3}, kFloat32, ++seed, s.lo, s.hi, true),
                           out_dtype(s.kind, kFloat32)));
  v.push_back(unary_sample(s, "noncontig float64 [2,3,4]", make_input({2, 3, 4}, kFloat64, ++seed, s.lo, s.hi, true),
                           out_dtype(s.kind, kFloat64), false));
  v.push_back(unary_sample(s, "empty float32 [0,3]", make_input({0, 3}, kFloat32, ++seed, s.lo, s.hi), out_dtype(s.kind, kFloat32)));
  v.push_back(unary_sample(s, "0-d float64", make_input({}, kFloat64, ++seed, s.lo, s.hi), out_dtype(s.kind, kFloat64)));
  v.push_back(unary_sample(s, "large float32 [70000]", make_input({70000}, kFloat32, ++seed, s.lo, s.hi),
                           out_dtype(s.kind, kFloat32), false));
  if (s.kind != Kind::FloatOnly) {
    std::vector<DType> ints{kInt64, kInt32, DType::Int16, DType::Int8};
    if (s.unsigned_ok) ints.push_back(DType::UInt8);
    for (DType t : ints) {
      double lo = t == DType::UInt8 ? std::max(0.0, s.lo) : s.lo;
      v.push_back(unary_sample(s, std::string(dtype_name(t)) + " [5]", make_input({5}, t, ++seed, lo, s.hi),
                               out_dtype(s.kind, t)));
    }
    if (s.bool_ok) {
      DType o = s.kind == Kind::Float ? kFloat32 : s.kind == Kind::BoolOut ? DType::Bool : DType::Bool;
      if (op == OpId::square) o = kInt64;
      v.push_back(unary_sample(s, "bool [6]", make_input({6}, DType::Bool, ++seed), o));
    }
  }
  // NaN, infinities and signed zeros, where the function is defined there.
  if (s.kind != Kind::BoolOut || true) {
    Tensor sp = kiln::tensor<double>({kNan, kInf, -kInf, 0.0, -0.0, 1.0}, {6}, kFloat64);
    if (op != OpId::nan_to_num) {
      v.push_back(unary_sample(s, "special values float64", sp, out_dtype(s.kind, kFloat64), false));
      v.push_back(unary_sample(s, "special values float32", sp.to(kFloat32), out_dtype(s.kind, kFloat32), false));
    }
  }
  return v;
}

std::vector<OpSample> unary_samples(OpId op) {
  const UnarySpec& s = specs().at(op);
  std::vector<OpSample> v = unary_samples_for(op, s);
  auto extra = [&](std::string name, TensorList in, OpFn fn, OpFn ref, bool grad = true) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = std::move(in);
    o.fn = std::move(fn);
    o.reference = std::move(ref);
    o.check_grad = grad;
    v.push_back(std::move(o));
  };
  Tensor x = make_input({3, 4}, kFloat32, 7, -3, 3);
  Tensor xd = make_input({3, 4}, kFloat64, 8, -30, 30);
  switch (op) {
    case OpId::gelu:
      extra("approximate tanh float32", {x}, [](const TensorList& in) { return TensorList{kiln::gelu(in[0], "tanh")}; },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), gelu_tanh_ref).to(kFloat32)}; });
      extra("approximate tanh bfloat16", {x.to(DType::BFloat16)},
            [](const TensorList& in) { return TensorList{kiln::gelu(in[0], "tanh")}; },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), gelu_tanh_ref).to(DType::BFloat16)}; },
            false);
      break;
    case OpId::round:
      extra("decimals=2 float64", {xd}, [](const TensorList& in) { return TensorList{kiln::round(in[0], 2)}; },
            [](const TensorList& in) {
              return TensorList{ref_map(Ref::of(in[0]), [](double a) { return std::nearbyint(a * 100) / 100; }).to(kFloat64)};
            });
      extra("decimals=-1 float64", {xd}, [](const TensorList& in) { return TensorList{kiln::round(in[0], -1)}; },
            [](const TensorList& in) {
              return TensorList{ref_map(Ref::of(in[0]), [](double a) { return std::nearbyint(a / 10) * 10; }).to(kFloat64)};
            });
      extra("half to even", {kiln::tensor<double>({0.5, 1.5, 2.5, -0.5, -2.5}, {5}, kFloat32)},
            [](const TensorList& in) { return TensorList{kiln::round(in[0])}; },
            [](const TensorList&) { return TensorList{kiln::tensor<double>({0, 2, 2, -0.0, -2}, {5}, kFloat32)}; }, false);
      break;
    case OpId::nan_to_num: {
      Tensor sp = kiln::tensor<double>({kNan, kInf, -kInf, 0.0, -1.5, 1.0}, {6}, kFloat64);
      extra("defaults float64", {sp}, [](const TensorList& in) { return TensorList{kiln::nan_to_num(in[0])}; },
            [](const TensorList&) {
              double m = std::numeric_limits<double>::max();
              return TensorList{kiln::tensor<double>({0, m, -m, 0, -1.5, 1}, {6}, kFloat64)};
            }, false);
      extra("defaults float16", {sp.to(DType::Float16)}, [](const TensorList& in) { return TensorList{kiln::nan_to_num(in[0])}; },
            [](const TensorList&) {
              return TensorList{kiln::tensor<double>({0, 65504, -65504, 0, -1.5, 1}, {6}, kFloat64).to(DType::Float16)};
            }, false);
      extra("custom values float32", {sp.to(kFloat32)},
            [](const TensorList& in) { return TensorList{kiln::nan_to_num(in[0], 1.0, 2.0, -3.0)}; },
            [](const TensorList&) { return TensorList{kiln::tensor<double>({1, 2, -3, 0, -1.5, 1}, {6}, kFloat32)}; }, false);
      break;
    }
    case OpId::exp:
      extra("exp_ in place", {x}, [](const TensorList& in) {
              Tensor y = in[0].clone();
              y.exp_();
              return TensorList{y};
            },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), [](double a) { return std::exp(a); }).to(kFloat32)}; },
            false);
      break;
    case OpId::sqrt:
      extra("sqrt_ in place", {make_input({3, 4}, kFloat32, 9, 0.1, 4)}, [](const TensorList& in) {
              Tensor y = in[0].clone();
              y.sqrt_();
              return TensorList{y};
            },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), [](double a) { return std::sqrt(a); }).to(kFloat32)}; },
            false);
      break;
    case OpId::relu:
      extra("relu_ in place", {x}, [](const TensorList& in) {
              Tensor y = in[0].clone();
              y.relu_();
              return TensorList{y};
            },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), [](double a) { return a < 0 ? 0.0 : a; }).to(kFloat32)}; },
            false);
      extra("method", {x}, [](const TensorList& in) { return TensorList{in[0].relu()}; },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), [](double a) { return a < 0 ? 0.0 : a; }).to(kFloat32)}; });
      break;
    case OpId::sign:
      extra("sgn", {x}, [](const TensorList& in) { return TensorList{kiln::sgn(in[0])}; },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), sign_ref).to(kFloat32)}; });
      break;
    case OpId::logit: {
      auto ref = [](double eps, DType t) {
        return [eps, t](const TensorList& in) {
          return TensorList{ref_map(Ref::of(in[0]), [eps](double a) {
                              double z = std::isnan(a) ? a : std::min(std::max(a, eps), 1 - eps);
                              return std::log(z / (1 - z));
                            }).to(t)};
        };
      };
      auto fn = [](const TensorList& in) { return TensorList{kiln::logit(in[0], 0.25)}; };
      extra("eps=0.25 clamps float32", {make_input({3, 4}, kFloat32, 9, -0.5, 1.5)}, fn, ref(0.25, kFloat32));
      extra("eps=0.25 clamps float64 noncontig", {make_input({4, 3}, kFloat64, 10, -0.5, 1.5, true)}, fn, ref(0.25, kFloat64));
      extra("eps=0.25 NaN stays", {kiln::tensor<double>({kNan, 0, 1, 2}, {4}, kFloat32)}, fn, ref(0.25, kFloat32), false);
      extra("eps=0.25 int64 gives float32", {make_input({5}, kInt64, 11, -2, 3)}, fn, ref(0.25, kFloat32));
      break;
    }
    case OpId::sinc:  // exactly 0: 1. Not gradchecked: the second derivative there is 0, not -pi^2/3, as torch's
      extra("zeros and integers float64", {kiln::tensor<double>({0.0, -0.0, 1.0, -2.0, 0.5}, {5}, kFloat64)},
            [](const TensorList& in) { return TensorList{kiln::sinc(in[0])}; },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), sinc_ref).to(kFloat64)}; }, false);
      break;
    case OpId::signbit:  // a negative NaN has the sign bit too
      extra("negative NaN and -0.0 float32", {kiln::tensor<double>({-kNan, kNan, -0.0, 0.0}, {4}, kFloat32)},
            [](const TensorList& in) { return TensorList{kiln::signbit(in[0])}; },
            [](const TensorList&) { return TensorList{kiln::tensor<double>({1, 0, 1, 0}, {4}, DType::Bool)}; }, false);
      break;
    case OpId::neg:
      extra("operator-", {x}, [](const TensorList& in) { return TensorList{-in[0]}; },
            [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), [](double a) { return -a; }).to(kFloat32)}; });
      break;
    default: break;
  }
  return v;
}

std::vector<ErrorSample> unary_errors(OpId op) {
  const UnarySpec& s = specs().at(op);
  std::vector<ErrorSample> e;
  e.push_back({"undefined input", [fn = s.fn] { fn(Tensor()); }, op_name(op)});
  if (op == OpId::neg) e.push_back({"bool", [] { kiln::neg(filled(2, 1, DType::Bool)); }, "bool"});
  if (op == OpId::relu) e.push_back({"bool", [] { kiln::relu(filled(2, 1, DType::Bool)); }, "relu: not supported for bool"});
  if (op == OpId::gelu) {
    e.push_back({"bad approximate", [] { kiln::gelu(filled(2, 1, kFloat32), "fast"); }, "gelu: approximate must be"});
    e.push_back({"int64", [] { kiln::gelu(filled(2, 1, kInt64)); }, "gelu: expected a floating point tensor"});
  }
  if (op == OpId::frac) e.push_back({"int64", [] { kiln::frac(filled(2, 1, kInt64)); }, "frac: expected a floating point"});
  if (op == OpId::silu) e.push_back({"int64", [] { kiln::silu(filled(2, 1, kInt64)); }, "silu: expected a floating point"});
  if (op == OpId::round) e.push_back({"decimals on int", [] { kiln::round(filled(2, 1, kInt64), 1); }, "round: decimals"});
  return e;
}

// ---- ops with their own sample lists ----
std::vector<OpSample> bitwise_not_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 500;
  for (DType t : {kInt64, kInt32, DType::Int16, DType::Int8, DType::UInt8, DType::Bool}) {
    for (bool nc : {false, true}) {
      OpSample o;
      o.name = std::string(dtype_name(t)) + (nc ? " noncontig" : "") + " [3,4]";
      o.inputs = {make_input({3, 4}, t, ++seed, t == DType::UInt8 ? 0 : -50, 50, nc)};
      o.fn = [](const TensorList& in) { return TensorList{kiln::bitwise_not(in[0])}; };
      o.reference = [t](const TensorList& in) {
        auto f = [t](double a) {
          if (t == DType::Bool) return a == 0 ? 1.0 : 0.0;
          if (t == DType::UInt8) return 255 - a;
          return -a - 1;  // two's complement
        };
        return TensorList{ref_map(Ref::of(in[0]), f).to(t)};
      };
      v.push_back(o);
    }
  }
  OpSample o;
  o.name = "operator~ empty int32";
  o.inputs = {make_input({0, 2}, kInt32, 1)};
  o.fn = [](const TensorList& in) { return TensorList{~in[0]}; };
  o.reference = [](const TensorList&) { return TensorList{kiln::tensor<double>({}, {0, 2}, kFloat64).to(kInt32)}; };
  v.push_back(o);
  return v;
}
std::vector<ErrorSample> bitwise_not_errors() {
  return {{"float", [] { kiln::bitwise_not(filled(2, 1, kFloat32)); }, "bitwise_not: expected an integral or bool tensor"}};
}

double clamp_ref(double x, double lo, double hi) {
  if (std::isnan(x)) return x;
  return std::min(std::max(x, lo), hi);
}
std::vector<OpSample> clamp_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, TensorList in, OpFn fn, OpFn ref, bool grad = true) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = std::move(in);
    o.fn = std::move(fn);
    o.reference = std::move(ref);
    o.check_grad = grad;
    v.push_back(std::move(o));
  };
  auto ref_clamp = [](double lo, double hi, DType t) {
    return [lo, hi, t](const TensorList& in) {
      return TensorList{ref_map(Ref::of(in[0]), [lo, hi](double x) { return clamp_ref(x, lo, hi); }).to(t)};
    };
  };
  uint64_t seed = 600;
  for (DType t : {kFloat32, kFloat64, DType::Float16, DType::BFloat16, kInt64, kInt32, DType::Int8, DType::UInt8}) {
    double lo = t == DType::UInt8 ? 0 : -3;
    add(std::string(dtype_name(t)) + " min=-1 max=1", {make_input({3, 4}, t, ++seed, lo, 3)},
        [](const TensorList& in) { return TensorList{kiln::clamp(in[0], Scalar(int64_t(-1)), Scalar(int64_t(1)))}; },
        ref_clamp(-1, 1, t), t == kFloat32);
  }
  Tensor x = make_input({3, 4}, kFloat32, 611, -3, 3);
  add("min only", {x}, [](const TensorList& in) { return TensorList{kiln::clamp_min(in[0], 0.5)}; }, ref_clamp(0.5, kInf, kFloat32));
  add("max only", {x}, [](const TensorList& in) { return TensorList{kiln::clamp_max(in[0], 0.5)}; }, ref_clamp(-kInf, 0.5, kFloat32));
  add("min > max gives max", {x}, [](const TensorList& in) { return TensorList{kiln::clamp(in[0], 2.0, 1.0)}; },
      [](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), [](double) { return 1.0; }).to(kFloat32)}; }, false);
  add("int64 with float bound promotes", {make_input({5}, kInt64, 612, -3, 3)},
      [](const TensorList& in) { return TensorList{kiln::clamp(in[0], 0.5, std::nullopt)}; }, ref_clamp(0.5, kInf, kFloat32));
  add("noncontig", {make_input({4, 3}, kFloat64, 613, -3, 3, true)},
      [](const TensorList& in) { return TensorList{in[0].clamp(-1.0, 1.0)}; }, ref_clamp(-1, 1, kFloat64));
  add("empty", {make_input({0, 3}, kFloat32, 614)}, [](const TensorList& in) { return TensorList{kiln::clamp(in[0], -1.0, 1.0)}; },
      ref_clamp(-1, 1, kFloat32));
  add("0-d", {make_input({}, kFloat64, 615, -3, 3)}, [](const TensorList& in) { return TensorList{kiln::clamp(in[0], -1.0, 1.0)}; },
      ref_clamp(-1, 1, kFloat64));
  add("NaN propagates", {kiln::tensor<double>({kNan, 5, -5}, {3}, kFloat32)},
      [](const TensorList& in) { return TensorList{kiln::clamp(in[0], -1.0, 1.0)}; }, ref_clamp(-1, 1, kFloat32), false);
  add(
      "clamp_ in place", {x},
      [](const TensorList& in) {
        Tensor y = in[0].clone();
        y.clamp_(-1.0, 1.0);
        return TensorList{y};
      },
      ref_clamp(-1, 1, kFloat32), false);
  return v;
}
// clamp with tensor bounds is maximum then minimum (no clamp op), so its
// sample is filed under minimum, which makes its output.
std::vector<OpSample> clamp_tensor_bounds_samples() {
  OpSample o;
  o.name = "clamp(x, lo, hi) with tensor bounds, broadcast";
  o.inputs = {make_input({3, 4}, kFloat32, 611, -3, 3), make_input({4}, kFloat32, 616, -2, -0.5),
              make_input({3, 1}, kFloat32, 617, 0.5, 2)};
  o.fn = [](const TensorList& in) { return TensorList{kiln::clamp(in[0], in[1], in[2])}; };
  o.reference = [](const TensorList& in) {
    return TensorList{ref_map3(Ref::of(in[0]), Ref::of(in[1]), Ref::of(in[2]), clamp_ref).to(kFloat32)};
  };
  return {o};
}
std::vector<ErrorSample> clamp_errors() {
  return {{"no bounds", [] { kiln::clamp(filled(2, 1, kFloat32), std::nullopt, std::nullopt); }, "clamp: at least one of"},
          {"bool", [] { kiln::clamp(filled(2, 1, DType::Bool), Scalar(int64_t(0))); }, "clamp: not supported for bool"}};
}

std::vector<OpSample> to_samples() {
  std::vector<OpSample> v;
  struct Case { DType from, to; };
  const Case cases[] = {{kFloat32, kFloat64}, {kFloat64, kFloat32}, {kFloat32, DType::Float16}, {kFloat32, DType::BFloat16},
                        {DType::Float16, kFloat32}, {kFloat32, kInt32}, {kFloat64, kInt64}, {kInt64, kFloat32},
                        {kInt32, DType::Int8}, {kInt64, DType::Bool}, {kFloat32, DType::Bool}, {DType::Bool, kFloat32},
                        {DType::UInt8, kInt64}, {kInt16, kFloat64}};
  uint64_t seed = 700;
  for (const Case& c : cases) {
    for (bool nc : {false, true}) {
      OpSample o;
      o.name = std::string(dtype_name(c.from)) + " -> " + std::string(dtype_name(c.to)) + (nc ? " noncontig" : "");
      o.inputs = {make_input({3, 4}, c.from, ++seed, c.from == DType::UInt8 ? 0 : -20, 20, nc)};
      DType to = c.to;
      o.fn = [to](const TensorList& in) { return TensorList{in[0].to(to)}; };
      o.reference = [to](const TensorList& in) {
        auto f = [to](double a) {
          if (to == DType::Bool) return a != 0 ? 1.0 : 0.0;
          if (!is_floating_point(to)) return std::trunc(a);  // C conversion truncates toward zero
          return a;
        };
        return TensorList{ref_map(Ref::of(in[0]), f).to(to)};
      };
      o.check_grad = c.from == kFloat32 && c.to == kFloat64 && !nc;
      v.push_back(o);
    }
  }
  OpSample o;
  o.name = "empty and 0-d";
  o.inputs = {make_input({0, 3}, kFloat32, 1), make_input({}, kFloat64, 2)};
  o.fn = [](const TensorList& in) { return TensorList{in[0].to(kFloat64), in[1].to(kFloat32)}; };
  o.reference = [](const TensorList& in) { return TensorList{Ref::of(in[0]).to(kFloat64), Ref::of(in[1]).to(kFloat32)}; };
  o.check_grad = false;  // float64 -> float32 is lossy under finite differences
  v.push_back(o);
  // The same dtype returns the input itself (no op); copy = true runs the op.
  OpSample same;
  same.name = "same dtype: aliases, or copies with copy=true";
  same.inputs = {make_input({3}, kFloat32, 3)};
  same.fn = [](const TensorList& in) { return TensorList{in[0].to(kFloat32), in[0].to(kFloat32, true)}; };
  same.reference = [](const TensorList& in) {
    return TensorList{Ref::of(in[0]).to(kFloat32), Ref::of(in[0]).to(kFloat32)};
  };
  same.check = [x = same.inputs[0]](const TensorList& o) {
    EXPECT_TRUE(o[0].is_same(x)) << "the same dtype returns the input";
    EXPECT_FALSE(o[1].is_alias_of(x)) << "copy=true must copy";
  };
  same.check_grad = false;
  v.push_back(same);
  return v;
}

#define KILN_UNARY_SAMPLES(op)                                                               \
  std::vector<OpSample> samples_##op() { return unary_samples(OpId::op); }                  \
  std::vector<ErrorSample> errors_##op() { return unary_errors(OpId::op); }                 \
  KILN_OP_SAMPLES(op, samples_##op, errors_##op);

KILN_UNARY_SAMPLES(neg)
KILN_UNARY_SAMPLES(abs)
KILN_UNARY_SAMPLES(sign)
KILN_UNARY_SAMPLES(exp)
KILN_UNARY_SAMPLES(exp2)
KILN_UNARY_SAMPLES(log)
KILN_UNARY_SAMPLES(log2)
KILN_UNARY_SAMPLES(log10)
KILN_UNARY_SAMPLES(log1p)
KILN_UNARY_SAMPLES(expm1)
KILN_UNARY_SAMPLES(sqrt)
KILN_UNARY_SAMPLES(rsqrt)
KILN_UNARY_SAMPLES(reciprocal)
KILN_UNARY_SAMPLES(square)
KILN_UNARY_SAMPLES(sin)
KILN_UNARY_SAMPLES(cos)
KILN_UNARY_SAMPLES(tan)
KILN_UNARY_SAMPLES(tanh)
KILN_UNARY_SAMPLES(sigmoid)
KILN_UNARY_SAMPLES(relu)
KILN_UNARY_SAMPLES(gelu)
KILN_UNARY_SAMPLES(silu)
KILN_UNARY_SAMPLES(erf)
KILN_UNARY_SAMPLES(erfinv)
KILN_UNARY_SAMPLES(erfc)
KILN_UNARY_SAMPLES(asin)
KILN_UNARY_SAMPLES(acos)
KILN_UNARY_SAMPLES(atan)
KILN_UNARY_SAMPLES(sinh)
KILN_UNARY_SAMPLES(cosh)
KILN_UNARY_SAMPLES(asinh)
KILN_UNARY_SAMPLES(acosh)
KILN_UNARY_SAMPLES(atanh)
KILN_UNARY_SAMPLES(frac)
KILN_UNARY_SAMPLES(logit)
KILN_UNARY_SAMPLES(floor)
KILN_UNARY_SAMPLES(ceil)
KILN_UNARY_SAMPLES(round)
KILN_UNARY_SAMPLES(trunc)
KILN_UNARY_SAMPLES(isnan)
KILN_UNARY_SAMPLES(isinf)
KILN_UNARY_SAMPLES(sinc)
KILN_UNARY_SAMPLES(isneginf)
KILN_UNARY_SAMPLES(isposinf)
KILN_UNARY_SAMPLES(signbit)
KILN_UNARY_SAMPLES(isfinite)
KILN_UNARY_SAMPLES(logical_not)
KILN_UNARY_SAMPLES(nan_to_num)
KILN_UNARY_SAMPLES(clone)
KILN_OP_SAMPLES(bitwise_not, bitwise_not_samples, bitwise_not_errors);
KILN_OP_SAMPLES(clamp, clamp_samples, clamp_errors);
KILN_OP_SAMPLES(minimum, clamp_tensor_bounds_samples, nullptr);
KILN_OP_SAMPLES(to, to_samples, nullptr);

// _to_copy (Note [Device moves]): the samples stay on the inputs' device (the CUDA op test moves
// them there, so there it is a device-to-device copy; tests/cuda covers host <-> device), with and
// without a dtype change, strided and empty inputs. Always a new tensor, contiguous.
std::vector<OpSample> to_copy_samples() {
  std::vector<OpSample> v;
  struct Case { DType from, to; bool nc; };
  const Case cases[] = {{kFloat32, kFloat32, false}, {kFloat32, kFloat32, true}, {kFloat32, kFloat64, false},
                        {kFloat64, kFloat32, true},  {kInt64, kFloat32, false},  {kFloat32, kInt32, true},
                        {DType::Bool, kFloat32, false}, {kFloat32, DType::BFloat16, false}};
  uint64_t seed = 900;
  for (const Case& c : cases) {
    OpSample o;
    o.name = std::string(dtype_name(c.from)) + " -> " + std::string(dtype_name(c.to)) + (c.nc ? " noncontig" : "");
    o.inputs = {make_input({3, 4}, c.from, ++seed, -20, 20, c.nc)};
    DType to = c.to;
    o.fn = [to](const TensorList& in) { return TensorList{call_op1(OpId::_to_copy, {in[0]}, {to, in[0].device()})}; };
    o.reference = [to](const TensorList& in) {
      auto f = [to](double a) {
        if (to == DType::Bool) return a != 0 ? 1.0 : 0.0;
        if (!is_floating_point(to)) return std::trunc(a);
        return a;
      };
      return TensorList{ref_map(Ref::of(in[0]), f).to(to)};
    };
    o.check = [x = o.inputs[0]](const TensorList& out) {
      EXPECT_FALSE(out[0].is_alias_of(x)) << "_to_copy must copy";
      EXPECT_TRUE(out[0].is_contiguous());
    };
    o.check_grad = c.from == kFloat32 && c.to == kFloat64;  // gradcheck runs in float64: only a widening keeps it
    v.push_back(o);
  }
  OpSample e;
  e.name = "empty and 0-d";
  e.inputs = {make_input({0, 3}, kFloat32, 1), make_input({}, kFloat64, 2)};
  e.fn = [](const TensorList& in) {
    return TensorList{call_op1(OpId::_to_copy, {in[0]}, {kFloat64, in[0].device()}),
                      call_op1(OpId::_to_copy, {in[1]}, {kFloat64, in[1].device()})};
  };
  e.reference = [](const TensorList& in) { return TensorList{Ref::of(in[0]).to(kFloat64), Ref::of(in[1]).to(kFloat64)}; };
  v.push_back(e);
  return v;
}
KILN_OP_SAMPLES(_to_copy, to_copy_samples, nullptr);

// Gradients where torch defines them specially: logit's outside [0, 1] (NaN) or, with eps,
// outside [eps, 1 - eps] (0).
TEST(Logit, GradientOutsideTheDomain) {
  Tensor x = kiln::tensor<double>({1.5, 0.5, -0.5, 0.1}, {4}, kFloat64).requires_grad_();
  kiln::logit(x).sum().backward();
  auto g = x.grad().to_vector<double>();
  EXPECT_TRUE(std::isnan(g[0]) && std::isnan(g[2]));
  EXPECT_DOUBLE_EQ(g[1], 4.0);
  Tensor y = kiln::tensor<double>({1.5, 0.5, 0.1}, {3}, kFloat64).requires_grad_();
  kiln::logit(y, 0.25).sum().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{0, 4, 0}));
}

}  // namespace
}  // namespace kiln::test
