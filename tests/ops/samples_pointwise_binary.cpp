// Samples for the binary and ternary pointwise ops: broadcasting, type
// promotion, every dtype, non-contiguous, empty, 0-d and Scalar operands,
// against float64 references.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/half.h"
#include "tests/ops/op_samples.h"

namespace kiln::test {
namespace {

enum class Kind {
  Same,       // result_type of the inputs (add, mul, maximum, ...)
  Float,      // int → float32 (atan2, true div)
  BoolOut,    // comparisons, logical ops
  IntOrBool,  // bitwise and/or/xor
  Int,        // shifts
  FloatOnly,  // promoted dtype must be floating (logaddexp)
};

using Fn2 = std::function<Tensor(const Tensor&, const Tensor&)>;
struct BinarySpec {
  Fn2 fn;
  std::function<double(double, double)> ref;
  double alo, ahi, blo, bhi;
  Kind kind;
  bool bool_ok = true;
  bool unsigned_ok = true;
  std::function<Tensor(const Tensor&, const Scalar&)> fn_scalar = nullptr;  // the Tensor-Scalar overload
};

double py_floor_div(double a, double b) { return std::floor(a / b); }
double py_mod(double a, double b) {
  double m = std::fmod(a, b);
  return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m;
}
double max_ref(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNan : std::max(a, b); }
double min_ref(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNan : std::min(a, b); }
double fmax_ref(double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : std::max(a, b); }
double fmin_ref(double a, double b) { return std::isnan(a) ? b : std::isnan(b) ? a : std::min(a, b); }
double xlogy_ref(double a, double b) { return std::isnan(b) ? kNan : a == 0 ? 0.0 : a * std::log(b); }
double logaddexp_ref(double a, double b) {
  if (std::isinf(a) && a == b) return a;
  return max_ref(a, b) + std::log1p(std::exp(-std::abs(a - b)));
}
double logaddexp2_ref(double a, double b) {
  if (std::isinf(a) && a == b) return a;
  return max_ref(a, b) + std::log1p(std::exp2(-std::abs(a - b))) / std::log(2.0);
}
double bits(double a, double b, int op) {
  auto x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
  return static_cast<double>(op == 0 ? (x & y) : op == 1 ? (x | y) : (x ^ y));
}

const std::map<OpId, BinarySpec>& specs() {
  static const std::map<OpId, BinarySpec> m = {
      {OpId::add, {[](const Tensor& a, const Tensor& b) { return kiln::add(a, b); }, [](double a, double b) { return a + b; },
                   -5, 5, -5, 5, Kind::Same, true, true, [](const Tensor& a, const Scalar& b) { return kiln::add(a, b); }}},
      {OpId::sub, {[](const Tensor& a, const Tensor& b) { return kiln::sub(a, b); }, [](double a, double b) { return a - b; },
                   -5, 5, -5, 5, Kind::Same, false, false, [](const Tensor& a, const Scalar& b) { return kiln::sub(a, b); }}},
      {OpId::mul, {[](const Tensor& a, const Tensor& b) { return kiln::mul(a, b); }, [](double a, double b) { return a * b; },
                   -5, 5, -5, 5, Kind::Same, true, true, [](const Tensor& a, const Scalar& b) { return kiln::mul(a, b); }}},
      {OpId::div, {[](const Tensor& a, const Tensor& b) { return kiln::div(a, b); }, [](double a, double b) { return a / b; },
                   -5, 5, 0.5, 4, Kind::Float, true, true, [](const Tensor& a, const Scalar& b) { return kiln::div(a, b); }}},
      {OpId::fmod, {[](const Tensor& a, const Tensor& b) { return kiln::fmod(a, b); }, [](double a, double b) { return std::fmod(a, b); },
                    -7, 7, 1, 4, Kind::Same, false, true, [](const Tensor& a, const Scalar& b) { return kiln::fmod(a, b); }}},
      {OpId::remainder, {[](const Tensor& a, const Tensor& b) { return kiln::remainder(a, b); }, py_mod,
                         -7, 7, 1, 4, Kind::Same, false, true, [](const Tensor& a, const Scalar& b) { return kiln::remainder(a, b); }}},
      {OpId::pow, {[](const Tensor& a, const Tensor& b) { return kiln::pow(a, b); }, [](double a, double b) { return std::pow(a, b); },
                   0.5, 3, 0, 3, Kind::Same, false, true, [](const Tensor& a, const Scalar& b) { return kiln::pow(a, b); }}},
      {OpId::maximum, {[](const Tensor& a, const Tensor& b) { return kiln::maximum(a, b); }, max_ref, -5, 5, -5, 5, Kind::Same}},
      {OpId::minimum, {[](const Tensor& a, const Tensor& b) { return kiln::minimum(a, b); }, min_ref, -5, 5, -5, 5, Kind::Same}},
      {OpId::atan2, {[](const Tensor& a, const Tensor& b) { return kiln::atan2(a, b); }, [](double a, double b) { return std::atan2(a, b); },
                     -3, 3, -3, 3, Kind::Float}},
      {OpId::hypot, {[](const Tensor& a, const Tensor& b) { return kiln::hypot(a, b); }, [](double a, double b) { return std::hypot(a, b); },
                     -3, 3, 0.5, 3, Kind::Float}},
      {OpId::xlogy, {[](const Tensor& a, const Tensor& b) { return kiln::xlogy(a, b); }, xlogy_ref, -3, 3, 0.5, 3, Kind::Float,
                     true, true, [](const Tensor& a, const Scalar& b) { return kiln::xlogy(a, b); }}},
      {OpId::fmax, {[](const Tensor& a, const Tensor& b) { return kiln::fmax(a, b); }, fmax_ref, -5, 5, -5, 5, Kind::Same}},
      {OpId::fmin, {[](const Tensor& a, const Tensor& b) { return kiln::fmin(a, b); }, fmin_ref, -5, 5, -5, 5, Kind::Same}},
      {OpId::copysign, {[](const Tensor& a, const Tensor& b) { return kiln::copysign(a, b); },
                        [](double a, double b) { return std::copysign(a, b); }, -3, 3, -3, 3, Kind::Float, true, true,
                        [](const Tensor& a, const Scalar& b) { return kiln::copysign(a, b); }}},
      {OpId::logaddexp, {[](const Tensor& a, const Tensor& b) { return kiln::logaddexp(a, b); }, logaddexp_ref,
                         -5, 5, -5, 5, Kind::FloatOnly}},
      {OpId::logaddexp2, {[](const Tensor& a, const Tensor& b) { return kiln::logaddexp2(a, b); }, logaddexp2_ref,
                          -5, 5, -5, 5, Kind::FloatOnly}},
      {OpId::eq, {[](const Tensor& a, const Tensor& b) { return kiln::eq(a, b); }, [](double a, double b) { return double(a == b); },
                  -2, 2, -2, 2, Kind::BoolOut, true, true, [](const Tensor& a, const Scalar& b) { return kiln::eq(a, b); }}},
      {OpId::ne, {[](const Tensor& a, const Tensor& b) { return a != b; }, [](double a, double b) { return double(a != b); },
                  -2, 2, -2, 2, Kind::BoolOut, true, true, [](const Tensor& a, const Scalar& b) { return a != b; }}},
      {OpId::lt, {[](const Tensor& a, const Tensor& b) { return a < b; }, [](double a, double b) { return double(a < b); },
                  -2, 2, -2, 2, Kind::BoolOut, true, true, [](const Tensor& a, const Scalar& b) { return a.lt(b); }}},
      {OpId::le, {[](const Tensor& a, const Tensor& b) { return a <= b; }, [](double a, double b) { return double(a <= b); },
                  -2, 2, -2, 2, Kind::BoolOut, true, true, [](const Tensor& a, const Scalar& b) { return a <= b; }}},
      {OpId::gt, {[](const Tensor& a, const Tensor& b) { return a.gt(b); }, [](double a, double b) { return double(a > b); },
                  -2, 2, -2, 2, Kind::BoolOut, true, true, [](const Tensor& a, const Scalar& b) { return a > b; }}},
      {OpId::ge, {[](const Tensor& a, const Tensor& b) { return a >= b; }, [](double a, double b) { return double(a >= b); },
                  -2, 2, -2, 2, Kind::BoolOut, true, true, [](const Tensor& a, const Scalar& b) { return kiln::ge(a, b); }}},
      {OpId::logical_and, {[](const Tensor& a, const Tensor& b) { return kiln::logical_and(a, b); },
                           [](double a, double b) { return double(a != 0 && b != 0); }, -1, 1, -1, 1, Kind::BoolOut}},
      {OpId::logical_or, {[](const Tensor& a, const Tensor& b) { return kiln::logical_or(a, b); },
                          [](double a, double b) { return double(a != 0 || b != 0); }, -1, 1, -1, 1, Kind::BoolOut}},
      {OpId::logical_xor, {[](const Tensor& a, const Tensor& b) { return kiln::logical_xor(a, b); },
                           [](double a, double b) { return double((a != 0) != (b != 0)); }, -1, 1, -1, 1, Kind::BoolOut}},
      {OpId::bitwise_and, {[](const Tensor& a, const Tensor& b) { return a & b; }, [](double a, double b) { return bits(a, b, 0); },
                           -60, 60, -60, 60, Kind::IntOrBool}},
      {OpId::bitwise_or, {[](const Tensor& a, const Tensor& b) { return a | b; }, [](double a, double b) { return bits(a, b, 1); },
                          -60, 60, -60, 60, Kind::IntOrBool}},
      {OpId::bitwise_xor, {[](const Tensor& a, const Tensor& b) { return a ^ b; }, [](double a, double b) { return bits(a, b, 2); },
                           -60, 60, -60, 60, Kind::IntOrBool}},
      {OpId::bitwise_left_shift, {[](const Tensor& a, const Tensor& b) { return kiln::bitwise_left_shift(a, b); },
                                  [](double a, double b) { return a * std::exp2(b); }, -7, 7, 0, 3, Kind::Int, false}},
      {OpId::bitwise_right_shift, {[](const Tensor& a, const Tensor& b) { return kiln::bitwise_right_shift(a, b); },
                                   [](double a, double b) { return std::floor(a / std::exp2(b)); }, -100, 100, 0, 5, Kind::Int, false}},
  };
  return m;
}

DType out_dtype(Kind k, DType promoted) {
  switch (k) {
    case Kind::Float: return is_floating_point(promoted) ? promoted : kFloat32;
    case Kind::BoolOut: return DType::Bool;
    default: return promoted;
  }
}

OpSample make2(const BinarySpec& s, std::string name, Tensor a, Tensor b, DType out, bool grad) {
  OpSample o;
  o.name = std::move(name);
  o.inputs = {a, b};
  auto fn = s.fn;
  auto ref = s.ref;
  o.fn = [fn](const TensorList& in) { return TensorList{fn(in[0], in[1])}; };
  o.reference = [ref, out](const TensorList& in) { return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), ref).to(out)}; };
  o.check_grad = grad;
  return o;
}

