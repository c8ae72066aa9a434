// Samples for the activations and dropout variants of src/ops/activation_extra.cpp
// (Note [Op samples]): float64 references written from torch's formulas; the random ops get
// structural checks and a gradcheck with a fixed generator.
#include <cmath>

#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;


// Every float dtype, non-contiguous, empty, 0-d and the special values (values only).
std::vector<OpSample> float_cases(uint64_t seed, const UnaryFn& fn, const RefFn& ref) {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes)
    v.push_back(unary(dname(t) + " [3,4]", make_input({3, 4}, t, ++seed, -2, 2), fn, ref, t, t == kFloat64));
  v.push_back(unary("noncontig float64 [4,3]", make_input({4, 3}, kFloat64, ++seed, -2, 2, true), fn, ref, kFloat64));
  v.push_back(unary("empty float32 [0,3]", make_input({0, 3}, kFloat32, ++seed), fn, ref, kFloat32));
  v.push_back(unary("0-d float64", make_input({}, kFloat64, ++seed), fn, ref, kFloat64));
  Tensor sp = kiln::tensor<double>({kNan, kInf, -kInf, 0.0, -0.0, 0.5, -0.5, 1.0, -1.0}, {9}, kFloat64);
  v.push_back(unary("special values float64", sp, fn, ref, kFloat64, false));
  v.push_back(unary("special values float32", sp.to(kFloat32), fn, ref, kFloat32, false));
  return v;
}

std::vector<ErrorSample> float_only_errors(const std::string& name, UnaryFn fn) {
  return {{"undefined", [fn] { fn(Tensor()); }, name + ": expected a defined input"},
          {"int64", [fn] { fn(filled(2, 1, kInt64)); }, name + ": expected a floating point tensor, got dtype"}};
}

// ---- tanhshrink: x - tanh(x); integer inputs give the default float dtype ----
std::vector<OpSample> tanhshrink_samples() {
  RefFn ref = [](double x) { return x - std::tanh(x); };
  UnaryFn fn = [](const Tensor& x) { return kiln::tanhshrink(x); };
  std::vector<OpSample> v = float_cases(3000, fn, ref);
  v.push_back(unary("int64 gives float32", make_input({5}, kInt64, 3010, -4, 4), fn, ref, kFloat32));
  v.push_back(unary(
      "nn::Tanhshrink", make_input({2, 3}, kFloat64, 3011),
      [](const Tensor& x) { return kiln::nn::Tanhshrink().forward(x); }, ref, kFloat64));
  return v;
}
std::vector<ErrorSample> tanhshrink_errors() {
  return {{"undefined", [] { kiln::tanhshrink(Tensor()); }, "tanhshrink: expected a defined input"},
          {"bool", [] { kiln::tanhshrink(filled(2, 1, DType::Bool)); }, "tanhshrink: expected a numeric input"}};
}
KILN_OP_SAMPLES(tanhshrink, tanhshrink_samples, tanhshrink_errors);

// ---- softshrink: x > l ? x - l : x < -l ? x + l : 0; a NaN stays NaN (PyTorch 2.x) ----
RefFn softshrink_ref(double l) {
  return [l](double x) { return std::isnan(x) ? x : x > l ? x - l : x < -l ? x + l : 0.0; };
}
std::vector<OpSample> softshrink_samples() {
  std::vector<OpSample> v = float_cases(
      3100, [](const Tensor& x) { return kiln::softshrink(x); }, softshrink_ref(0.5));
  v.push_back(unary(
      "lambd=1.25 float64", make_input({3, 5}, kFloat64, 3110, -3, 3),
      [](const Tensor& x) { return kiln::softshrink(x, 1.25); }, softshrink_ref(1.25), kFloat64));
  v.push_back(unary(
      "lambd=0 is the identity", make_input({4}, kFloat64, 3111),
      [](const Tensor& x) { return kiln::softshrink(x, 0.0); }, softshrink_ref(0), kFloat64));
  v.push_back(unary(
      "nn::Softshrink(0.3)", make_input({2, 3}, kFloat64, 3112),
      [](const Tensor& x) { return kiln::nn::Softshrink(0.3).forward(x); }, softshrink_ref(0.3), kFloat64));
  return v;
}
std::vector<ErrorSample> softshrink_errors() {
  auto e = float_only_errors("softshrink", [](const Tensor& x) { return kiln::softshrink(x); });
  e.push_back({"negative lambd", [] { kiln::softshrink(filled(2, 1, kFloat32), -0.5); },
               "softshrink: lambda must be greater or equal to 0, but found to be -0.5"});
  return e;
}
KILN_OP_SAMPLES(softshrink, softshrink_samples, softshrink_errors);

