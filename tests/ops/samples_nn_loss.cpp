// Samples for the loss functions (Note [Op samples]).
#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;

Tensor targets(const std::vector<int64_t>& v, const Shape& shape) { return tensor<int64_t>(v, shape, kInt64); }

double reduce_ref(const std::vector<double>& loss, const std::string& red, double denom) {
  double s = 0;
  for (double v : loss) s += v;
  return red == "sum" ? s : s / denom;
}

// Class-index losses. `logp` is the [N, C, rest] log-probability Ref (for nll:
// the input itself); returns the reduced or unreduced loss as torch computes it.
Ref ref_class_loss(const Ref& in, const Ref& tgt, const Tensor& weight, int64_t ignore, const std::string& red,
                   double ls, bool apply_log_softmax) {
  bool unbatched = in.dim() == 1;
  Shape shape = unbatched ? Shape{1, in.shape[0]} : in.shape;
  int64_t N = shape[0], C = shape[1], R = 1;
  for (size_t i = 2; i < shape.size(); ++i) R *= shape[i];
  Ref lp(shape);
  lp.v = in.v;
  if (apply_log_softmax) for_rows(lp, 1, [](std::vector<double>& r) { softmax_row(r, true); });
  Ref w = weight.defined() ? Ref::of(weight) : Ref({C}, 1.0);
  std::vector<double> nll(N * R), smooth(N * R);
  double wsum = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t r = 0; r < R; ++r) {
      int64_t t = static_cast<int64_t>(tgt.v[n * R + r]);
      if (t == ignore) continue;
      nll[n * R + r] = -w.v[t] * lp.v[(n * C + t) * R + r];
      wsum += w.v[t];
      for (int64_t c = 0; c < C; ++c) smooth[n * R + r] -= w.v[c] * lp.v[(n * C + c) * R + r];
    }
  Ref out;
  if (red == "none") {
    out = Ref(tgt.shape);
    for (int64_t i = 0; i < N * R; ++i) out.v[i] = (1 - ls) * nll[i] + ls / C * smooth[i];
  } else {
    out = Ref({}, (1 - ls) * reduce_ref(nll, red, wsum) + ls / C * reduce_ref(smooth, red, wsum));
  }
  return out;
}

struct ClassCase {
  std::string name;
  Shape in_shape;
  std::vector<int64_t> t;
  Shape t_shape;
  bool weighted;
  int64_t ignore;
  double ls;
};

std::vector<ClassCase> class_cases() {
  return {
      {"[4,5]", {4, 5}, {1, 0, 4, 2}, {4}, false, -100, 0},
      {"[4,5] weighted", {4, 5}, {1, 0, 4, 2}, {4}, true, -100, 0},
      {"[4,5] ignore_index 0", {4, 5}, {1, 0, 4, 0}, {4}, true, 0, 0},
      {"[2,3,4] class dim 1", {2, 3, 4}, {0, 1, 2, 1, 2, 2, 0, 1}, {2, 4}, true, -100, 0},
      {"[5] unbatched", {5}, {3}, {}, false, -100, 0},
      {"[4,5] label smoothing", {4, 5}, {1, 0, 4, 2}, {4}, false, -100, 0.2},
      {"[4,5] weighted, ignore, smoothing", {4, 5}, {1, -1, 4, 2}, {4}, true, -1, 0.3},
      {"[2,3,2] smoothing", {2, 3, 2}, {0, 2, 1, 1}, {2, 2}, true, -100, 0.1},
  };
}