std::vector<OpSample> binary_samples(OpId op) {
  const BinarySpec& s = specs().at(op);
  std::vector<OpSample> v;
  uint64_t seed_a = static_cast<uint64_t>(op) * 100, seed_b = seed_a + 50;
  auto A = [&](Shape sh, DType t, bool nc = false) {
    double lo = t == DType::UInt8 ? std::max(0.0, s.alo) : s.alo;
    return make_input(sh, t, ++seed_a, lo, s.ahi, nc);
  };
  auto B = [&](Shape sh, DType t, bool nc = false) {
    double lo = t == DType::UInt8 ? std::max(0.0, s.blo) : s.blo;
    return make_input(sh, t, ++seed_b, lo, s.bhi, nc);
  };
  bool floats = s.kind != Kind::IntOrBool && s.kind != Kind::Int;
  if (floats) {
    for (DType t : {kFloat32, kFloat64, DType::Float16, DType::BFloat16})
      v.push_back(make2(s, std::string(dtype_name(t)) + " [3,4]x[3,4]", A({3, 4}, t), B({3, 4}, t), out_dtype(s.kind, t),
                        t == kFloat32));
    v.push_back(make2(s, "broadcast float32 [3,1]x[4]", A({3, 1}, kFloat32), B({4}, kFloat32), out_dtype(s.kind, kFloat32), true));
    v.push_back(make2(s, "broadcast float64 [2,1,3]x[4,1]", A({2, 1, 3}, kFloat64), B({4, 1}, kFloat64),
                      out_dtype(s.kind, kFloat64), false));
    v.push_back(make2(s, "noncontig float32 [4,3]", A({4, 3}, kFloat32, true), B({4, 3}, kFloat32, true),
                      out_dtype(s.kind, kFloat32), true));
    v.push_back(make2(s, "empty [0,4]x[4]", A({0, 4}, kFloat32), B({4}, kFloat32), out_dtype(s.kind, kFloat32), true));
    v.push_back(make2(s, "0-d x 0-d float64", A({}, kFloat64), B({}, kFloat64), out_dtype(s.kind, kFloat64), true));
    // A 0-d float64 tensor does not promote a float32 tensor (same category).
    v.push_back(make2(s, "float32 [5] x 0-d float64", A({5}, kFloat32), B({}, kFloat64), out_dtype(s.kind, kFloat32), true));
    v.push_back(make2(s, "int32 x float32 promotes", A({5}, kInt32), B({5}, kFloat32), out_dtype(s.kind, kFloat32), false));
    v.push_back(make2(s, "float16 x float32 promotes", A({5}, DType::Float16), B({5}, kFloat32), out_dtype(s.kind, kFloat32), false));
    v.push_back(make2(s, "large float32 [300,257]", A({300, 257}, kFloat32), B({257}, kFloat32), out_dtype(s.kind, kFloat32), false));
  }
  std::vector<DType> ints{kInt64, kInt32, DType::Int16, DType::Int8};
  if (s.unsigned_ok) ints.push_back(DType::UInt8);
  if (s.kind == Kind::FloatOnly) ints.clear();
  for (DType t : ints) {
    if (op == OpId::div && t != kInt64) continue;
    v.push_back(make2(s, std::string(dtype_name(t)) + " [2,3]x[3]", A({2, 3}, t), B({3}, t), out_dtype(s.kind, t), false));
  }
  if (s.kind != Kind::Float && s.kind != Kind::Int && s.kind != Kind::FloatOnly)
    v.push_back(make2(s, "int8 x int64 promotes, noncontig", A({3, 2}, DType::Int8, true), B({3, 2}, kInt64),
                      out_dtype(s.kind, kInt64), false));
  if (s.bool_ok && s.kind != Kind::FloatOnly) {
    DType o = s.kind == Kind::Float ? kFloat32 : DType::Bool;
    v.push_back(make2(s, "bool x bool", make_input({6}, DType::Bool, seed_a + 7), make_input({6}, DType::Bool, seed_b + 9), o, false));
  }
  // Tensor op Scalar (a wrapped number does not promote within its category).
  if (s.fn_scalar) {
    auto fs = s.fn_scalar;
    auto ref = s.ref;
    double sv = op == OpId::pow ? 2.0 : 1.5;
    OpSample o;
    o.name = "float32 op Scalar(double)";
    o.inputs = {A({3, 4}, kFloat32)};
    o.fn = [fs, sv](const TensorList& in) { return TensorList{fs(in[0], Scalar(sv))}; };
    DType out = out_dtype(s.kind, kFloat32);
    o.reference = [ref, sv, out](const TensorList& in) {
      return TensorList{ref_map(Ref::of(in[0]), [ref, sv](double a) { return ref(a, sv); }).to(out)};
    };
    v.push_back(o);
    if (s.kind != Kind::Float || op == OpId::div) {
      OpSample p;
      p.name = "int64 op Scalar(int)";
      p.inputs = {A({5}, kInt64)};
      p.fn = [fs](const TensorList& in) { return TensorList{fs(in[0], Scalar(int64_t(2)))}; };
      DType pout = out_dtype(s.kind, kInt64);
      p.reference = [ref, pout](const TensorList& in) {
        return TensorList{ref_map(Ref::of(in[0]), [ref](double a) { return ref(a, 2.0); }).to(pout)};
      };
      v.push_back(p);
      OpSample q;
      q.name = "int64 op Scalar(double) promotes to float32";
      q.inputs = {A({5}, kInt64)};
      q.fn = [fs](const TensorList& in) { return TensorList{fs(in[0], Scalar(2.5))}; };
      DType qout = s.kind == Kind::BoolOut ? DType::Bool : kFloat32;
      q.reference = [ref, qout](const TensorList& in) {
        return TensorList{ref_map(Ref::of(in[0]), [ref](double a) { return ref(a, 2.5); }).to(qout)};
      };
      if (op != OpId::add && op != OpId::sub) v.push_back(q);  // add/sub: float Scalar other is allowed; alpha is not
    }
  }
  // Special values (float64): NaN, inf, signed zeros.
  if (floats) {
    Tensor sa = kiln::tensor<double>({kNan, 1, kInf, -kInf, 0.0, -0.0, 2, kInf}, {8}, kFloat64);
    Tensor sb = kiln::tensor<double>({1, kNan, 1, 2, -0.0, 0.0, kInf, kInf}, {8}, kFloat64);
    if (op != OpId::fmod && op != OpId::remainder && op != OpId::maximum && op != OpId::minimum)
      v.push_back(make2(s, "special values float64", sa, sb, out_dtype(s.kind, kFloat64), false));
  }
  return v;
}