// ---- hardshrink: -l <= x <= l ? 0 : x ----
RefFn hardshrink_ref(double l) {
  return [l](double x) { return (x >= -l && x <= l) ? 0.0 : x; };
}
std::vector<OpSample> hardshrink_samples() {
  std::vector<OpSample> v = float_cases(
      3200, [](const Tensor& x) { return kiln::hardshrink(x); }, hardshrink_ref(0.5));
  v.push_back(unary(
      "lambd=1.5 float64", make_input({3, 5}, kFloat64, 3210, -3, 3),
      [](const Tensor& x) { return kiln::hardshrink(x, 1.5); }, hardshrink_ref(1.5), kFloat64));
  v.push_back(unary(
      "negative lambd zeroes nothing", make_input({6}, kFloat64, 3211),
      [](const Tensor& x) { return kiln::hardshrink(x, -1.0); }, hardshrink_ref(-1), kFloat64));
  v.push_back(unary(
      "nn::Hardshrink(0.2)", make_input({2, 3}, kFloat64, 3212),
      [](const Tensor& x) { return kiln::nn::Hardshrink(0.2).forward(x); }, hardshrink_ref(0.2), kFloat64));
  return v;
}
std::vector<ErrorSample> hardshrink_errors() {
  return float_only_errors("hardshrink", [](const Tensor& x) { return kiln::hardshrink(x); });
}
KILN_OP_SAMPLES(hardshrink, hardshrink_samples, hardshrink_errors);

// ---- rrelu: eval: leaky_relu with (lower + upper) / 2; training: a slope in [lower, upper] ----
RefFn leaky_ref(double slope) {
  return [slope](double x) { return x > 0 ? x : x * slope; };
}
std::vector<OpSample> rrelu_samples() {
  std::vector<OpSample> v;
  for (DType t : kFloatTypes)
    v.push_back(unary(
        "eval " + dname(t), make_input({3, 4}, t, 3300 + static_cast<int>(t)),
        [](const Tensor& x) { return kiln::rrelu(x); }, leaky_ref((1.0 / 8 + 1.0 / 3) / 2), t, t == kFloat64));
  v.push_back(unary(
      "eval lower=0.1 upper=0.5 noncontig", make_input({4, 3}, kFloat64, 3310, -2, 2, true),
      [](const Tensor& x) { return kiln::rrelu(x, 0.1, 0.5, false); }, leaky_ref(0.3), kFloat64));
  v.push_back(unary(
      "eval 0-d", make_input({}, kFloat64, 3311, -2, -1), [](const Tensor& x) { return kiln::rrelu(x); },
      leaky_ref((1.0 / 8 + 1.0 / 3) / 2), kFloat64));
  v.push_back(unary(
      "training empty", make_input({0, 2}, kFloat32, 3312),
      [](const Tensor& x) { return kiln::rrelu(x, 0.1, 0.3, true); }, leaky_ref(0), kFloat32));
  v.push_back(unary(
      "training lower == upper is leaky_relu", make_input({3, 4}, kFloat64, 3313),
      [](const Tensor& x) { return kiln::rrelu(x, 0.25, 0.25, true); }, leaky_ref(0.25), kFloat64));
  for (DType t : {kFloat32, kFloat64, DType::BFloat16}) {
    OpSample s;  // a fixed generator makes the slopes constants: values checked, gradient checked
    s.name = "training slopes in [lower, upper] " + dname(t);
    s.inputs = {make_input({40, 50}, t, 3320, -2, 2)};
    s.fn = [](const TensorList& in) {
      Generator g(11);
      return TensorList{kiln::rrelu(in[0], 0.1, 0.4, true, &g)};
    };
    s.compare_values = false;
    s.check_grad = t == kFloat64;
    s.check = [x = s.inputs[0]](const TensorList& o) {
      auto xv = x.to_vector<double>(), ov = o[0].to_vector<double>();
      double lo = 1, hi = 0;
      for (size_t i = 0; i < xv.size(); ++i) {
        if (xv[i] >= 0) {
          EXPECT_EQ(ov[i], xv[i]);
        } else {
          double r = ov[i] / xv[i];
          lo = std::min(lo, r);
          hi = std::max(hi, r);
        }
      }
      EXPECT_GE(lo, 0.1 - 1e-2);
      EXPECT_LE(hi, 0.4 + 1e-2);
      EXPECT_GT(hi - lo, 0.2) << "slopes spread over [lower, upper]";
      Generator g(11);
      EXPECT_EQ(kiln::rrelu(x, 0.1, 0.4, true, &g).to_vector<double>(), ov) << "same generator state, same slopes";
    };
    v.push_back(s);
  }
  return v;
}
std::vector<ErrorSample> rrelu_errors() {
  auto e = float_only_errors("rrelu", [](const Tensor& x) { return kiln::rrelu(x); });
  e.push_back({"lower > upper", [] { kiln::rrelu(filled(2, 1, kFloat32), 0.5, 0.1, true); },
               "rrelu: Lower bound should be less than or equal to the upper bound"});
  return e;
}
KILN_OP_SAMPLES(rrelu, rrelu_samples, rrelu_errors);

