// Samples for the pointwise activations of activation.cpp (Note [Op samples]), against float64
// references written from torch's formulas.
#include <cmath>
#include <map>
#include <tuple>

#include "kiln/compile.h"
#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;
namespace F = kiln::nn::functional;


// The cases every floating activation gets: each float dtype, non-contiguous, empty, 0-d, a
// large input (the parallel loops) and the special values (values only).
std::vector<OpSample> float_cases(uint64_t seed, double lo, double hi, const UnaryFn& fn, const RefFn& ref) {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes)
    v.push_back(unary(dname(t) + " [3,4]", make_input({3, 4}, t, ++seed, lo, hi), fn, ref, t, t == kFloat32));
  v.push_back(unary("noncontig float32 [4,3]", make_input({4, 3}, kFloat32, ++seed, lo, hi, true), fn, ref, kFloat32));
  v.push_back(unary("noncontig float64 [2,3,4]", make_input({2, 3, 4}, kFloat64, ++seed, lo, hi, true), fn, ref,
                    kFloat64, false));
  v.push_back(unary("empty float32 [0,3]", make_input({0, 3}, kFloat32, ++seed, lo, hi), fn, ref, kFloat32));
  v.push_back(unary("0-d float64", make_input({}, kFloat64, ++seed, lo, hi), fn, ref, kFloat64));
  v.push_back(unary("large float32 [70000]", make_input({70000}, kFloat32, ++seed, lo, hi), fn, ref, kFloat32, false));
  Tensor sp = kiln::tensor<double>({kNan, kInf, -kInf, 0.0, -0.0, 1.0, -1.0}, {7}, kFloat64);
  v.push_back(unary("special values float64", sp, fn, ref, kFloat64, false));
  v.push_back(unary("special values float32", sp.to(kFloat32), fn, ref, kFloat32, false));
  return v;
}

// d/dx of fn at each element of x (float64), by autograd.
std::vector<double> grad_at(const UnaryFn& fn, std::vector<double> xs) {
  Tensor x = kiln::tensor<double>(xs, {static_cast<int64_t>(xs.size())}, kFloat64).requires_grad_();
  fn(x).sum().backward();
  return x.grad().to_vector<double>();
}
void expect_same_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i]))
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": got " << got[i];
    else
      EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::abs(want[i]))) << "element " << i;
  }
}

// ---- hardtanh (and relu6 = hardtanh(x, 0, 6)) ----
double clamp_ref(double x, double lo, double hi) { return std::isnan(x) ? x : std::min(std::max(x, lo), hi); }
RefFn hardtanh_ref(double lo, double hi) {
  return [lo, hi](double x) { return clamp_ref(x, lo, hi); };
}