std::vector<ErrorSample> binary_errors(OpId op) {
  const BinarySpec& s = specs().at(op);
  auto fn = s.fn;
  std::vector<ErrorSample> e;
  e.push_back({"shape mismatch", [fn] { fn(filled(2, 0, kFloat32).unsqueeze(1).expand({2, 3}), filled(4, 0, kFloat32)); }, "must match the size"});
  if (s.kind == Kind::IntOrBool || s.kind == Kind::Int)
    e.push_back({"float input", [fn] { fn(filled(2, 0, kFloat32), filled(2, 0, kFloat32)); }, "expected integral"});
  if (op == OpId::sub)
    e.push_back({"bool", [fn] { fn(filled(2, 1, DType::Bool), filled(2, 1, DType::Bool)); }, "with a bool tensor is not supported"});
  if (op == OpId::div) {
    e.push_back({"bad rounding mode", [] { kiln::div(filled(2, 1, kFloat32), filled(2, 1, kFloat32), "round"); }, "rounding_mode"});
    e.push_back({"int zero, floor", [] { kiln::div(filled(2, 1, kInt64), filled(2, 0, kInt64), "floor"); }, "ZeroDivisionError"});
    e.push_back({"int zero, trunc", [] { kiln::div(filled(2, 1, kInt32), Scalar(int64_t(0)), "trunc"); }, "ZeroDivisionError"});
  }
  if (op == OpId::fmod || op == OpId::remainder)
    e.push_back({"int zero", [fn] { fn(filled(2, 1, kInt64), filled(2, 0, kInt64)); }, "ZeroDivisionError"});
  if (op == OpId::pow)
    e.push_back({"int negative scalar exponent", [] { kiln::pow(filled(2, 1, kInt64), Scalar(int64_t(-1))); }, "negative integer powers"});
  if (op == OpId::logaddexp)
    e.push_back({"int64", [fn] { fn(filled(2, 1, kInt64), filled(2, 1, kInt64)); }, "logaddexp: expected floating point inputs"});
  if (op == OpId::logaddexp2)
    e.push_back({"int64", [fn] { fn(filled(2, 1, kInt64), filled(2, 1, kInt64)); }, "logaddexp2: expected floating point inputs"});
  if (op == OpId::add)
    e.push_back({"float alpha for int", [] { kiln::add(filled(2, 1, kInt64), filled(2, 1, kInt64), 0.5); }, "alpha"});
  return e;
}

// ---- ops with extra cases ----
std::vector<OpSample> add_samples() {
  std::vector<OpSample> v = binary_samples(OpId::add);
  auto ref_alpha = [](double al, DType t) {
    return [al, t](const TensorList& in) {
      return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), [al](double a, double b) { return a + al * b; }).to(t)};
    };
  };
  OpSample o;
  o.name = "alpha=2.5 broadcast";
  o.inputs = {make_input({3, 1}, kFloat32, 1), make_input({4}, kFloat32, 2)};
  o.fn = [](const TensorList& in) { return TensorList{kiln::add(in[0], in[1], 2.5)}; };
  o.reference = ref_alpha(2.5, kFloat32);
  v.push_back(o);
  o.name = "int64 alpha=-3";
  o.inputs = {make_input({5}, kInt64, 3, -9, 9), make_input({5}, kInt64, 4, -9, 9)};
  o.fn = [](const TensorList& in) { return TensorList{kiln::add(in[0], in[1], -3)}; };
  o.reference = ref_alpha(-3, kInt64);
  v.push_back(o);
  o.name = "operator+ and add_ in place";
  o.inputs = {make_input({3, 4}, kFloat32, 5), make_input({4}, kFloat32, 6)};
  o.fn = [](const TensorList& in) {
    Tensor y = in[0].clone();
    y.add_(in[1], 2);
    y += 1.0;
    return TensorList{y, in[0] + in[1], 1.0 + in[0]};
  };
  o.reference = [](const TensorList& in) {
    Ref a = Ref::of(in[0]), b = Ref::of(in[1]);
    return TensorList{ref_map2(a, b, [](double x, double y) { return x + 2 * y + 1; }).to(kFloat32),
                      ref_map2(a, b, [](double x, double y) { return x + y; }).to(kFloat32),
                      ref_map(a, [](double x) { return x + 1; }).to(kFloat32)};
  };
  o.check_grad = false;
  v.push_back(o);
  o.name = "int8 wraps";
  o.inputs = {kiln::tensor<int64_t>({120, -120}, {2}, DType::Int8), kiln::tensor<int64_t>({10, -10}, {2}, DType::Int8)};
  o.fn = [](const TensorList& in) { return TensorList{kiln::add(in[0], in[1])}; };
  o.reference = [](const TensorList&) { return TensorList{kiln::tensor<int64_t>({-126, 126}, {2}, DType::Int8)}; };
  v.push_back(o);
  return v;
}