std::vector<OpSample> class_samples(bool ce) {
  std::vector<OpSample> out;
  int seed = 1;
  for (const ClassCase& cc : class_cases()) {
    if (!ce && cc.ls > 0) continue;
    for (std::string red : {"mean", "sum", "none"}) {
      for (DType t : {kFloat32, kFloat64}) {
        if (t == kFloat32 && red != "mean") continue;
        int64_t C = cc.in_shape.size() == 1 ? cc.in_shape[0] : cc.in_shape[1];
        OpSample s;
        s.name = cc.name + " " + red + " " + dname(t);
        bool nc = cc.in_shape.size() == 2 && red == "sum";
        s.inputs = {make_input(cc.in_shape, t, seed++, -2, 2, nc), targets(cc.t, cc.t_shape),
                    cc.weighted ? make_input({C}, t, seed++, 0.2, 2) : Tensor()};
        int64_t ign = cc.ignore;
        double ls = cc.ls;
        s.fn = [=](const TensorList& in) {
          return TensorList{ce ? cross_entropy(in[0], in[1], in[2], ign, red, ls) : nll_loss(in[0], in[1], in[2], ign, red)};
        };
        s.reference = [=](const TensorList& in) {
          return TensorList{ref_class_loss(Ref::of(in[0]), Ref::of(in[1]), in[2], ign, red, ls, ce).to(in[0].dtype())};
        };
        s.grad_inputs = {0, 2};
        out.push_back(s);
      }
    }
  }
  {
    OpSample s;
    s.name = "all targets ignored: mean is nan";
    s.inputs = {make_input({2, 3}, kFloat32, 50), targets({-100, -100}, {2}), Tensor()};
    s.fn = [=](const TensorList& in) {
      return TensorList{ce ? cross_entropy(in[0], in[1]) : nll_loss(in[0], in[1])};
    };
    s.reference = [](const TensorList&) { return TensorList{Ref({}, std::nan("")).to(kFloat32)}; };
    s.check_grad = false;
    out.push_back(s);
  }
  {
    OpSample s;
    s.name = "empty batch, none";
    s.inputs = {make_input({0, 3}, kFloat32, 51), targets({}, {0}), Tensor()};
    s.fn = [=](const TensorList& in) {
      return TensorList{ce ? cross_entropy(in[0], in[1], {}, -100, "none") : nll_loss(in[0], in[1], {}, -100, "none")};
    };
    s.reference = [](const TensorList&) { return TensorList{Ref({0}).to(kFloat32)}; };
    out.push_back(s);
  }
  return out;
}

// Class-probability targets (cross_entropy only).
std::vector<OpSample> prob_samples() {
  std::vector<OpSample> out;
  int seed = 100;
  for (Shape shape : {Shape{4, 5}, Shape{2, 3, 2}, Shape{5}})
    for (bool weighted : {false, true})
      for (double ls : {0.0, 0.25})
        for (std::string red : {"mean", "sum", "none"}) {
          int64_t cd = shape.size() == 1 ? 0 : 1, C = shape[cd];
          OpSample s;
          s.name = "prob target " + shape_str(shape) + (weighted ? " weighted" : "") + " ls " + std::to_string(ls) +
                   " " + red;
          s.inputs = {make_input(shape, kFloat64, seed++), make_input(shape, kFloat64, seed++, 0, 1),
                      weighted ? make_input({C}, kFloat64, seed++, 0.2, 2) : Tensor()};
          s.fn = [=](const TensorList& in) { return TensorList{cross_entropy(in[0], in[1], in[2], -100, red, ls)}; };
          s.reference = [=](const TensorList& in) {
            Ref lp = Ref::of(in[0]), tg = Ref::of(in[1]);
            for_rows(lp, cd, [](std::vector<double>& r) { softmax_row(r, true); });
            Ref w = in[2].defined() ? Ref::of(in[2]) : Ref({C}, 1.0);
            Shape os;
            for (size_t i = 0; i < shape.size(); ++i)
              if (static_cast<int64_t>(i) != cd) os.push_back(shape[i]);
            Ref l(os);
            for (int64_t i = 0; i < lp.numel(); ++i) {
              Shape idx = unravel(i, shape);
              int64_t c = idx[cd];
              idx.erase(idx.begin() + cd);
              double t = tg.v[i] * (1 - ls) + ls / C;
              l.at(idx) -= w.v[c] * t * lp.v[i];
            }
            if (red == "none") return TensorList{l.to(kFloat64)};
            return TensorList{Ref({}, reduce_ref(l.v, red, static_cast<double>(l.numel()))).to(kFloat64)};
          };
          s.grad_inputs = {0, 1};
          out.push_back(s);
        }
  return out;
}