// ---- softmin: softmax(-x) ----
std::vector<OpSample> softmin_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, int64_t dim, std::optional<DType> dt = std::nullopt, bool grad = true) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [=](const TensorList& in) { return TensorList{softmin(in[0], dim, dt)}; };
    s.reference = [=](const TensorList& in) {
      Ref a = ref_map(Ref::of(in[0]), [](double v) { return -v; });
      int64_t d = a.dim() == 0 ? 0 : (dim < 0 ? dim + a.dim() : dim);
      for_rows(a, d, [&](std::vector<double>& r) { softmax_row(r, false); });
      return TensorList{a.to(dt.value_or(in[0].dtype()))};
    };
    s.check_grad = grad;
    if (in_reduced(dt.value_or(x.dtype()))) s.atol = 2e-3;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) {
    add("[3,5] dim -1 " + dname(t), make_input({3, 5}, t, 3400), -1);
    add("[2,3,4] dim 1 noncontig " + dname(t), make_input({2, 3, 4}, t, 3401, -3, 3, true), 1);
  }
  add("0-d", make_input({}, kFloat64, 3402), 0);
  add("empty [0,3]", make_input({0, 3}, kFloat32, 3403), 1);
  add("int64 input with dtype=float64", make_input({2, 4}, kInt64, 3404, -5, 5), 1, kFloat64);
  add("large values", make_input({2, 3}, kFloat32, 3405, -1000, 1000), 1, std::nullopt, false);
  OpSample m;
  m.name = "nn::Softmin(0)";
  m.inputs = {make_input({3, 2}, kFloat64, 3406)};
  m.fn = [](const TensorList& in) { return TensorList{kiln::nn::Softmin(0).forward(in[0])}; };
  m.reference = [](const TensorList& in) {
    Ref a = ref_map(Ref::of(in[0]), [](double v) { return -v; });
    for_rows(a, 0, [&](std::vector<double>& r) { softmax_row(r, false); });
    return TensorList{a.to(kFloat64)};
  };
  out.push_back(m);
  return out;
}
std::vector<ErrorSample> softmin_errors() {
  return {{"dim out of range",
           [] {
             softmin(make_input({2, 3}, kFloat32, 1), 2);
           },
           "out of range"},
          {"integer input",
           [] {
             softmin(make_input({2, 3}, kInt64, 1), 1);
           },
           "softmin: expected a floating dtype"}};
}
KILN_OP_SAMPLES(softmin, softmin_samples, softmin_errors);