std::vector<OpSample> sub_samples() {
  std::vector<OpSample> v = binary_samples(OpId::sub);
  OpSample o;
  o.name = "alpha=0.5, rsub, sub_ and operators";
  o.inputs = {make_input({3, 4}, kFloat32, 1), make_input({3, 1}, kFloat32, 2)};
  o.fn = [](const TensorList& in) {
    Tensor y = in[0].clone();
    y.sub_(in[1]);
    y -= 2.0;
    return TensorList{kiln::sub(in[0], in[1], 0.5), kiln::rsub(in[0], 3.0, 2), 1.0 - in[0], y};
  };
  o.reference = [](const TensorList& in) {
    Ref a = Ref::of(in[0]), b = Ref::of(in[1]);
    return TensorList{ref_map2(a, b, [](double x, double y) { return x - 0.5 * y; }).to(kFloat32),
                      ref_map(a, [](double x) { return 3 - 2 * x; }).to(kFloat32),
                      ref_map(a, [](double x) { return 1 - x; }).to(kFloat32),
                      ref_map2(a, b, [](double x, double y) { return x - y - 2; }).to(kFloat32)};
  };
  o.check_grad = false;
  v.push_back(o);
  o.name = "alpha=0.5 gradcheck";
  o.fn = [](const TensorList& in) { return TensorList{kiln::sub(in[0], in[1], 0.5)}; };
  o.reference = nullptr;
  o.check_grad = true;
  v.push_back(o);
  return v;
}

std::vector<OpSample> mul_samples() {
  std::vector<OpSample> v = binary_samples(OpId::mul);
  OpSample o;
  o.name = "mul_, *=, scalar on the left";
  o.inputs = {make_input({3, 4}, kFloat32, 1), make_input({4}, kFloat32, 2)};
  o.fn = [](const TensorList& in) {
    Tensor y = in[0].clone();
    y.mul_(in[1]);
    y *= 2.0;
    return TensorList{y, 3.0 * in[0]};
  };
  o.reference = [](const TensorList& in) {
    Ref a = Ref::of(in[0]), b = Ref::of(in[1]);
    return TensorList{ref_map2(a, b, [](double x, double y) { return x * y * 2; }).to(kFloat32),
                      ref_map(a, [](double x) { return 3 * x; }).to(kFloat32)};
  };
  o.check_grad = false;
  v.push_back(o);
  // deg2rad is x * (pi / 180): integer inputs give float32.
  for (DType t : {kFloat32, kFloat64, DType::Float16, kInt64}) {
    OpSample d;
    d.name = "deg2rad " + std::string(dtype_name(t));
    d.inputs = {make_input({3, 4}, t, 30, -360, 360)};
    d.fn = [](const TensorList& in) { return TensorList{kiln::deg2rad(in[0])}; };
    DType out = is_floating_point(t) ? t : kFloat32;
    d.reference = [out](const TensorList& in) {
      return TensorList{ref_map(Ref::of(in[0]), [](double a) { return a * M_PI / 180; }).to(out)};
    };
    d.check_grad = t == kFloat64;
    v.push_back(d);
  }
  return v;
}

std::vector<OpSample> div_samples() {
  std::vector<OpSample> v = binary_samples(OpId::div);
  auto mode_sample = [&](std::string name, Tensor a, Tensor b, std::string mode, DType out) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = {a, b};
    o.fn = [mode](const TensorList& in) { return TensorList{kiln::div(in[0], in[1], mode)}; };
    bool fl = mode == "floor";
    bool is_int = !is_floating_point(out);
    o.reference = [fl, out, is_int](const TensorList& in) {
      return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), [fl, is_int](double x, double y) {
                          if (is_int) return fl ? std::floor(x / y) : std::trunc(x / y);
                          return fl ? py_floor_div(x, y) : std::trunc(x / y);
                        }).to(out)};
    };
    v.push_back(o);
  };
  for (std::string mode : {"trunc", "floor"}) {
    mode_sample("int64 " + mode, make_input({3, 4}, kInt64, 11, -20, 20), make_input({4}, kInt64, 12, 1, 5), mode, kInt64);
    mode_sample("int64 negative divisor " + mode, make_input({3, 4}, kInt64, 13, -20, 20), make_input({4}, kInt64, 14, -5, -1), mode, kInt64);
    mode_sample("int8 " + mode, make_input({6}, DType::Int8, 15, -20, 20), make_input({6}, DType::Int8, 16, 1, 5), mode, DType::Int8);
    mode_sample("float32 " + mode, make_input({3, 4}, kFloat32, 17, -20, 20), make_input({3, 4}, kFloat32, 18, 0.5, 5), mode, kFloat32);
    mode_sample("float64 noncontig " + mode, make_input({3, 4}, kFloat64, 19, -20, 20, true),
                make_input({3, 4}, kFloat64, 20, -5, -0.5, true), mode, kFloat64);
  }
  // floor_divide is div(rounding_mode='floor'), as torch >= 1.13.
  mode_sample("floor_divide int64", make_input({3, 4}, kInt64, 24, -20, 20), make_input({4}, kInt64, 25, -5, -1), "floor", kInt64);
  {
    OpSample f;
    f.name = "floor_divide float32 by Scalar and int64 by tensor";
    f.inputs = {make_input({3, 4}, kFloat32, 26, -20, 20), make_input({5}, kInt64, 27, -20, 20), make_input({5}, kInt64, 28, 1, 6)};
    f.fn = [](const TensorList& in) {
      return TensorList{kiln::floor_divide(in[0], 1.5), kiln::floor_divide(in[1], in[2])};
    };
    f.reference = [](const TensorList& in) {
      return TensorList{ref_map(Ref::of(in[0]), [](double a) { return py_floor_div(a, 1.5); }).to(kFloat32),
                        ref_map2(Ref::of(in[1]), Ref::of(in[2]), [](double a, double b) { return std::floor(a / b); }).to(kInt64)};
    };
    f.check_grad = false;
    v.push_back(f);
  }
  OpSample o;
  o.name = "int / int is true division; div_ and /=";
  o.inputs = {make_input({5}, kInt64, 21, -9, 9), make_input({5}, kInt64, 22, 1, 4), make_input({3}, kFloat32, 23)};
  o.fn = [](const TensorList& in) {
    Tensor y = in[2].clone();
    y.div_(2.0);
    y /= in[2];
    return TensorList{in[0] / in[1], y, 2.0 / in[2]};
  };
  o.reference = [](const TensorList& in) {
    Ref c = Ref::of(in[2]);
    return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), [](double x, double y) { return x / y; }).to(kFloat32),
                      ref_map(c, [](double x) { return x / 2 / x; }).to(kFloat32),
                      ref_map(c, [](double x) { return 2 / x; }).to(kFloat32)};
  };
  o.check_grad = false;
  v.push_back(o);
  return v;
}