std::vector<OpSample> hardtanh_samples() {
  UnaryFn dflt = [](const Tensor& x) { return kiln::hardtanh(x); };
  std::vector<OpSample> v = float_cases(900, -3, 3, dflt, hardtanh_ref(-1, 1));
  UnaryFn custom = [](const Tensor& x) { return kiln::hardtanh(x, -0.5, 2.0); };
  v.push_back(unary("min_val=-0.5 max_val=2 float32", make_input({3, 4}, kFloat32, 920, -3, 3), custom,
                    hardtanh_ref(-0.5, 2), kFloat32));
  UnaryFn r6 = [](const Tensor& x) { return F::relu6(x); };
  for (DType t : kFloatTypes)
    v.push_back(
        unary("relu6 " + dname(t), make_input({3, 5}, t, 921, -3, 9), r6, hardtanh_ref(0, 6), t, t == kFloat32));
  v.push_back(unary("relu6 noncontig float64", make_input({4, 3}, kFloat64, 922, -3, 9, true), r6, hardtanh_ref(0, 6),
                    kFloat64));
  // Values at and around the bounds, NaN and infinities (no gradcheck across the kinks).
  Tensor edges = kiln::tensor<double>({kNan, -kInf, -1, 0, 3, 6, 6.5, kInf}, {8}, kFloat32);
  v.push_back(unary("relu6 bounds and special values", edges, r6, hardtanh_ref(0, 6), kFloat32, false));
  // Integer inputs keep their dtype; the bounds are truncated (torch's hardtanh_out).
  for (DType t : {kInt64, kInt32, DType::Int16, DType::Int8})
    v.push_back(unary("relu6 " + dname(t), make_input({6}, t, 923, -4, 9), r6, hardtanh_ref(0, 6), t));
  v.push_back(unary("uint8 relu6", make_input({6}, DType::UInt8, 924, 0, 9), r6, hardtanh_ref(0, 6), DType::UInt8));
  v.push_back(unary(
      "int32 bounds -1.5, 1.5 truncate to -1, 1", make_input({7}, kInt32, 925, -4, 4),
      [](const Tensor& x) { return kiln::hardtanh(x, -1.5, 1.5); }, hardtanh_ref(-1, 1), kInt32));
  v.push_back(unary(
      "min_val > max_val gives max_val", make_input({5}, kFloat64, 926, -3, 3),
      [](const Tensor& x) { return kiln::hardtanh(x, 1.0, -1.0); }, [](double) { return -1.0; }, kFloat64, false));
  // In place (the in-place path clones what the node saves, so gradients stay right).
  v.push_back(unary(
      "hardtanh_ in place", make_input({3, 4}, kFloat32, 927, -3, 3),
      [](const Tensor& x) {
        Tensor y = x.clone();
        kiln::hardtanh_(y, -0.5, 0.5);
        return y;
      },
      hardtanh_ref(-0.5, 0.5), kFloat32));
  v.push_back(unary(
      "relu6 inplace=true", make_input({3, 4}, kFloat64, 928, -3, 9),
      [](const Tensor& x) {
        Tensor y = x * 1.0;
        Tensor r = F::relu6(y, true);
        EXPECT_TRUE(r.is_same(y)) << "inplace returns its input";
        return r;
      },
      hardtanh_ref(0, 6), kFloat64));
  v.push_back(unary(
      "nn::Hardtanh(-2, 2)", make_input({2, 3}, kFloat32, 929, -3, 3),
      [](const Tensor& x) { return kiln::nn::Hardtanh(-2, 2).forward(x); }, hardtanh_ref(-2, 2), kFloat32));
  v.push_back(unary(
      "nn::ReLU6", make_input({2, 3}, kFloat32, 930, -3, 9),
      [](const Tensor& x) { return kiln::nn::ReLU6().forward(x); }, hardtanh_ref(0, 6), kFloat32));
  return v;
}
std::vector<ErrorSample> hardtanh_errors() {
  return {
      {"undefined", [] { kiln::hardtanh(Tensor()); }, "hardtanh: expected a defined input"},
      {"bool", [] { F::relu6(filled(2, 1, DType::Bool)); }, "hardtanh: Bool inputs not supported"},
      {"uint8 negative min", [] { kiln::hardtanh(filled(2, 1, DType::UInt8)); },
       "hardtanh: cannot do hardtanh on an unsigned type with negative limits"},
      {"int8 bound out of range", [] { kiln::hardtanh(filled(2, 1, DType::Int8), 0, 300); },
       "cannot be converted to type"},
      {"module max <= min", [] { kiln::nn::Hardtanh(1.0, 1.0); }, "Hardtanh: max_val (1) must be greater"},
  };
}
KILN_OP_SAMPLES(hardtanh, hardtanh_samples, hardtanh_errors);

TEST(Hardtanh, GradientAtTheBoundsAndNaN) {
  // torch: no gradient at min_val and max_val or beyond; a NaN passes it.
  expect_same_values(grad_at([](const Tensor& x) { return kiln::hardtanh(x); }, {kNan, -1, 1, 0.5, -2, 2}),
                     {1, 0, 0, 1, 0, 0});
  expect_same_values(grad_at([](const Tensor& x) { return F::relu6(x); }, {kNan, 0, 6, 3, 7, -1}), {1, 0, 0, 1, 0, 0});
}