// ---- gumbel_softmax: rows on the simplex; hard: one-hot with the soft sample's gradient ----
std::vector<OpSample> gumbel_softmax_samples() {
  std::vector<OpSample> v;
  auto add = [&](std::string name, Tensor x, double tau, bool hard, int64_t dim, bool grad) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [=](const TensorList& in) {
      Generator g(5);
      return TensorList{gumbel_softmax(in[0], tau, hard, dim, &g)};
    };
    s.compare_values = false;
    s.check_grad = grad;
    s.check = [=](const TensorList& o) {
      Ref r = Ref::of(o[0]);
      int64_t d = r.dim() == 0 ? 0 : (dim < 0 ? dim + r.dim() : dim);
      for_rows(r, d, [&](std::vector<double>& row) {
        double sum = 0;
        int ones = 0;
        for (double e : row) {
          sum += e;
          EXPECT_GE(e, 0);
          if (e == 1) ++ones;
          if (hard) {
            EXPECT_TRUE(e == 0 || e == 1) << e;
          }
        }
        EXPECT_NEAR(sum, 1, in_reduced(x.dtype()) ? 2e-2 : 1e-5);
        if (hard) {
          EXPECT_EQ(ones, 1);
        }
      });
      Generator g(5);
      EXPECT_EQ(gumbel_softmax(x, tau, hard, dim, &g).to_vector<double>(), o[0].to_vector<double>());
    };
    v.push_back(s);
  };
  for (DType t : kFloatTypes) add("soft [4,5] " + dname(t), make_input({4, 5}, t, 3500), 1.0, false, -1, t == kFloat64);
  add("soft tau=0.5 dim 0 noncontig", make_input({3, 4}, kFloat64, 3501, -2, 2, true), 0.5, false, 0, true);
  add("hard [4,5] float32", make_input({4, 5}, kFloat32, 3502), 1.0, true, -1, false);
  add("hard [2,3,4] dim 1 float64", make_input({2, 3, 4}, kFloat64, 3503), 2.0, true, 1, false);
  add("0-d", make_input({}, kFloat64, 3504), 1.0, true, 0, false);
  add("empty [0,3]", make_input({0, 3}, kFloat32, 3505), 1.0, true, -1, false);
  {
    OpSample s;  // straight-through: hard's gradient is the soft sample's (same noise)
    s.name = "hard's gradient is the soft sample's";
    s.inputs = {make_input({3, 4}, kFloat64, 3506)};
    s.fn = [](const TensorList& in) {
      Generator g(9);
      return TensorList{gumbel_softmax(in[0], 0.7, true, -1, &g)};
    };
    s.compare_values = false;
    s.check_grad = false;
    s.check = [x0 = s.inputs[0]](const TensorList&) {
      Tensor w = make_input({3, 4}, kFloat64, 3507);
      auto grad_of = [&](bool hard) {
        Tensor x = x0.detach().requires_grad_();
        Generator g(9);
        (gumbel_softmax(x, 0.7, hard, -1, &g) * w).sum().backward();
        return x.grad().to_vector<double>();
      };
      auto h = grad_of(true), s = grad_of(false);
      ASSERT_EQ(h.size(), s.size());
      for (size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(h[i], s[i], 1e-12);
    };
    v.push_back(s);
  }
  return v;
}
std::vector<ErrorSample> gumbel_softmax_errors() {
  return {{"integer logits",
           [] {
             gumbel_softmax(make_input({2, 3}, kInt64, 1));
           },
           "gumbel_softmax: expected floating logits, got dtype"},
          {"dim out of range",
           [] {
             gumbel_softmax(make_input({2, 3}, kFloat32, 1), 1, false, 2);
           },
           "out of range"}};
}
KILN_OP_SAMPLES(gumbel_softmax, gumbel_softmax_samples, gumbel_softmax_errors);

// ---- alpha_dropout, feature_alpha_dropout, dropout2d ----
constexpr double kAlpha = 1.7580993408473766;
double alpha_a(double p) { return 1. / std::sqrt((kAlpha * kAlpha * p + 1) * (1 - p)); }

using DropFn = Tensor (*)(const Tensor&, double, bool, Generator*);

// The values each kept / dropped element of a ones input takes.
std::pair<double, double> kept_dropped(OpId op, double p) {
  if (op == OpId::dropout2d) return {1 / (1 - p), 0};
  double a = alpha_a(p);
  return {a + kAlpha * a * p, kAlpha * a * (p - 1)};
}

