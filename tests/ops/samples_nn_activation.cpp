// Samples for the pointwise activations of activation.cpp (Note [Op samples]), against float64
// references written from torch's formulas.
#include <cmath>

#include "kiln/compile.h"
#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;
namespace F = kiln::nn::functional;

using UnaryFn = std::function<Tensor(const Tensor&)>;
using RefFn = std::function<double(double)>;

OpSample unary(std::string name, Tensor x, UnaryFn fn, RefFn ref, DType out, bool grad = true) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = {std::move(x)};
  s.fn = [fn](const TensorList& in) { return TensorList{fn(in[0])}; };
  s.reference = [ref, out](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), ref).to(out)}; };
  s.check_grad = grad;
  if (in_reduced(out)) s.atol = 2e-3;
  return s;
}

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

}  // namespace
}  // namespace kiln::test