TEST(Hardtanh, Relu6CapturesOneHardtanhNode) {
  // A compiled relu6 is one node (it was five pointwise ops), forward and backward.
  auto out = explain([](const Tensor& x) { return F::relu6(x); }, make_input({4, 5}, kFloat32, 1, -3, 9));
  ASSERT_EQ(out.stats.ops_per_graph.size(), 1u) << out.str();
  EXPECT_EQ(out.stats.ops_per_graph[0], 1u) << out.str();
  EXPECT_NE(out.str().find("hardtanh("), std::string::npos) << out.str();
}

TEST(Hardtanh, ModuleRepr) {
  EXPECT_EQ(kiln::nn::Hardtanh().extra_repr(), "min_val=-1.0, max_val=1.0");
  EXPECT_EQ(kiln::nn::Hardtanh(0, 6, true).extra_repr(), "min_val=0.0, max_val=6.0, inplace=True");
}

// ---- the floating-only unary activations ----
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double softplus_ref(double x, double beta, double threshold) {
  return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta;
}
RefFn elu_ref(double alpha, double scale = 1, double input_scale = 1) {
  return [=](double x) { return x <= 0 ? std::expm1(x * input_scale) * alpha * scale : x * scale; };
}
double hardsigmoid_ref(double x) { return clamp_ref(x + 3, 0, 6) / 6; }
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

struct ActSpec {
  UnaryFn fn;
  RefFn ref;
  double lo, hi;
  // Extra samples: other arguments, the functional and module forms, in place.
  std::vector<std::tuple<std::string, UnaryFn, RefFn>> variants;
};

// An in-place form applied to a non-leaf copy (so gradcheck differentiates through it).
UnaryFn in_place(std::function<void(Tensor&)> f) {
  return [f](const Tensor& x) {
    Tensor y = x * 1.0;
    f(y);
    return y;
  };
}