std::vector<OpSample> pow_samples() {
  std::vector<OpSample> v = binary_samples(OpId::pow);
  OpSample o;
  o.name = "scalar base, float exponent";
  o.inputs = {make_input({3, 4}, kFloat32, 1, -2, 2)};
  o.fn = [](const TensorList& in) { return TensorList{kiln::pow(2.0, in[0]), in[0].pow(Scalar(int64_t(3)))}; };
  o.reference = [](const TensorList& in) {
    Ref a = Ref::of(in[0]);
    return TensorList{ref_map(a, [](double x) { return std::pow(2.0, x); }).to(kFloat32),
                      ref_map(a, [](double x) { return x * x * x; }).to(kFloat32)};
  };
  v.push_back(o);
  o.name = "int negative exponent tensor";
  o.inputs = {kiln::tensor<int64_t>({1, -1, -1, 2, 0, 3}, {6}, kInt64), kiln::tensor<int64_t>({-2, -3, -2, -1, 2, 3}, {6}, kInt64)};
  o.fn = [](const TensorList& in) { return TensorList{in[0].pow(in[1])}; };
  o.reference = [](const TensorList&) { return TensorList{kiln::tensor<int64_t>({1, -1, 1, 0, 0, 27}, {6}, kInt64)}; };
  v.push_back(o);
  return v;
}

std::vector<OpSample> where_samples() {
  std::vector<OpSample> v;
  auto ref = [](DType t) {
    return [t](const TensorList& in) {
      return TensorList{ref_map3(Ref::of(in[0]), Ref::of(in[1]), Ref::of(in[2]),
                                 [](double c, double a, double b) { return c != 0 ? a : b; }).to(t)};
    };
  };
  uint64_t seed = 900;
  auto add = [&](std::string name, Shape sc, Shape sa, Shape sb, DType ta, DType tb, DType out, bool nc = false) {
    OpSample o;
    o.name = std::move(name);
    double lo = ta == DType::UInt8 ? 0 : -3;
    o.inputs = {make_input(sc, DType::Bool, ++seed, -1, 1, nc), make_input(sa, ta, ++seed, lo, 3, nc), make_input(sb, tb, ++seed, lo, 3)};
    o.fn = [](const TensorList& in) { return TensorList{kiln::where(in[0], in[1], in[2])}; };
    o.reference = ref(out);
    v.push_back(o);
  };
  for (DType t : {kFloat32, kFloat64, DType::Float16, DType::BFloat16, kInt64, kInt32, DType::Int8, DType::UInt8, DType::Bool})
    add(std::string(dtype_name(t)) + " [3,4]", {3, 4}, {3, 4}, {3, 4}, t, t, t);
  add("broadcast [3,1] [4] [1,4]", {3, 1}, {4}, {1, 4}, kFloat32, kFloat32, kFloat32);
  add("noncontig", {4, 3}, {4, 3}, {4, 3}, kFloat64, kFloat64, kFloat64, true);
  add("promotion int32 / float32", {5}, {5}, {5}, kInt32, kFloat32, kFloat32);
  add("empty", {0, 3}, {3}, {0, 3}, kFloat32, kFloat32, kFloat32);
  add("0-d", {}, {}, {}, kFloat64, kFloat64, kFloat64);
  OpSample o;
  o.name = "scalar branches";
  o.inputs = {make_input({3, 4}, DType::Bool, 1), make_input({3, 4}, kFloat32, 2)};
  o.fn = [](const TensorList& in) { return TensorList{kiln::where(in[0], in[1], 0.5), kiln::where(in[0], Scalar(int64_t(2)), in[1])}; };
  o.reference = [](const TensorList& in) {
    Ref c = Ref::of(in[0]), a = Ref::of(in[1]);
    return TensorList{ref_map2(c, a, [](double cc, double x) { return cc != 0 ? x : 0.5; }).to(kFloat32),
                      ref_map2(c, a, [](double cc, double x) { return cc != 0 ? 2.0 : x; }).to(kFloat32)};
  };
  v.push_back(o);
  return v;
}
std::vector<ErrorSample> where_errors() {
  return {{"float condition", [] { kiln::where(filled(2, 1, kFloat32), filled(2, 1, kFloat32), filled(2, 1, kFloat32)); }, "where: expected condition to be a bool"},
          {"shape mismatch", [] { kiln::where(filled(2, 1, DType::Bool), filled(3, 1, kFloat32), filled(2, 1, kFloat32)); }, "must match the size"}};
}

double lerp_ref(double s, double e, double w) { return s + w * (e - s); }
std::vector<OpSample> lerp_samples() {
  std::vector<OpSample> v;
  uint64_t seed = 950;
  auto add = [&](std::string name, TensorList in, OpFn fn, DType out) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = std::move(in);
    o.fn = std::move(fn);
    o.reference = [out](const TensorList& in) {
      return TensorList{ref_map3(Ref::of(in[0]), Ref::of(in[1]), Ref::of(in[2]), lerp_ref).to(out)};
    };
    v.push_back(o);
  };
  OpFn f3 = [](const TensorList& in) { return TensorList{kiln::lerp(in[0], in[1], in[2])}; };
  for (DType t : {kFloat32, kFloat64, DType::Float16, DType::BFloat16})
    add(std::string(dtype_name(t)) + " [3,4]", {make_input({3, 4}, t, ++seed), make_input({3, 4}, t, ++seed), make_input({3, 4}, t, ++seed, -0.5, 1.5)}, f3, t);
  add("broadcast", {make_input({3, 1}, kFloat32, ++seed), make_input({4}, kFloat32, ++seed), make_input({3, 4}, kFloat32, ++seed, 0, 1)}, f3, kFloat32);
  add("noncontig", {make_input({4, 3}, kFloat64, ++seed, -2, 2, true), make_input({4, 3}, kFloat64, ++seed, -2, 2, true),
                    make_input({4, 3}, kFloat64, ++seed, 0, 1, true)}, f3, kFloat64);
  add("empty", {make_input({0, 3}, kFloat32, ++seed), make_input({3}, kFloat32, ++seed), make_input({0, 3}, kFloat32, ++seed)}, f3, kFloat32);
  add("0-d", {make_input({}, kFloat64, ++seed), make_input({}, kFloat64, ++seed), make_input({}, kFloat64, ++seed)}, f3, kFloat64);
  OpSample o;
  o.name = "scalar weight and lerp_";
  o.inputs = {make_input({3, 4}, kFloat32, ++seed), make_input({3, 4}, kFloat32, ++seed)};
  o.fn = [](const TensorList& in) {
    Tensor y = in[0].clone();
    y.lerp_(in[1], 0.75);
    return TensorList{kiln::lerp(in[0], in[1], 0.25), y};
  };
  o.reference = [](const TensorList& in) {
    Ref a = Ref::of(in[0]), b = Ref::of(in[1]);
    return TensorList{ref_map2(a, b, [](double s, double e) { return lerp_ref(s, e, 0.25); }).to(kFloat32),
                      ref_map2(a, b, [](double s, double e) { return lerp_ref(s, e, 0.75); }).to(kFloat32)};
  };
  o.check_grad = false;
  v.push_back(o);
  o.name = "scalar weight gradcheck";
  o.fn = [](const TensorList& in) { return TensorList{kiln::lerp(in[0], in[1], 0.25)}; };
  o.reference = nullptr;
  o.check_grad = true;
  v.push_back(o);
  return v;
}
std::vector<ErrorSample> lerp_errors() {
  return {{"dtype mismatch", [] { kiln::lerp(filled(2, 1, kFloat32), filled(2, 1, kFloat64), 0.5); }, "lerp: expected dtype"},
          {"int start", [] { kiln::lerp(filled(2, 1, kInt64), filled(2, 1, kInt64), 0.5); }, "lerp: expected a floating"}};
}

