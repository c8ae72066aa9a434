// Samples for softmax, log_softmax and dropout (Note [Op samples]).
#include "dispatch/dispatch.h"
#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;

std::vector<OpSample> softmax_samples_for(bool log) {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, int64_t dim, std::optional<DType> dt = std::nullopt, bool grad = true) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x};
    s.fn = [=](const TensorList& in) {
      return TensorList{log ? log_softmax(in[0], dim, dt) : softmax(in[0], dim, dt)};
    };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      int64_t d = a.dim() == 0 ? 0 : (dim < 0 ? dim + a.dim() : dim);
      for_rows(a, d, [&](std::vector<double>& r) { softmax_row(r, log); });
      return TensorList{a.to(dt.value_or(in[0].dtype()))};
    };
    s.check_grad = grad;
    if (in_reduced(dt.value_or(x.dtype()))) s.atol = 2e-3;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) {
    add("[3,5] dim -1 " + dname(t), make_input({3, 5}, t, 1), -1);
    add("[3,5] dim 0 " + dname(t), make_input({3, 5}, t, 2), 0);
    add("[2,3,4] dim 1 noncontig " + dname(t), make_input({2, 3, 4}, t, 3, -3, 3, true), 1);
  }
  add("0-d", make_input({}, kFloat32, 4), 0);
  add("empty [0,3]", make_input({0, 3}, kFloat32, 5), 1);
  add("int64 input with dtype=float64", make_input({2, 4}, kInt64, 6, -5, 5), 1, kFloat64);
  add("float32 input with dtype=float64", make_input({2, 4}, kFloat32, 7), -1, kFloat64);
  add("large rows [64,1000] dim -1 (parallel)", make_input({64, 1000}, kFloat32, 8, -10, 10), -1, std::nullopt, false);
  add("large [300,2,200] dim 0 (strided kernel)", make_input({300, 2, 200}, kFloat32, 9, -10, 10), 0, std::nullopt,
      false);
  add("large values [2,3]", make_input({2, 3}, kFloat32, 10, -1000, 1000), 1, std::nullopt,
      false);
  return out;
}
std::vector<OpSample> softmax_samples() { return softmax_samples_for(false); }
std::vector<OpSample> log_softmax_samples() { return softmax_samples_for(true); }

std::vector<ErrorSample> softmax_errors_for(bool log) {
  auto f = [log](const Tensor& x, int64_t d) { return log ? log_softmax(x, d) : softmax(x, d); };
  return {
      {"dim out of range", [=] { f(make_input({2, 3}, kFloat32, 1), 2); }, "out of range"},
      {"integer input", [=] { f(make_input({2, 3}, kInt64, 1), 1); }, "expected a floating dtype"},
  };
}
std::vector<ErrorSample> softmax_errors() { return softmax_errors_for(false); }
std::vector<ErrorSample> log_softmax_errors() { return softmax_errors_for(true); }

KILN_OP_SAMPLES(softmax, softmax_samples, softmax_errors);
KILN_OP_SAMPLES(log_softmax, log_softmax_samples, log_softmax_errors);