const std::map<OpId, ActSpec>& act_specs() {
  static const std::map<OpId, ActSpec> m = {
      {OpId::leaky_relu,
       {[](const Tensor& x) { return kiln::leaky_relu(x); },
        [](double x) { return x > 0 ? x : 0.01 * x; },
        -3,
        3,
        {{"negative_slope=0.2", [](const Tensor& x) { return F::leaky_relu(x, 0.2); },
          [](double x) { return x > 0 ? x : 0.2 * x; }},
         {"leaky_relu_ in place", in_place([](Tensor& y) { kiln::leaky_relu_(y, 0.1); }),
          [](double x) { return x > 0 ? x : 0.1 * x; }},
         {"nn::LeakyReLU(0.3, inplace)",
          [](const Tensor& x) { return kiln::nn::LeakyReLU(0.3, true).forward(x * 1.0); },
          [](double x) { return x > 0 ? x : 0.3 * x; }}}}},
      {OpId::elu,
       {[](const Tensor& x) { return kiln::elu(x); },
        elu_ref(1),
        -3,
        3,
        {{"alpha=0.5", [](const Tensor& x) { return F::elu(x, 0.5); }, elu_ref(0.5)},
         {"F::elu inplace", [](const Tensor& x) { return F::elu(x * 1.0, 2.0, true); }, elu_ref(2)},
         {"nn::ELU(1.5)", [](const Tensor& x) { return kiln::nn::ELU(1.5).forward(x); }, elu_ref(1.5)},
         {"selu", [](const Tensor& x) { return kiln::selu(x); }, elu_ref(kSeluAlpha, kSeluScale)},
         {"selu_ in place", in_place([](Tensor& y) { kiln::selu_(y); }), elu_ref(kSeluAlpha, kSeluScale)},
         {"nn::SELU", [](const Tensor& x) { return kiln::nn::SELU().forward(x); }, elu_ref(kSeluAlpha, kSeluScale)},
         {"celu alpha=1", [](const Tensor& x) { return F::celu(x); }, elu_ref(1, 1, 1)},
         {"celu alpha=2 (x / alpha inside)", [](const Tensor& x) { return kiln::celu(x, 2.0); }, elu_ref(2, 1, 0.5)},
         {"celu_ in place", in_place([](Tensor& y) { kiln::celu_(y, 0.5); }), elu_ref(0.5, 1, 2)},
         {"nn::CELU(0.7, inplace)", [](const Tensor& x) { return kiln::nn::CELU(0.7, true).forward(x * 1.0); },
          elu_ref(0.7, 1, 1 / 0.7)}}}},
      {OpId::softplus,
       {[](const Tensor& x) { return kiln::softplus(x); },
        [](double x) { return softplus_ref(x, 1, 20); },
        -4,
        4,
        {{"beta=2 threshold=3 (linear above)", [](const Tensor& x) { return F::softplus(x, 2, 3); },
          [](double x) { return softplus_ref(x, 2, 3); }},
         {"nn::Softplus(0.5, 1)", [](const Tensor& x) { return kiln::nn::Softplus(0.5, 1).forward(x); },
          [](double x) { return softplus_ref(x, 0.5, 1); }}}}},
      {OpId::hardsigmoid,
       {[](const Tensor& x) { return kiln::hardsigmoid(x); },
        hardsigmoid_ref,
        -5,
        5,
        {{"hardsigmoid_ in place", in_place([](Tensor& y) { kiln::hardsigmoid_(y); }), hardsigmoid_ref},
         {"nn::Hardsigmoid(inplace)", [](const Tensor& x) { return kiln::nn::Hardsigmoid(true).forward(x * 1.0); },
          hardsigmoid_ref}}}},
      {OpId::hardswish,
       {[](const Tensor& x) { return kiln::hardswish(x); },
        [](double x) { return x * clamp_ref(x + 3, 0, 6) / 6; },
        -5,
        5,
        {{"F::hardswish inplace", [](const Tensor& x) { return F::hardswish(x * 1.0, true); },
          [](double x) { return x * clamp_ref(x + 3, 0, 6) / 6; }},
         {"nn::Hardswish", [](const Tensor& x) { return kiln::nn::Hardswish().forward(x); },
          [](double x) { return x * clamp_ref(x + 3, 0, 6) / 6; }}}}},
      {OpId::mish,
       {[](const Tensor& x) { return kiln::mish(x); },
        [](double x) { return x * std::tanh(std::log1p(std::exp(x))); },
        -4,
        4,
        {{"mish_ in place", in_place([](Tensor& y) { kiln::mish_(y); }),
          [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }},
         {"nn::Mish", [](const Tensor& x) { return kiln::nn::Mish().forward(x); },
          [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }}}}},
      {OpId::logsigmoid,
       {[](const Tensor& x) { return kiln::logsigmoid(x); },
        [](double x) { return std::min(x, 0.0) - std::log1p(std::exp(-std::abs(x))); },
        -6,
        6,
        {{"large magnitudes (no overflow)", [](const Tensor& x) { return F::logsigmoid(x * 40.0); },
          [](double x) { return std::min(40 * x, 0.0) - std::log1p(std::exp(-std::abs(40 * x))); }},
         {"nn::LogSigmoid", [](const Tensor& x) { return kiln::nn::LogSigmoid().forward(x); },
          [](double x) { return std::log(sigmoid_ref(x)); }}}}},
  };
  return m;
}