template <bool Div>
std::vector<OpSample> addc_samples() {
  std::vector<OpSample> v;
  uint64_t seed = Div ? 1000 : 1100;
  auto add = [&](std::string name, TensorList in, double value, DType out, bool grad = true) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = std::move(in);
    o.fn = [value](const TensorList& in) {
      Scalar sv = in[0].is_floating_point() ? Scalar(value) : Scalar(static_cast<int64_t>(value));
      return TensorList{Div ? kiln::addcdiv(in[0], in[1], in[2], sv) : kiln::addcmul(in[0], in[1], in[2], sv)};
    };
    o.reference = [value, out](const TensorList& in) {
      return TensorList{ref_map3(Ref::of(in[0]), Ref::of(in[1]), Ref::of(in[2]), [value](double s, double a, double b) {
                          return Div ? s + value * (a / b) : s + value * a * b;
                        }).to(out)};
    };
    o.check_grad = grad;
    v.push_back(o);
  };
  double blo = Div ? 0.5 : -2;
  for (DType t : {kFloat32, kFloat64, DType::Float16, DType::BFloat16})
    add(std::string(dtype_name(t)) + " value=0.5", {make_input({3, 4}, t, ++seed), make_input({3, 4}, t, ++seed), make_input({3, 4}, t, ++seed, blo, 2)},
        0.5, t, t == kFloat32);
  add("broadcast value=1", {make_input({3, 1}, kFloat32, ++seed), make_input({4}, kFloat32, ++seed), make_input({3, 4}, kFloat32, ++seed, blo, 2)}, 1, kFloat32);
  add("noncontig", {make_input({4, 3}, kFloat64, ++seed, -2, 2, true), make_input({4, 3}, kFloat64, ++seed, -2, 2, true),
                    make_input({4, 3}, kFloat64, ++seed, blo, 2, true)}, -2, kFloat64);
  add("empty", {make_input({0, 3}, kFloat32, ++seed), make_input({3}, kFloat32, ++seed), make_input({0, 3}, kFloat32, ++seed, blo, 2)}, 0.5, kFloat32);
  add("0-d", {make_input({}, kFloat64, ++seed), make_input({}, kFloat64, ++seed), make_input({}, kFloat64, ++seed, blo, 2)}, 0.5, kFloat64);
  if (!Div)
    add("int64 value=2", {make_input({5}, kInt64, ++seed, -5, 5), make_input({5}, kInt64, ++seed, -5, 5), make_input({5}, kInt64, ++seed, -5, 5)}, 2, kInt64);
  OpSample o;
  o.name = "in place";
  o.inputs = {make_input({3, 4}, kFloat32, ++seed), make_input({3, 4}, kFloat32, ++seed), make_input({4}, kFloat32, ++seed, 0.5, 2)};
  o.fn = [](const TensorList& in) {
    Tensor y = in[0].clone();
    if (Div) y.addcdiv_(in[1], in[2], 0.5);
    else y.addcmul_(in[1], in[2], 0.5);
    return TensorList{y};
  };
  o.reference = [](const TensorList& in) {
    return TensorList{ref_map3(Ref::of(in[0]), Ref::of(in[1]), Ref::of(in[2]), [](double s, double a, double b) {
                        return Div ? s + 0.5 * (a / b) : s + 0.5 * a * b;
                      }).to(kFloat32)};
  };
  o.check_grad = false;
  v.push_back(o);
  return v;
}
std::vector<ErrorSample> addcmul_errors() {
  return {{"shape mismatch", [] { kiln::addcmul(filled(2, 1, kFloat32), filled(3, 1, kFloat32), filled(2, 1, kFloat32)); }, "must match the size"},
          {"bool", [] { kiln::addcmul(filled(2, 1, kBool), filled(2, 1, kBool), filled(2, 1, kBool)); }, "not supported for bool"}};
}
std::vector<ErrorSample> addcdiv_errors() {
  return {{"integer division", [] { kiln::addcdiv(filled(2, 1, kFloat32), filled(2, 1, kInt64), filled(2, 1, kInt64)); }, "addcdiv: integer division"}};
}

// ---- isclose: |a - b| <= atol + rtol * |b|, or a == b (NaNs equal with equal_nan) ----
double isclose_ref(double a, double b, double rtol, double atol, bool equal_nan) {
  if (a == b) return 1;
  if (equal_nan && std::isnan(a) && std::isnan(b)) return 1;
  double d = std::abs(a - b);
  return std::isfinite(d) && d <= atol + rtol * std::abs(b) ? 1 : 0;
}
std::vector<OpSample> isclose_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor a, Tensor b, double rtol, double atol, bool equal_nan) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = {a, b};
    o.fn = [=](const TensorList& in) { return TensorList{kiln::isclose(in[0], in[1], rtol, atol, equal_nan)}; };
    o.reference = [=](const TensorList& in) {
      return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), [=](double x, double y) {
                          return isclose_ref(x, y, rtol, atol, equal_nan);
                        }).to(DType::Bool)};
    };
    v.push_back(o);
  };
  Tensor sa = kiln::tensor<double>({1, 1, 1, 0, kNan, kInf, kInf, -kInf, 1e-9}, {9}, kFloat64);
  Tensor sb = kiln::tensor<double>({1, 1 + 1e-6, 1.1, 1e-9, kNan, kInf, -kInf, -kInf, 0}, {9}, kFloat64);
  for (DType t : {kFloat32, kFloat64}) {
    add("defaults, special values " + std::string(dtype_name(t)), sa.to(t), sb.to(t), 1e-5, 1e-8, false);
    add("equal_nan " + std::string(dtype_name(t)), sa.to(t), sb.to(t), 1e-5, 1e-8, true);
  }
  add("broadcast [3,1]x[4] rtol=0.5", make_input({3, 1}, kFloat64, 40, 0.5, 2), make_input({4}, kFloat64, 41, 0.5, 2), 0.5,
      0, false);
  add("noncontig float32 atol=0.5", make_input({4, 3}, kFloat32, 42, -1, 1, true), make_input({4, 3}, kFloat32, 43, -1, 1, true),
      0, 0.5, false);
  add("zero tolerances: equality only", kiln::tensor<double>({1, 2, 3}, {3}, kFloat32),
      kiln::tensor<double>({1, 2.0000001, 4}, {3}, kFloat32), 0, 0, false);
  add("int64 rtol=0.1 atol=1", kiln::tensor<double>({10, 10, 0, -5}, {4}, kInt64),
      kiln::tensor<double>({11, 12, 1, -3}, {4}, kInt64), 0.1, 1, false);
  add("bool", kiln::tensor<double>({1, 0, 0}, {3}, DType::Bool), kiln::tensor<double>({1, 1, 0}, {3}, DType::Bool), 1e-5,
      1e-8, false);
  add("float16", make_input({3, 4}, DType::Float16, 44), make_input({3, 4}, DType::Float16, 44), 1e-5, 1e-8, false);
  add("empty and 0-d", make_input({0, 3}, kFloat32, 45), make_input({}, kFloat32, 46), 1e-5, 1e-8, false);
  return v;
}
std::vector<ErrorSample> isclose_errors() {
  return {{"dtype mismatch", [] { kiln::isclose(filled(2, 1, kFloat32), filled(2, 1, kFloat64)); }, "isclose: float32 did not match float64"},
          {"negative rtol", [] { kiln::isclose(filled(2, 1, kFloat32), filled(2, 1, kFloat32), -1); }, "isclose: rtol must be greater than or equal to zero"},
          {"negative atol", [] { kiln::isclose(filled(2, 1, kFloat32), filled(2, 1, kFloat32), 0, -1); }, "isclose: atol must be"},
          {"shape mismatch", [] { kiln::isclose(filled(2, 1, kFloat32), filled(3, 1, kFloat32)); }, "must match the size"}};
}
TEST(Allclose, IsAllOfIsclose) {
  Tensor a = kiln::tensor<double>({1, 2, kNan}, {3}, kFloat32);
  Tensor b = kiln::tensor<double>({1, 2 + 1e-6, kNan}, {3}, kFloat32);
  EXPECT_FALSE(kiln::allclose(a, b));
  EXPECT_TRUE(kiln::allclose(a, b, 1e-5, 1e-8, true));
  EXPECT_FALSE(kiln::allclose(a, b * 1.1, 1e-5, 1e-8, true));
  EXPECT_TRUE(kiln::allclose(make_input({0}, kFloat32, 1), make_input({0}, kFloat32, 2)));
}