std::vector<OpSample> cross_entropy_samples() {
  auto a = class_samples(true), b = prob_samples();
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::vector<OpSample> nll_loss_samples() { return class_samples(false); }

std::vector<ErrorSample> class_errors(bool ce) {
  auto f = [ce](const Tensor& x, const Tensor& t, const Tensor& w = {}, const std::string& red = "mean") {
    return ce ? cross_entropy(x, t, w, -100, red) : nll_loss(x, t, w, -100, red);
  };
  std::vector<ErrorSample> e = {
      {"batch size mismatch", [=] { f(make_input({3, 4}, kFloat32, 1), targets({0, 1}, {2})); }, "batch_size"},
      {"float32 target for nll / wrong shape", [=] { f(make_input({3, 4}, kFloat32, 1), make_input({3}, kFloat32, 2)); },
       ce ? "expected class-probability target" : "integer dtype"},
      {"weight size", [=] { f(make_input({3, 4}, kFloat32, 1), targets({0, 1, 2}, {3}), ones({3})); }, "weight"},
      {"bad reduction", [=] { f(make_input({3, 4}, kFloat32, 1), targets({0, 1, 2}, {3}), {}, "avg"); }, "reduction"},
      {"target shape (N, d1)", [=] { f(make_input({2, 3, 4}, kFloat32, 1), targets({0, 1, 2}, {3})); },
       "expected target of shape"},
  };
  if (ce)
    e.push_back({"label_smoothing > 1",
                 [] { cross_entropy(make_input({3, 4}, kFloat32, 1), targets({0, 1, 2}, {3}), {}, -100, "mean", 1.5); },
                 "label_smoothing"});
  return e;
}
std::vector<ErrorSample> cross_entropy_errors() { return class_errors(true); }
std::vector<ErrorSample> nll_loss_errors() { return class_errors(false); }
KILN_OP_SAMPLES(cross_entropy, cross_entropy_samples, cross_entropy_errors);
KILN_OP_SAMPLES(nll_loss, nll_loss_samples, nll_loss_errors);

// ---- mse / l1 / smooth_l1 ----
double pointwise_ref(OpId op, double d, double beta) {
  double a = std::abs(d);
  if (op == OpId::mse_loss) return d * d;
  if (op == OpId::l1_loss || beta == 0) return a;
  return a < beta ? 0.5 * d * d / beta : a - 0.5 * beta;
}

std::vector<OpSample> pointwise_loss_samples(OpId op) {
  std::vector<OpSample> out;
  auto call = [op](const Tensor& x, const Tensor& t, const std::string& red, double beta) {
    if (op == OpId::mse_loss) return mse_loss(x, t, red);
    if (op == OpId::l1_loss) return l1_loss(x, t, red);
    return smooth_l1_loss(x, t, red, beta);
  };
  auto add = [&](std::string name, Tensor x, Tensor t, std::string red, double beta = 1.0) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, t};
    s.fn = [=](const TensorList& in) { return TensorList{call(in[0], in[1], red, beta)}; };
    s.reference = [=](const TensorList& in) {
      Ref l = ref_map2(Ref::of(in[0]), Ref::of(in[1]), [&](double a, double b) { return pointwise_ref(op, a - b, beta); });
      DType dt = promote_types(in[0].dtype(), in[1].dtype());
      if (red == "none") return TensorList{l.to(dt)};
      return TensorList{Ref({}, reduce_ref(l.v, red, static_cast<double>(l.numel()))).to(dt)};
    };
    if (in_reduced(x.dtype())) s.atol = 1e-2;
    out.push_back(s);
  };
  for (DType t : kFloatTypes)
    for (std::string red : {"mean", "sum", "none"})
      add("[3,4] " + red + " " + dname(t), make_input({3, 4}, t, 1), make_input({3, 4}, t, 2), red);
  add("broadcast [3,1] x [4]", make_input({3, 1}, kFloat64, 3), make_input({4}, kFloat64, 4), "none");
  add("noncontig mean", make_input({4, 3}, kFloat64, 5, -2, 2, true), make_input({4, 3}, kFloat64, 6), "mean");
  add("float32 x float64", make_input({5}, kFloat32, 7), make_input({5}, kFloat64, 8), "sum");
  add("0-d", make_input({}, kFloat64, 9), make_input({}, kFloat64, 10), "mean");
  add("empty mean is nan", make_input({0}, kFloat32, 11), make_input({0}, kFloat32, 12), "mean");
  if (op == OpId::smooth_l1_loss) {
    add("beta 0.5", make_input({3, 4}, kFloat64, 13), make_input({3, 4}, kFloat64, 14), "none", 0.5);
    add("beta 0 is l1", make_input({3, 4}, kFloat64, 15), make_input({3, 4}, kFloat64, 16), "sum", 0.0);
  }
  return out;
}
std::vector<OpSample> mse_samples() { return pointwise_loss_samples(OpId::mse_loss); }
std::vector<OpSample> l1_samples() { return pointwise_loss_samples(OpId::l1_loss); }
std::vector<OpSample> smooth_l1_samples() { return pointwise_loss_samples(OpId::smooth_l1_loss); }
std::vector<ErrorSample> pointwise_loss_errors() {
  return {{"shape mismatch", [] { mse_loss(make_input({3}, kFloat32, 1), make_input({4}, kFloat32, 2)); }, "size"},
          {"bad reduction", [] { l1_loss(make_input({3}, kFloat32, 1), make_input({3}, kFloat32, 2), "avg"); },
           "reduction"},
          {"integer inputs", [] { mse_loss(make_input({3}, kInt64, 1), make_input({3}, kInt64, 2)); }, "floating"}};
}
std::vector<ErrorSample> smooth_l1_errors() {
  auto e = pointwise_loss_errors();
  e.push_back({"negative beta",
               [] { smooth_l1_loss(make_input({3}, kFloat32, 1), make_input({3}, kFloat32, 2), "mean", -1.0); },
               "negative values for beta"});
  return e;
}
KILN_OP_SAMPLES(mse_loss, mse_samples, pointwise_loss_errors);
KILN_OP_SAMPLES(l1_loss, l1_samples, pointwise_loss_errors);
KILN_OP_SAMPLES(smooth_l1_loss, smooth_l1_samples, smooth_l1_errors);