std::vector<OpSample> act_samples(OpId op) {
  const ActSpec& a = act_specs().at(op);
  uint64_t seed = 1000 + static_cast<uint64_t>(op) * 50;
  std::vector<OpSample> v = float_cases(seed, a.lo, a.hi, a.fn, a.ref);
  for (const auto& [name, fn, ref] : a.variants) {
    v.push_back(unary(name + " float32", make_input({3, 4}, kFloat32, ++seed, a.lo, a.hi), fn, ref, kFloat32));
    v.push_back(unary(name + " bfloat16", make_input({3, 4}, DType::BFloat16, ++seed, a.lo, a.hi), fn, ref,
                      DType::BFloat16, false));
  }
  return v;
}
std::vector<ErrorSample> act_errors(OpId op) {
  UnaryFn fn = act_specs().at(op).fn;
  std::string name = op_name(op);
  std::vector<ErrorSample> e = {
      {"undefined", [fn] { fn(Tensor()); }, name + ": expected a defined input"},
      {"int64", [fn] { fn(filled(2, 1, kInt64)); }, name + ": expected a floating point tensor"},
      {"bool", [fn] { fn(filled(2, 1, DType::Bool)); }, name + ": expected a floating point tensor"}};
  if (op == OpId::elu) {
    e.push_back({"celu alpha=0", [] { kiln::celu(filled(2, 1, kFloat32), 0.0); }, "celu: ZeroDivisionError"});
    e.push_back({"selu of int64", [] { kiln::selu(filled(2, 1, kInt64)); }, "elu: expected a floating point tensor"});
  }
  return e;
}

#define KILN_ACT_SAMPLES(op)                                              \
  std::vector<OpSample> samples_##op() { return act_samples(OpId::op); }  \
  std::vector<ErrorSample> errors_##op() { return act_errors(OpId::op); } \
  KILN_OP_SAMPLES(op, samples_##op, errors_##op);

KILN_ACT_SAMPLES(leaky_relu)
KILN_ACT_SAMPLES(elu)
KILN_ACT_SAMPLES(softplus)
KILN_ACT_SAMPLES(hardsigmoid)
KILN_ACT_SAMPLES(hardswish)
KILN_ACT_SAMPLES(mish)
KILN_ACT_SAMPLES(logsigmoid)

// ---- softsign: x / (1 + |x|); integer inputs give the default float dtype ----
std::vector<OpSample> softsign_samples() {
  RefFn ref = [](double x) { return x / (1 + std::abs(x)); };
  UnaryFn fn = [](const Tensor& x) { return kiln::softsign(x); };
  std::vector<OpSample> v = float_cases(1900, -4, 4, fn, ref);
  for (DType t : {kInt64, kInt32, DType::UInt8})
    v.push_back(unary(dname(t) + " gives float32", make_input({5}, t, 1920, 0, 9), fn, ref, kFloat32));
  v.push_back(unary("bool gives float32", make_input({5}, DType::Bool, 1921), fn, ref, kFloat32));
  v.push_back(unary(
      "nn::Softsign", make_input({2, 3}, kFloat64, 1922),
      [](const Tensor& x) { return kiln::nn::Softsign().forward(x); }, ref, kFloat64));
  return v;
}
std::vector<ErrorSample> softsign_errors() {
  return {{"undefined", [] { kiln::softsign(Tensor()); }, "softsign: expected a defined input"}};
}
KILN_OP_SAMPLES(softsign, softsign_samples, softsign_errors);

// ---- glu: the first half along dim times the sigmoid of the second ----
Ref glu_ref(const Ref& x, int64_t dim) {
  int64_t d = dim < 0 ? dim + x.dim() : dim, h = x.shape[d] / 2;
  Shape os = x.shape;
  os[d] = h;
  Ref out(os);
  for (int64_t i = 0; i < out.numel(); ++i) {
    Shape idx = unravel(i, os);
    double a = x.at(idx);
    idx[d] += h;
    out.v[i] = a * sigmoid_ref(x.at(idx));
  }
  return out;
}
std::vector<OpSample> glu_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, int64_t dim, std::function<Tensor(const Tensor&)> fn, bool grad = true) {
    OpSample s;
    s.name = std::move(name);
    DType t = x.dtype();
    s.inputs = {std::move(x)};
    s.fn = [fn](const TensorList& in) { return TensorList{fn(in[0])}; };
    s.reference = [dim, t](const TensorList& in) { return TensorList{glu_ref(Ref::of(in[0]), dim).to(t)}; };
    s.check_grad = grad;
    if (in_reduced(t)) s.atol = 2e-3;
    v.push_back(std::move(s));
  };
  uint64_t seed = 2000;
  for (DType t : kFloatTypes)
    add(
        "dim -1 [3,4] " + dname(t), make_input({3, 4}, t, ++seed, -3, 3), -1,
        [](const Tensor& x) { return kiln::glu(x); }, t == kFloat32);
  add("dim 0 [4,3] float64", make_input({4, 3}, kFloat64, ++seed, -3, 3), 0,
      [](const Tensor& x) { return F::glu(x, 0); });
  add("dim 1 noncontig [2,6,3]", make_input({2, 6, 3}, kFloat32, ++seed, -3, 3, true), 1,
      [](const Tensor& x) { return kiln::glu(x, 1); });
  add("1-D [6]", make_input({6}, kFloat64, ++seed, -3, 3), 0, [](const Tensor& x) { return kiln::glu(x, 0); });
  add("empty [0,4]", make_input({0, 4}, kFloat32, ++seed), -1, [](const Tensor& x) { return kiln::glu(x); });
  add("nn::GLU(1)", make_input({2, 4, 2}, kFloat32, ++seed, -3, 3), 1,
      [](const Tensor& x) { return kiln::nn::GLU(1).forward(x); });
  return v;
}
std::vector<ErrorSample> glu_errors() {
  return {{"odd dim",
           [] {
             kiln::glu(make_input({2, 3}, kFloat32, 1));
           },
           "glu: Halving dimension must be even, but dimension 1 is size 3"},
          {"0-d", [] { kiln::glu(make_input({}, kFloat32, 1)); }, "glu: glu does not support scalars"},
          {"dim out of range",
           [] {
             kiln::glu(make_input({2, 4}, kFloat32, 1), 2);
           },
           "out of range"},
          {"int64",
           [] {
             kiln::glu(make_input({2, 4}, kInt64, 1));
           },
           "glu: expected a floating point tensor"}};
}
KILN_OP_SAMPLES(glu, glu_samples, glu_errors);