std::vector<OpSample> dropout_variant_samples(OpId op, DropFn fn) {
  std::vector<OpSample> out;
  bool feature = op != OpId::alpha_dropout;
  for (double p : {0.2, 0.5}) {
    for (DType t : {kFloat32, kFloat64, DType::BFloat16}) {
      for (bool three_d : {false, true}) {
        if (three_d && !feature) continue;
        OpSample s;
        Shape shape = feature ? (three_d ? Shape{40, 50, 3} : Shape{40, 50, 2, 2}) : Shape{4000};
        s.name = "p=" + std::to_string(p) + " " + dname(t) + (three_d ? " (N, C, L)" : "");
        s.inputs = {ones(shape, t)};
        s.fn = [p, fn](const TensorList& in) {
          Generator g(1234);
          return TensorList{fn(in[0], p, true, &g)};
        };
        s.compare_values = false;
        s.check_grad = false;
        s.check = [=](const TensorList& o) {
          auto v = o[0].to_vector<double>();
          auto [kept, dropped] = kept_dropped(op, p);
          kept = Ref({}, kept).to(t).item<double>();
          dropped = Ref({}, dropped).to(t).item<double>();
          double tol = t == DType::BFloat16 ? 2e-2 : 1e-5;
          int64_t n_dropped = 0, per = feature ? static_cast<int64_t>(v.size()) / 2000 : 1;
          for (size_t i = 0; i < v.size(); ++i) {
            bool is_dropped = std::abs(v[i] - dropped) < tol;
            EXPECT_TRUE(is_dropped || std::abs(v[i] - kept) < tol) << v[i];
            n_dropped += is_dropped;
            if (feature && i % per != 0) {
              EXPECT_EQ(v[i], v[i - 1]) << "one draw per channel";
            }
          }
          EXPECT_NEAR(static_cast<double>(n_dropped) / v.size(), p, 0.04) << "fraction dropped";
        };
        out.push_back(s);
      }
    }
  }
  {
    OpSample s;  // a fixed generator makes the mask a constant: gradient x -> mask * scale
    s.name = "same generator state, same mask; gradcheck";
    s.inputs = {make_input(feature ? Shape{3, 4, 2} : Shape{3, 4}, kFloat64, 3600, 0.5, 2.0)};
    s.fn = [fn](const TensorList& in) {
      Generator g(7);
      return TensorList{fn(in[0], 0.4, true, &g)};
    };
    s.compare_values = false;
    s.check = [x = s.inputs[0], fn](const TensorList& o) {
      Generator g(7);
      EXPECT_EQ(fn(x, 0.4, true, &g).to_vector<double>(), o[0].to_vector<double>());
    };
    out.push_back(s);
  }
  // (Nothing dropped, as an empty input or eval, runs no op: the plain test below.)
  auto exact = [&](std::string name, Tensor x, double p, bool train, bool zero) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [=](const TensorList& in) { return TensorList{fn(in[0], p, train, nullptr)}; };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      if (zero) a = Ref(a.shape, 0.0);
      return TensorList{a.to(in[0].dtype())};
    };
    out.push_back(s);
  };
  exact("p=1 gives zeros (as torch)", make_input({3, 5, 2}, kFloat32, 3601, -2, 2, true), 1.0, true, true);
  return out;
}
std::vector<ErrorSample> dropout_variant_errors(OpId op, DropFn fn) {
  std::string name = op_name(op);
  std::vector<ErrorSample> e = {{"p > 1",
                                 [fn] {
                                   fn(make_input({3, 3, 3}, kFloat32, 1), 1.5, true, nullptr);
                                 },
                                 name + ": dropout probability has to be between 0 and 1, but got 1.5"},
                                {"p < 0",
                                 [fn] {
                                   fn(make_input({3, 3, 3}, kFloat32, 1), -0.1, true, nullptr);
                                 },
                                 "between 0 and 1"},
                                {"int64 in training",
                                 [fn] {
                                   fn(make_input({3, 3, 3}, kInt64, 1), 0.5, true, nullptr);
                                 },
                                 name + ": expected a floating input in training mode"}};
  if (op == OpId::feature_alpha_dropout)
    e.push_back({"1-D input in training", [fn] { fn(make_input({4}, kFloat32, 1), 0.5, true, nullptr); },
                 "feature_alpha_dropout: Feature dropout requires at least 2 dimensions in the input, got shape [4]"});
  if (op == OpId::dropout2d) {
    e.push_back({"2-D input",
                 [fn] {
                   fn(make_input({3, 4}, kFloat32, 1), 0.5, true, nullptr);
                 },
                 "dropout2d: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, got shape [3, 4]"});
    e.push_back({"5-D input in eval",
                 [fn] {
                   fn(make_input({1, 2, 2, 2, 2}, kFloat32, 1), 0.5, false, nullptr);
                 },
                 "dropout2d: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input"});
  }
  return e;
}

#define KILN_DROPOUT_VARIANT_SAMPLES(op)                                                         \
  std::vector<OpSample> samples_##op() { return dropout_variant_samples(OpId::op, &kiln::op); }  \
  std::vector<ErrorSample> errors_##op() { return dropout_variant_errors(OpId::op, &kiln::op); } \
  KILN_OP_SAMPLES(op, samples_##op, errors_##op);

KILN_DROPOUT_VARIANT_SAMPLES(alpha_dropout)
KILN_DROPOUT_VARIANT_SAMPLES(feature_alpha_dropout)
KILN_DROPOUT_VARIANT_SAMPLES(dropout2d)

// When nothing is dropped the public functions return their input and run no op.
TEST(DropoutVariants, NothingDroppedReturnsTheInput) {
  Tensor x = make_input({3, 5, 2}, kFloat32, 3, -2, 2, true);
  for (DropFn fn : {DropFn(&kiln::alpha_dropout), DropFn(&kiln::feature_alpha_dropout), DropFn(&kiln::dropout2d)}) {
    EXPECT_TRUE(fn(x, 0.0, true, nullptr).is_same(x)) << "p=0";
    EXPECT_TRUE(fn(x, 0.5, false, nullptr).is_same(x)) << "eval";
  }
}

}  // namespace
}  // namespace kiln::test