// ---- binary cross entropy ----
std::vector<OpSample> bce_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, Tensor t, Tensor w, std::string red, bool grad = true) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, t, w};
    s.fn = [=](const TensorList& in) { return TensorList{binary_cross_entropy(in[0], in[1], in[2], red)}; };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]), b = Ref::of(in[1]);
      Ref l = a;
      Ref w = in[2].defined() ? Ref::of(in[2]) : Ref();
      for (int64_t i = 0; i < a.numel(); ++i) {
        double lx = std::max(std::log(a.v[i]), -100.0), l1x = std::max(std::log(1 - a.v[i]), -100.0);
        l.v[i] = -(b.v[i] * lx + (1 - b.v[i]) * l1x);
        if (in[2].defined()) l.v[i] *= w.v[broadcast_index(unravel(i, a.shape), w.shape)];
      }
      DType dt = in[0].dtype();
      if (red == "none") return TensorList{l.to(dt)};
      return TensorList{Ref({}, reduce_ref(l.v, red, static_cast<double>(l.numel()))).to(dt)};
    };
    s.check_grad = grad;
    if (in_reduced(x.dtype())) s.atol = 1e-2;
    out.push_back(s);
  };
  for (DType t : kFloatTypes)
    for (std::string red : {"mean", "sum", "none"})
      add("[3,4] " + red + " " + dname(t), make_input({3, 4}, t, 1, 0.05, 0.95), make_input({3, 4}, t, 2, 0, 1),
          Tensor(), red);
  add("weight broadcast [4]", make_input({3, 4}, kFloat64, 3, 0.05, 0.95, true), make_input({3, 4}, kFloat64, 4, 0, 1),
      make_input({4}, kFloat64, 5, 0.5, 2), "none");
  add("saturated: log clamped at -100", tensor<double>({0.0, 1.0, 0.0, 1.0}, {4}, kFloat64),
      tensor<double>({1.0, 0.0, 0.0, 1.0}, {4}, kFloat64), Tensor(), "none", false);
  return out;
}
std::vector<ErrorSample> bce_errors() {
  // torch: "all elements of input should be between 0 and 1", NaN included.
  auto bad_input = [](double v) {
    return [v] { binary_cross_entropy(tensor<float>({0.5f, static_cast<float>(v)}, {2}), zeros({2})); };
  };
  const char* range = "binary_cross_entropy: all elements of input should be between 0 and 1";
  return {{"target shape",
           [] {
             binary_cross_entropy(make_input({3}, kFloat32, 1, 0, 1), make_input({3, 1}, kFloat32, 2, 0, 1));
           },
           "same shape"},
          {"input above 1", bad_input(1.5), range},
          {"input below 0", bad_input(-0.1), range},
          {"NaN input", bad_input(std::nan("")), range}};
}
KILN_OP_SAMPLES(binary_cross_entropy, bce_samples, bce_errors);