#define KILN_BINARY_SAMPLES(op)                                                              \
  std::vector<OpSample> samples_##op() { return binary_samples(OpId::op); }                 \
  std::vector<ErrorSample> errors_##op() { return binary_errors(OpId::op); }                \
  KILN_OP_SAMPLES(op, samples_##op, errors_##op);

std::vector<ErrorSample> errors_add() { return binary_errors(OpId::add); }
std::vector<ErrorSample> errors_sub() { return binary_errors(OpId::sub); }
std::vector<ErrorSample> errors_mul() { return binary_errors(OpId::mul); }
std::vector<ErrorSample> errors_div() { return binary_errors(OpId::div); }
std::vector<ErrorSample> errors_pow() { return binary_errors(OpId::pow); }
KILN_OP_SAMPLES(add, add_samples, errors_add);
KILN_OP_SAMPLES(sub, sub_samples, errors_sub);
KILN_OP_SAMPLES(mul, mul_samples, errors_mul);
KILN_OP_SAMPLES(div, div_samples, errors_div);
KILN_OP_SAMPLES(pow, pow_samples, errors_pow);
KILN_BINARY_SAMPLES(fmod)
KILN_BINARY_SAMPLES(remainder)
KILN_BINARY_SAMPLES(maximum)
KILN_BINARY_SAMPLES(minimum)
KILN_BINARY_SAMPLES(atan2)
KILN_BINARY_SAMPLES(hypot)
KILN_BINARY_SAMPLES(xlogy)
KILN_BINARY_SAMPLES(fmax)
KILN_BINARY_SAMPLES(fmin)
KILN_BINARY_SAMPLES(copysign)
KILN_BINARY_SAMPLES(logaddexp)
KILN_BINARY_SAMPLES(logaddexp2)
KILN_BINARY_SAMPLES(eq)
KILN_BINARY_SAMPLES(ne)
KILN_BINARY_SAMPLES(lt)
KILN_BINARY_SAMPLES(le)
KILN_BINARY_SAMPLES(gt)
KILN_BINARY_SAMPLES(ge)
KILN_BINARY_SAMPLES(logical_and)
KILN_BINARY_SAMPLES(logical_or)
KILN_BINARY_SAMPLES(logical_xor)
KILN_BINARY_SAMPLES(bitwise_and)
KILN_BINARY_SAMPLES(bitwise_or)
KILN_BINARY_SAMPLES(bitwise_xor)
KILN_BINARY_SAMPLES(bitwise_left_shift)
KILN_BINARY_SAMPLES(bitwise_right_shift)
KILN_OP_SAMPLES(where, where_samples, where_errors);
KILN_OP_SAMPLES(isclose, isclose_samples, isclose_errors);
KILN_OP_SAMPLES(lerp, lerp_samples, lerp_errors);
KILN_OP_SAMPLES(addcmul, addc_samples<false>, addcmul_errors);
KILN_OP_SAMPLES(addcdiv, addc_samples<true>, addcdiv_errors);

// ---- nextafter, heaviside, float_power ----
// The neighbours of a float16/bfloat16 value, from the sorted list of every value the format holds
// (decoded from all 2^16 bit patterns), independent of the kernel's bit stepping.
double reduced_next(double a, double b, DType t) {
  static const auto table = [](DType d) {
    std::vector<double> v;
    for (uint32_t bits = 0; bits < 65536; ++bits) {
      double x = d == DType::Float16 ? double(float(Half::from_bits(static_cast<uint16_t>(bits))))
                                     : double(float(BFloat16::from_bits(static_cast<uint16_t>(bits))));
      if (!std::isnan(x)) v.push_back(x);
    }
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  static const std::vector<double> half = table(DType::Float16), bf16 = table(DType::BFloat16);
  const std::vector<double>& v = t == DType::Float16 ? half : bf16;
  if (std::isnan(a) || std::isnan(b)) return kNan;
  if (a == b) return b;
  auto it = std::lower_bound(v.begin(), v.end(), a);  // *it == a
  return b > a ? *(it + 1) : *(it - 1);
}
double nextafter_ref(double a, double b, DType t) {
  if (t == kFloat64) return std::nextafter(a, b);
  if (t == kFloat32) return std::nextafter(static_cast<float>(a), static_cast<float>(b));
  return reduced_next(a, b, t);
}
std::vector<OpSample> nextafter_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor a, Tensor b, DType out) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = {a, b};
    // A one-ulp step is within the value tolerance: whether it moved, and which way, are compared exactly.
    o.fn = [](const TensorList& in) {
      Tensor y = kiln::nextafter(in[0], in[1]);
      return TensorList{y, kiln::eq(y, in[0]), kiln::lt(y, in[0])};
    };
    o.reference = [out](const TensorList& in) {
      Ref a = Ref::of(in[0]), r = ref_map2(a, Ref::of(in[1]), [out](double x, double y) { return nextafter_ref(x, y, out); });
      return TensorList{r.to(out), ref_map2(r, a, [](double x, double y) { return double(x == y); }).to(DType::Bool),
                        ref_map2(r, a, [](double x, double y) { return double(x < y); }).to(DType::Bool)};
    };
    o.check_grad = false;
    v.push_back(o);
  };
  for (DType t : {kFloat32, kFloat64, DType::Float16, DType::BFloat16})
    add(std::string(dtype_name(t)) + " [3,4]x[3,4]", make_input({3, 4}, t, 1, -3, 3), make_input({3, 4}, t, 2, -3, 3), t);
  add("broadcast float32 [3,1]x[4]", make_input({3, 1}, kFloat32, 3, -3, 3), make_input({4}, kFloat32, 4, -3, 3), kFloat32);
  add("noncontig float64 [4,3]", make_input({4, 3}, kFloat64, 5, -3, 3, true), make_input({4, 3}, kFloat64, 6, -3, 3, true), kFloat64);
  add("empty [0,4]x[4]", make_input({0, 4}, kFloat32, 7), make_input({4}, kFloat32, 8), kFloat32);
  add("0-d float64", make_input({}, kFloat64, 9), make_input({}, kFloat64, 10), kFloat64);
  add("float16 x float32 promotes", make_input({5}, DType::Float16, 11), make_input({5}, kFloat32, 12), kFloat32);
  Tensor sa = kiln::tensor<double>({kNan, 1, 0.0, -0.0, 0.0, 2, kInf, 1, 65504}, {9}, kFloat64);
  Tensor sb = kiln::tensor<double>({1, kNan, 1, -1, 0.0, 2, 0, kInf, kInf}, {9}, kFloat64);
  for (DType t : {kFloat64, kFloat32, DType::Float16, DType::BFloat16})
    add("special values " + std::string(dtype_name(t)), sa.to(t), sb.to(t), t);
  return v;
}
std::vector<ErrorSample> nextafter_errors() {
  return {{"int64", [] { kiln::nextafter(filled(2, 1, kInt64), filled(2, 1, kInt64)); }, "nextafter: expected floating point inputs"},
          {"shape mismatch", [] { kiln::nextafter(filled(2, 1, kFloat32), filled(3, 1, kFloat32)); }, "must match the size"}};
}