// ---- _softmax_backward_data (Note [Fused norm and activation backward]): against the
// Jacobian of a row, d y_j / d x_i = y_j (delta_ij - y_i) for softmax and delta_ij - exp(y_i)
// for log_softmax, from the forward's output y ----
std::vector<OpSample> softmax_backward_data_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, const Tensor& x, int64_t dim, bool log, bool noncontig_g = false) {
    const DType t = x.dtype();
    OpSample s;
    s.name = std::move(name) + (log ? " log" : "");
    Tensor y = log ? log_softmax(x, dim) : softmax(x, dim);
    s.inputs = {make_input(x.sizes().vec(), t, 51, -2, 2, noncontig_g), y};
    s.fn = [=](const TensorList& in) {
      return TensorList{call_op1(OpId::_softmax_backward_data, {in[0], in[1]}, {dim, log})};
    };
    s.reference = [=](const TensorList& in) {
      Ref g = Ref::of(in[0]), yr = Ref::of(in[1]);
      Ref gx = yr;
      const int64_t d = yr.dim() == 0 ? 0 : (dim < 0 ? dim + yr.dim() : dim);
      Ref idx(yr.shape);  // flat positions, walked row by row along dim
      for (int64_t i = 0; i < idx.numel(); ++i) idx.v[i] = static_cast<double>(i);
      for_rows(idx, d, [&](std::vector<double>& row) {
        const size_t n = row.size();
        std::vector<double> r(n);
        for (size_t i = 0; i < n; ++i) {
          const int64_t ei = static_cast<int64_t>(row[i]);
          double acc = 0;
          for (size_t j = 0; j < n; ++j) {
            const int64_t ej = static_cast<int64_t>(row[j]);
            const double delta = i == j ? 1.0 : 0.0;
            const double jac = log ? delta - std::exp(yr.v[ei]) : yr.v[ej] * (delta - yr.v[ei]);
            acc += g.v[ej] * jac;
          }
          r[i] = acc;
        }
        for (size_t i = 0; i < n; ++i) gx.v[static_cast<int64_t>(row[i])] = r[i];
      });
      return TensorList{gx.to(t)};
    };
    if (in_reduced(t)) s.atol = s.rtol = 2e-2;
    out.push_back(s);
  };
  for (bool log : {false, true}) {
    for (DType t : kFloatTypes) {
      add("[3,5] dim -1 " + dname(t), make_input({3, 5}, t, 1), -1, log);
      add("[3,5] dim 0 " + dname(t), make_input({3, 5}, t, 2), 0, log);
      add("[2,3,4] dim 1 noncontig " + dname(t), make_input({2, 3, 4}, t, 3, -3, 3, true), 1, log, true);
    }
    add("0-d", make_input({}, kFloat32, 4), 0, log);
    add("empty [0,3]", make_input({0, 3}, kFloat32, 5), 1, log);
    add("[16,300] dim -1 (parallel)", make_input({16, 300}, kFloat32, 6, -5, 5), -1, log);
  }
  return out;
}
std::vector<ErrorSample> softmax_backward_data_errors() {
  auto call = [](const Tensor& g, const Tensor& y, int64_t d) {
    call_op1(OpId::_softmax_backward_data, {g, y}, {d, false});
  };
  return {
      {"dim out of range",
       [=] {
         call(make_input({2, 3}, kFloat32, 1), make_input({2, 3}, kFloat32, 2), 2);
       },
       "out of range"},
      {"grad_out shape",
       [=] {
         call(make_input({2, 4}, kFloat32, 1), make_input({2, 3}, kFloat32, 2), 1);
       },
       "expected grad_out of shape [2, 3]"},
      {"grad_out dtype",
       [=] {
         call(make_input({2, 3}, kFloat64, 1), make_input({2, 3}, kFloat32, 2), 1);
       },
       "expected grad_out of dtype"},
      {"integer output",
       [=] {
         call(make_input({2, 3}, kInt64, 1), make_input({2, 3}, kInt64, 2), 1);
       },
       "expected a floating output"},
  };
}
KILN_OP_SAMPLES(_softmax_backward_data, softmax_backward_data_samples, softmax_backward_data_errors);

// ---- _gelu_backward (Note [Fused norm and activation backward]): against a central difference
// of gelu's formula in double ----
double gelu_exact(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
std::vector<OpSample> gelu_backward_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, const Tensor& g, const Tensor& x, std::string approx) {
    const DType t = x.dtype();
    OpSample s;
    s.name = std::move(name) + " " + approx;
    s.inputs = {g, x};
    s.fn = [=](const TensorList& in) { return TensorList{call_op1(OpId::_gelu_backward, {in[0], in[1]}, {approx})}; };
    s.reference = [=](const TensorList& in) {
      auto f = approx == "tanh" ? gelu_tanh : gelu_exact;
      return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), [f](double gv, double xv) {
                          const double h = 1e-5;
                          return gv * (f(xv + h) - f(xv - h)) / (2 * h);
                        }).to(t)};
    };
    if (t == kFloat32) s.atol = s.rtol = 1e-5;
    out.push_back(s);
  };
  for (std::string approx : {"none", "tanh"}) {
    for (DType t : kFloatTypes) {
      add("[4,7] " + dname(t), make_input({4, 7}, t, 1), make_input({4, 7}, t, 2, -4, 4), approx);
      add("[3,4] noncontig " + dname(t), make_input({3, 4}, t, 3, -2, 2, true), make_input({3, 4}, t, 4, -4, 4, true),
          approx);
    }
    add("0-d", make_input({}, kFloat64, 5), make_input({}, kFloat64, 6), approx);
    add("empty [0,3]", make_input({0, 3}, kFloat32, 7), make_input({0, 3}, kFloat32, 8), approx);
    add("large |x| [64]", make_input({64}, kFloat32, 9), make_input({64}, kFloat32, 10, -12, 12), approx);
  }
  return out;
}
std::vector<ErrorSample> gelu_backward_errors() {
  auto call = [](const Tensor& g, const Tensor& x, std::string a) { call_op1(OpId::_gelu_backward, {g, x}, {a}); };
  return {
      {"approximate", [=] { call(make_input({3}, kFloat32, 1), make_input({3}, kFloat32, 2), "erf"); },
       "approximate must be 'none' or 'tanh'"},
      {"grad_out shape", [=] { call(make_input({4}, kFloat32, 1), make_input({3}, kFloat32, 2), "none"); },
       "expected grad_out of shape [3]"},
      {"grad_out dtype", [=] { call(make_input({3}, kFloat64, 1), make_input({3}, kFloat32, 2), "none"); },
       "expected grad_out of dtype"},
      {"integer x", [=] { call(make_input({3}, kInt64, 1), make_input({3}, kInt64, 2), "none"); },
       "expected a floating x"},
  };
}
KILN_OP_SAMPLES(_gelu_backward, gelu_backward_samples, gelu_backward_errors);