// ---- prelu: x > 0 ? x : weight[c] * x, c the index along dim 1 (or one shared weight) ----
Ref prelu_ref(const Ref& x, const Ref& w) {
  Ref out = x;
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = 0;
    if (w.numel() > 1) c = unravel(i, x.shape)[1];
    double a = x.v[i];
    out.v[i] = a > 0 ? a : w.v[c] * a;
  }
  return out;
}
std::vector<OpSample> prelu_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, Tensor w) {
    OpSample s;
    s.name = std::move(name);
    DType t = x.dtype();
    s.inputs = {std::move(x), std::move(w)};
    s.fn = [](const TensorList& in) { return TensorList{F::prelu(in[0], in[1])}; };
    s.reference = [t](const TensorList& in) { return TensorList{prelu_ref(Ref::of(in[0]), Ref::of(in[1])).to(t)}; };
    if (in_reduced(t)) s.atol = 2e-3;
    v.push_back(std::move(s));
  };
  const uint64_t seed = 2100;
  for (DType t : kFloatTypes)
    add("per channel [2,3,4] " + dname(t), make_input({2, 3, 4}, t, seed + 1, -3, 3),
        make_input({3}, t, seed + 2, 0, 1));
  add("one weight [2,3,2,2]", make_input({2, 3, 2, 2}, kFloat64, seed + 3, -3, 3),
      make_input({1}, kFloat64, seed + 4, 0, 1));
  add("0-d weight, 1-D input", make_input({5}, kFloat64, seed + 5, -3, 3), make_input({}, kFloat64, seed + 6, 0, 1));
  add("0-d input", make_input({}, kFloat64, seed + 7, -3, -1), make_input({1}, kFloat64, seed + 8, 0, 1));
  add("noncontig per channel", make_input({3, 4}, kFloat32, seed + 9, -3, 3, true).t(),
      make_input({3}, kFloat32, seed + 10, 0, 1));
  add("empty [0,3]", make_input({0, 3}, kFloat32, seed + 11), make_input({3}, kFloat32, seed + 12, 0, 1));
  return v;
}
std::vector<ErrorSample> prelu_errors() {
  Tensor x = make_input({2, 3}, kFloat32, 1);
  return {
      {"channel mismatch", [x] { kiln::prelu(x, make_input({2}, kFloat32, 2)); },
       "prelu: Mismatch of parameter numbers and input channel size. Found parameter numbers = 2 and channel size = 3"},
      {"2-D weight",
       [x] {
         kiln::prelu(x, make_input({3, 1}, kFloat32, 2));
       },
       "prelu: Expected `weight` to be a scalar or 1D"},
      {"dtype mismatch", [x] { kiln::prelu(x, make_input({3}, kFloat64, 2)); },
       "prelu: expected weight of the input's dtype"},
      {"int64 input",
       [] {
         kiln::prelu(make_input({2, 3}, kInt64, 1), make_input({3}, kInt64, 2));
       },
       "prelu: expected a floating point input"}};
}
KILN_OP_SAMPLES(prelu, prelu_samples, prelu_errors);