double heaviside_ref(double x, double v) { return x == 0 ? v : double(x > 0); }
std::vector<OpSample> heaviside_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, Tensor vals, DType out) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = {x, vals};
    o.fn = [](const TensorList& in) { return TensorList{kiln::heaviside(in[0], in[1])}; };
    o.reference = [out](const TensorList& in) { return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), heaviside_ref).to(out)}; };
    o.check_grad = false;
    v.push_back(o);
  };
  // Rounded inputs, so that some are exactly 0.
  for (DType t : {kFloat32, kFloat64, DType::Float16, DType::BFloat16, kInt64, kInt32, DType::Int8})
    add(std::string(dtype_name(t)) + " [3,4]x[4]", make_input({3, 4}, kFloat64, 1, -2, 2).round().to(t),
        make_input({4}, kFloat64, 2, -3, 3).round().to(t), t);
  add("noncontig float32 [4,3]", make_input({4, 3}, kFloat64, 3, -2, 2, true).round().to(kFloat32),
      make_input({4, 3}, kFloat32, 4, -3, 3, true), kFloat32);
  add("bool", make_input({6}, DType::Bool, 5), make_input({6}, DType::Bool, 6), DType::Bool);
  add("empty [0,3]x[3]", make_input({0, 3}, kFloat32, 7), make_input({3}, kFloat32, 8), kFloat32);
  add("0-d values", make_input({5}, kFloat64, 9, -1, 1).round(), kiln::tensor<double>({0.5}, {}, kFloat64), kFloat64);
  add("special values float64", kiln::tensor<double>({kNan, kInf, -kInf, 0.0, -0.0, 2}, {6}, kFloat64),
      kiln::tensor<double>({0.5, 0.5, 0.5, kNan, 0.25, 0.5}, {6}, kFloat64), kFloat64);
  return v;
}
std::vector<ErrorSample> heaviside_errors() {
  return {{"dtype mismatch", [] { kiln::heaviside(filled(2, 1, kFloat32), filled(2, 1, kFloat64)); },
           "heaviside: is not yet implemented for tensors with different dtypes (input float32, values float64)"},
          {"shape mismatch", [] { kiln::heaviside(filled(2, 1, kFloat32), filled(3, 1, kFloat32)); }, "must match the size"}};
}

std::vector<OpSample> float_power_samples() {
  std::vector<OpSample> v;
  auto pw = [](double a, double b) { return std::pow(a, b); };
  auto add = [&](std::string name, Tensor a, Tensor b, bool grad) {
    OpSample o;
    o.name = std::move(name);
    o.inputs = {a, b};
    o.fn = [](const TensorList& in) { return TensorList{kiln::float_power(in[0], in[1])}; };
    o.reference = [pw](const TensorList& in) { return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), pw).to(kFloat64)}; };
    o.check_grad = grad;
    v.push_back(o);
  };
  add("float32 [3,4]x[3,4] gives float64", make_input({3, 4}, kFloat32, 1, 0.5, 3), make_input({3, 4}, kFloat32, 2, -2, 2), true);
  add("float64 broadcast [3,1]x[4]", make_input({3, 1}, kFloat64, 3, 0.5, 3), make_input({4}, kFloat64, 4, -2, 2), true);
  add("int64 x int64 gives float64", make_input({5}, kInt64, 5, 1, 5), make_input({5}, kInt64, 6, -2, 3), false);
  add("float16 x int32", make_input({5}, DType::Float16, 7, 0.5, 3), make_input({5}, kInt32, 8, -2, 3), false);
  add("noncontig float32 [4,3]", make_input({4, 3}, kFloat32, 9, 0.5, 3, true), make_input({4, 3}, kFloat32, 10, -2, 2, true), true);
  add("empty [0,3]x[3]", make_input({0, 3}, kFloat32, 11), make_input({3}, kFloat32, 12), true);
  add("0-d x 0-d float32", make_input({}, kFloat32, 13, 0.5, 3), make_input({}, kFloat32, 14), true);
  add("negative base, integral exponents", kiln::tensor<double>({-2, -1.5, -3, 0}, {4}, kFloat64),
      kiln::tensor<double>({2, 3, -1, 2}, {4}, kFloat64), true);
  v.back().grad_inputs = {0};  // d/db a^b = a^b log(a) is NaN for a < 0, in torch too
  OpSample o;
  o.name = "Scalar exponent, Scalar base, float_power_";
  o.inputs = {make_input({3, 4}, kFloat32, 15, 0.5, 3)};
  o.fn = [](const TensorList& in) {
    Tensor y = in[0].to(kFloat64);
    y.float_power_(2.5);
    return TensorList{kiln::float_power(in[0], Scalar(2.5)), kiln::float_power(Scalar(2), in[0]), y};
  };
  o.reference = [](const TensorList& in) {
    Ref a = Ref::of(in[0]);
    Ref p = ref_map(a, [](double x) { return std::pow(x, 2.5); });
    return TensorList{p.to(kFloat64), ref_map(a, [](double x) { return std::pow(2.0, x); }).to(kFloat64), p.to(kFloat64)};
  };
  o.check_grad = false;
  v.push_back(o);
  return v;
}
std::vector<ErrorSample> float_power_errors() {
  return {{"shape mismatch", [] { kiln::float_power(filled(2, 1, kFloat32), filled(3, 1, kFloat32)); }, "must match the size"},
          {"float32 self in place", [] { filled(2, 1, kFloat32).float_power_(2); },
           "float_power_: the base given to float_power_ has dtype float32 but the operation's result requires dtype float64"}};
}
KILN_OP_SAMPLES(nextafter, nextafter_samples, nextafter_errors);
KILN_OP_SAMPLES(heaviside, heaviside_samples, heaviside_errors);
KILN_OP_SAMPLES(float_power, float_power_samples, float_power_errors);

}  // namespace
}  // namespace kiln::test