// ---- threshold_backward / hardtanh_backward: grad where self passes, 0 elsewhere; NaN self keeps
// the gradient (both comparisons false), the bounds get none ----
std::vector<OpSample> threshold_backward_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, const Tensor& g, const Tensor& x, double th) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {g, x};
    s.fn = [=](const TensorList& in) {
      return TensorList{call_op1(OpId::threshold_backward, {in[0], in[1]}, {Scalar(th)})};
    };
    s.reference = [=](const TensorList& in) {
      return TensorList{
          ref_map2(Ref::of(in[0]), Ref::of(in[1]), [th](double gv, double xv) { return xv <= th ? 0.0 : gv; })
              .to(in[1].dtype())};
    };
    out.push_back(s);
  };
  for (DType t : kFloatTypes) {
    add("[4,7] threshold 0 " + dname(t), make_input({4, 7}, t, 1), make_input({4, 7}, t, 2), 0.0);
    add("[3,4] noncontig threshold 0.5 " + dname(t), make_input({3, 4}, t, 3, -2, 2, true),
        make_input({3, 4}, t, 4, -2, 2, true), 0.5);
  }
  add("at the threshold and NaN", make_input({4}, kFloat64, 5),
      tensor<double>({0.0, -0.0, kNan, 1e-300}, {4}, kFloat64), 0.0);
  add("0-d", make_input({}, kFloat64, 6), make_input({}, kFloat64, 7), 0.0);
  add("empty [0,3]", make_input({0, 3}, kFloat32, 8), make_input({0, 3}, kFloat32, 9), 0.0);
  return out;
}
std::vector<ErrorSample> pointwise_backward_errors(OpId op, Attrs attrs) {
  auto call = [=](const Tensor& g, const Tensor& x) { call_op1(op, {g, x}, attrs); };
  return {
      {"grad_out shape", [=] { call(make_input({4}, kFloat32, 1), make_input({3}, kFloat32, 2)); },
       "expected grad_out of shape [3]"},
      {"grad_out dtype", [=] { call(make_input({3}, kFloat64, 1), make_input({3}, kFloat32, 2)); },
       "expected grad_out of dtype"},
      {"integer self", [=] { call(make_input({3}, kInt64, 1), make_input({3}, kInt64, 2)); }, "expected a floating x"},
  };
}
std::vector<ErrorSample> threshold_backward_errors() {
  return pointwise_backward_errors(OpId::threshold_backward, {Scalar(0.0)});
}
KILN_OP_SAMPLES(threshold_backward, threshold_backward_samples, threshold_backward_errors);