TEST(Activations, GradientsAtTheKinksAsTorch) {
  // torch's masks: leaky_relu takes the slope at 0 and for a NaN; hardsigmoid has none at +-3 or
  // for a NaN; hardswish is 0 below -3, x/3 + 1/2 on [-3, 3], 1 above and for a NaN; elu's
  // negative branch holds at 0.
  expect_same_values(grad_at([](const Tensor& x) { return kiln::leaky_relu(x, 0.1); }, {kNan, 0, 1, -1}),
                     {0.1, 0.1, 1, 0.1});
  expect_same_values(grad_at([](const Tensor& x) { return kiln::hardsigmoid(x); }, {kNan, -3, 3, 0, 4}),
                     {0, 0, 0, 1.0 / 6, 0});
  expect_same_values(grad_at([](const Tensor& x) { return kiln::hardswish(x); }, {kNan, -3, 3, 0, 4, -4}),
                     {1, -0.5, 1.5, 0.5, 1, 0});
  expect_same_values(grad_at([](const Tensor& x) { return kiln::elu(x, 2.0); }, {0, 1, -1}),
                     {2, 1, 2 * std::exp(-1.0)});
  expect_same_values(grad_at([](const Tensor& x) { return kiln::softplus(x, 1, 20); }, {21, 0}), {1, 0.5});
}

TEST(Activations, ModuleReprsAndParameters) {
  EXPECT_EQ(kiln::nn::LeakyReLU().extra_repr(), "negative_slope=0.01");
  EXPECT_EQ(kiln::nn::LeakyReLU(0.2, true).extra_repr(), "negative_slope=0.2, inplace=True");
  EXPECT_EQ(kiln::nn::ELU().extra_repr(), "alpha=1.0");
  EXPECT_EQ(kiln::nn::CELU(0.5).extra_repr(), "alpha=0.5");
  EXPECT_EQ(kiln::nn::SELU(true).extra_repr(), "inplace=True");
  EXPECT_EQ(kiln::nn::Softplus().extra_repr(), "beta=1, threshold=20");
  EXPECT_EQ(kiln::nn::GLU().extra_repr(), "dim=-1");
  kiln::nn::PReLU p(4);
  EXPECT_EQ(p.extra_repr(), "num_parameters=4");
  auto params = p.named_parameters();
  ASSERT_EQ(params.size(), 1u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[0].second.sizes().vec(), (std::vector<int64_t>{4}));
  EXPECT_EQ(params[0].second.to_vector<double>(), (std::vector<double>(4, 0.25)));
  // The weight learns: its gradient is sum(x * g) over the negative inputs of its channel.
  kiln::nn::PReLU one;
  Tensor x = kiln::tensor<double>({-1, 2, -3}, {3}, kFloat64).to(kFloat32);
  one.forward(x).sum().backward();
  EXPECT_NEAR(one.weight.grad().to_vector<double>()[0], -4.0, 1e-6);
}
}  // namespace
}  // namespace kiln::test