std::vector<OpSample> bce_logits_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, Tensor t, Tensor w, Tensor pw, std::string red) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, t, w, pw};
    s.fn = [=](const TensorList& in) {
      return TensorList{binary_cross_entropy_with_logits(in[0], in[1], in[2], red, in[3])};
    };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]), b = Ref::of(in[1]), l = a;
      Ref w = in[2].defined() ? Ref::of(in[2]) : Ref(), p = in[3].defined() ? Ref::of(in[3]) : Ref();
      for (int64_t i = 0; i < a.numel(); ++i) {
        Shape idx = unravel(i, a.shape);
        double x = a.v[i], t = b.v[i];
        double pwv = in[3].defined() ? p.v[broadcast_index(idx, p.shape)] : 1.0;
        double log_sig = -std::log1p(std::exp(-x));  // fine in fp64 for the moderate test values
        double log_1m_sig = -x + log_sig;
        l.v[i] = -(pwv * t * log_sig + (1 - t) * log_1m_sig);
        if (in[2].defined()) l.v[i] *= w.v[broadcast_index(idx, w.shape)];
      }
      DType dt = in[0].dtype();
      if (red == "none") return TensorList{l.to(dt)};
      return TensorList{Ref({}, reduce_ref(l.v, red, static_cast<double>(l.numel()))).to(dt)};
    };
    if (in_reduced(x.dtype())) s.atol = 1e-2;
    out.push_back(s);
  };
  for (DType t : kFloatTypes)
    for (std::string red : {"mean", "sum", "none"})
      add("[3,4] " + red + " " + dname(t), make_input({3, 4}, t, 1, -4, 4), make_input({3, 4}, t, 2, 0, 1), Tensor(),
          Tensor(), red);
  add("pos_weight [4] and weight [3,1]", make_input({3, 4}, kFloat64, 3, -4, 4, true),
      make_input({3, 4}, kFloat64, 4, 0, 1), make_input({3, 1}, kFloat64, 5, 0.5, 2),
      make_input({4}, kFloat64, 6, 0.5, 3), "none");
  add("large logits are stable", tensor<double>({-60.0, 60.0, 30.0}, {3}, kFloat64),
      tensor<double>({1.0, 0.0, 1.0}, {3}, kFloat64), Tensor(), Tensor(), "none");
  return out;
}
std::vector<ErrorSample> bce_logits_errors() {
  return {{"target shape",
           [] { binary_cross_entropy_with_logits(make_input({3}, kFloat32, 1), make_input({4}, kFloat32, 2)); },
           "same shape"},
          {"pos_weight shape",
           [] {
             binary_cross_entropy_with_logits(make_input({3, 4}, kFloat32, 1), make_input({3, 4}, kFloat32, 2), {},
                                              "mean", ones({3}));
           },
           "size"}};
}
KILN_OP_SAMPLES(binary_cross_entropy_with_logits, bce_logits_samples, bce_logits_errors);

}  // namespace
}  // namespace kiln::test