std::vector<OpSample> hardtanh_backward_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, const Tensor& g, const Tensor& x, double lo, double hi) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {g, x};
    s.fn = [=](const TensorList& in) {
      return TensorList{call_op1(OpId::hardtanh_backward, {in[0], in[1]}, {Scalar(lo), Scalar(hi)})};
    };
    s.reference = [=](const TensorList& in) {
      return TensorList{ref_map2(Ref::of(in[0]), Ref::of(in[1]), [lo, hi](double gv, double xv) {
                          return xv <= lo || xv >= hi ? 0.0 : gv;
                        }).to(in[1].dtype())};
    };
    out.push_back(s);
  };
  for (DType t : kFloatTypes) {
    add("[4,7] (-1, 1) " + dname(t), make_input({4, 7}, t, 1), make_input({4, 7}, t, 2), -1.0, 1.0);
    add("[3,4] noncontig relu6 " + dname(t), make_input({3, 4}, t, 3, -2, 2, true),
        make_input({3, 4}, t, 4, -1, 7, true), 0.0, 6.0);
  }
  add("at the bounds and NaN", make_input({5}, kFloat64, 5), tensor<double>({0.0, 6.0, kNan, 3.0, -0.0}, {5}, kFloat64),
      0.0, 6.0);
  add("empty [0,3]", make_input({0, 3}, kFloat32, 8), make_input({0, 3}, kFloat32, 9), -1.0, 1.0);
  return out;
}
std::vector<ErrorSample> hardtanh_backward_errors() {
  return pointwise_backward_errors(OpId::hardtanh_backward, {Scalar(-1.0), Scalar(1.0)});
}
KILN_OP_SAMPLES(hardtanh_backward, hardtanh_backward_samples, hardtanh_backward_errors);

// ---- dropout: structural checks (Note [Dropout mask]) ----
std::vector<OpSample> dropout_samples() {
  std::vector<OpSample> out;
  for (double p : {0.2, 0.5, 0.8}) {
    for (DType t : {kFloat32, kFloat64, DType::BFloat16}) {
      OpSample s;
      s.name = "p=" + std::to_string(p) + " " + dname(t);
      s.inputs = {ones({4000}, t)};
      s.fn = [p](const TensorList& in) {
        Generator g(1234);
        return TensorList{dropout(in[0], p, true, &g)};
      };
      s.compare_values = false;
      s.check_grad = false;
      s.check = [p, t](const TensorList& o) {
        auto v = o[0].to_vector<double>();
        int64_t zeros = 0;
        double scale = Ref({}, 1.0 / (1.0 - p)).to(t).item<double>();
        for (double e : v) {
          if (e == 0) ++zeros;
          else {
            EXPECT_NEAR(e, scale, 1e-6) << "survivors are scaled by 1/(1-p)";
          }
        }
        EXPECT_NEAR(static_cast<double>(zeros) / v.size(), p, 0.04) << "fraction dropped";
      };
      out.push_back(s);
    }
  }
  {
    OpSample s;  // determinism and gradient: the mask is a constant of the generator state
    s.name = "same seed, same mask; grad = mask / (1-p)";
    s.inputs = {make_input({3, 4}, kFloat64, 1, 0.5, 2.0)};
    s.fn = [](const TensorList& in) {
      Generator g(7);
      return TensorList{dropout(in[0], 0.4, true, &g)};
    };
    s.compare_values = false;
    s.check = [x = s.inputs[0]](const TensorList& o) {
      Generator g(7);
      Tensor again = dropout(x, 0.4, true, &g);
      EXPECT_EQ(o[0].to_vector<double>(), again.to_vector<double>());
      Tensor third = dropout(x, 0.4, true, &g);  // the generator moved on
      EXPECT_NE(third.to_vector<double>(), again.to_vector<double>());
      auto xv = x.to_vector<double>(), ov = o[0].to_vector<double>();
      for (size_t i = 0; i < xv.size(); ++i)
        EXPECT_TRUE(ov[i] == 0 || std::abs(ov[i] - xv[i] / 0.6) < 1e-12);
    };
    out.push_back(s);
  }
  auto exact = [&](std::string name, double p, bool train, bool zero) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {make_input({3, 5}, kFloat32, 3, -2, 2, true)};
    s.fn = [=](const TensorList& in) { return TensorList{dropout(in[0], p, train)}; };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      if (zero) a = Ref(a.shape, 0.0);
      return TensorList{a.to(kFloat32)};
    };
    out.push_back(s);
  };
  exact("p=1 gives zeros", 1.0, true, true);
  return out;
}
// When nothing is dropped the public function returns its input and runs no
// op, so this is a plain test rather than a dropout sample.
TEST(Dropout, NothingDroppedReturnsTheInput) {
  Tensor x = make_input({3, 5}, kFloat32, 3, -2, 2, true);
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x)) << "p=0";
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x)) << "eval";
}
std::vector<ErrorSample> dropout_errors() {
  return {{"p > 1", [] { dropout(make_input({3}, kFloat32, 1), 1.5); }, "between 0 and 1"},
          {"p < 0", [] { dropout(make_input({3}, kFloat32, 1), -0.1); }, "between 0 and 1"}};
}
KILN_OP_SAMPLES(dropout, dropout_samples, dropout_errors);

}  // namespace
}  // namespace kiln::test
