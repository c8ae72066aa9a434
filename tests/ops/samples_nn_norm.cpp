// Samples for batch_norm, layer_norm, group_norm and rms_norm (Note [Op samples]).
#include "dispatch/dispatch.h"
#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;

// Normalises groups of `a`: `group_of(flat)` gives each element's group id;
// y = (x - mean_g) / sqrt(var_g + eps) (biased variance), in place.
Ref ref_normalize(Ref a, int64_t ngroups, const std::function<int64_t(const Shape&)>& group_of, double eps,
                  bool rms = false) {
  std::vector<double> s(ngroups, 0), ss(ngroups, 0), cnt(ngroups, 0);
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t g = group_of(unravel(i, a.shape));
    s[g] += a.v[i];
    cnt[g] += 1;
  }
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t g = group_of(unravel(i, a.shape));
    double d = rms ? a.v[i] : a.v[i] - s[g] / cnt[g];
    ss[g] += d * d;
  }
  for (int64_t i = 0; i < a.numel(); ++i) {
    int64_t g = group_of(unravel(i, a.shape));
    double mu = rms ? 0 : s[g] / cnt[g];
    a.v[i] = (a.v[i] - mu) / std::sqrt(ss[g] / cnt[g] + eps);
  }
  return a;
}

// y * w[c] + b[c] where c = param_index(idx).
Ref ref_affine(Ref y, const Tensor& w, const Tensor& b, const std::function<int64_t(const Shape&)>& param_index) {
  Ref rw = w.defined() ? Ref::of(w) : Ref(), rb = b.defined() ? Ref::of(b) : Ref();
  for (int64_t i = 0; i < y.numel(); ++i) {
    int64_t c = param_index(unravel(i, y.shape));
    if (w.defined()) y.v[i] *= rw.v[c];
    if (b.defined()) y.v[i] += rb.v[c];
  }
  return y;
}

double norm_atol(DType t) { return in_reduced(t) ? 2e-2 : 1e-5; }

// ---- layer_norm ----
std::vector<OpSample> layer_norm_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, Shape ns, Tensor w, Tensor b, double eps = 1e-5) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, w, b};
    s.fn = [=](const TensorList& in) { return TensorList{layer_norm(in[0], ns, in[1], in[2], eps)}; };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      int64_t n = ref_numel(ns), rows = n ? a.numel() / n : 0;
      auto row = [&](const Shape& idx) { return ravel(idx, a.shape) / n; };
      auto col = [&](const Shape& idx) { return ravel(idx, a.shape) % n; };
      Ref y = ref_affine(ref_normalize(a, rows, row, eps), in[1], in[2], col);
      return TensorList{y.to(in[0].dtype())};
    };
    s.atol = norm_atol(x.dtype());
    s.rtol = in_reduced(x.dtype()) ? 2e-2 : 0;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) {
    add("[4,5] ns [5] affine " + dname(t), make_input({4, 5}, t, 1), {5}, make_input({5}, t, 2),
        make_input({5}, t, 3));
    add("[2,3,4] ns [3,4] noncontig " + dname(t), make_input({2, 3, 4}, t, 4, -2, 2, true), {3, 4},
        make_input({3, 4}, t, 5), Tensor());
  }
  add("[6] ns [6] bias only", make_input({6}, kFloat64, 6), {6}, Tensor(), make_input({6}, kFloat64, 7));
  add("no affine, eps 0.1", make_input({3, 4}, kFloat32, 8), {4}, Tensor(), Tensor(), 0.1);
  add("empty [0,5]", make_input({0, 5}, kFloat32, 9), {5}, make_input({5}, kFloat32, 2), Tensor());
  add("float32 input, float64 weight", make_input({2, 3}, kFloat32, 10), {3}, make_input({3}, kFloat64, 11), Tensor());
  {
    auto x = make_input({64, 512}, kFloat32, 12);
    add("large [64,512] (parallel)", x, {512}, make_input({512}, kFloat32, 13), make_input({512}, kFloat32, 14));
    out.back().check_grad = false;
  }
  return out;
}
std::vector<ErrorSample> layer_norm_errors() {
  return {
      {"normalized_shape mismatch", [] { layer_norm(make_input({2, 3}, kFloat32, 1), {4}); }, "normalized_shape"},
      {"weight shape", [] { layer_norm(make_input({2, 3}, kFloat32, 1), {3}, make_input({4}, kFloat32, 2)); },
       "expected weight of shape"},
      {"integer input", [] { layer_norm(make_input({2, 3}, kInt64, 1), {3}); }, "floating"},
  };
}
KILN_OP_SAMPLES(layer_norm, layer_norm_samples, layer_norm_errors);

// ---- batch_norm ----
std::vector<OpSample> batch_norm_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, bool affine, bool training, bool stats = true, double eps = 1e-5) {
    int64_t C = x.sizes()[1];
    DType t = x.dtype();
    OpSample s;
    s.name = std::move(name);
    Tensor rm = stats ? make_input({C}, kFloat32, 21, -0.5, 0.5) : Tensor();
    Tensor rv = stats ? make_input({C}, kFloat32, 22, 0.5, 2.0) : Tensor();
    s.inputs = {x, rm, rv, affine ? make_input({C}, t, 23) : Tensor(), affine ? make_input({C}, t, 24) : Tensor()};
    const double momentum = 0.3;
    // The running stats are updated in place: work on copies, and return them too.
    auto run = [=](const TensorList& in, bool with_stats) {
      Tensor m = in[1].defined() ? in[1].detach().clone() : Tensor();
      Tensor v = in[2].defined() ? in[2].detach().clone() : Tensor();
      Tensor y = batch_norm(in[0], m, v, in[3], in[4], training, momentum, eps);
      if (!with_stats || !m.defined()) return TensorList{y};
      return TensorList{y, m, v};
    };
    s.fn = [=](const TensorList& in) { return run(in, false); };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      auto chan = [&](const Shape& idx) { return idx[1]; };
      Ref y;
      if (training) {
        y = ref_normalize(a, C, chan, eps);
      } else {
        Ref m = Ref::of(in[1]), v = Ref::of(in[2]);
        y = a;
        for (int64_t i = 0; i < a.numel(); ++i) {
          int64_t c = unravel(i, a.shape)[1];
          y.v[i] = (a.v[i] - m.v[c]) / std::sqrt(v.v[c] + eps);
        }
      }
      return TensorList{ref_affine(y, in[3], in[4], chan).to(t)};
    };
    s.grad_inputs = {0, 3, 4};
    s.atol = norm_atol(t);
    s.rtol = in_reduced(t) ? 2e-2 : 0;
    out.push_back(s);
    if (training && stats) {
      // Running stats: (1 - momentum) * old + momentum * batch stat, with the unbiased variance.
      OpSample r = s;
      r.name += " (running stats)";
      r.fn = [=](const TensorList& in) { return run(in, true); };
      r.check_grad = false;
      auto ref_y = s.reference;
      r.reference = [=](const TensorList& in) {
        Ref a = Ref::of(in[0]), m = Ref::of(in[1]), v = Ref::of(in[2]);
        std::vector<double> s1(C, 0), s2(C, 0);
        double n = static_cast<double>(a.numel() / C);
        for (int64_t i = 0; i < a.numel(); ++i) s1[unravel(i, a.shape)[1]] += a.v[i];
        for (int64_t i = 0; i < a.numel(); ++i) {
          int64_t c = unravel(i, a.shape)[1];
          s2[c] += (a.v[i] - s1[c] / n) * (a.v[i] - s1[c] / n);
        }
        for (int64_t c = 0; c < C; ++c) {
          m.v[c] = (1 - momentum) * m.v[c] + momentum * s1[c] / n;
          v.v[c] = (1 - momentum) * v.v[c] + momentum * s2[c] / (n - 1);
        }
        TensorList o = ref_y(in);
        o.push_back(m.to(kFloat32));
        o.push_back(v.to(kFloat32));
        return o;
      };
      out.push_back(r);
    }
  };
  for (DType t : kFloatTypes) {
    add("[4,3] training affine " + dname(t), make_input({4, 3}, t, 1), true, true);
    add("[4,3] eval affine " + dname(t), make_input({4, 3}, t, 2), true, false);
  }
  add("[2,3,4] training noncontig", make_input({2, 3, 4}, kFloat64, 3, -2, 2, true), true, true);
  add("[2,2,2,3] training, no affine", make_input({2, 2, 2, 3}, kFloat32, 4), false, true);
  add("[2,3,2,2] eval, no affine", make_input({2, 3, 2, 2}, kFloat32, 5), false, false);
  add("[3,2] training without running stats", make_input({3, 2}, kFloat32, 6), true, true, false);
  return out;
}
std::vector<ErrorSample> batch_norm_errors() {
  auto rm = [] { return zeros({3}); };
  return {
      {"1-D input", [=] { batch_norm(make_input({3}, kFloat32, 1), rm(), ones({3})); }, "at least 2 dims"},
      {"running stats shape", [=] { batch_norm(make_input({2, 4}, kFloat32, 1), rm(), ones({3})); },
       "expected running_mean of shape"},
      {"one value per channel in training",
       [=] { batch_norm(make_input({1, 3}, kFloat32, 1), rm(), ones({3}), {}, {}, true); },
       "more than 1 value per channel"},
      {"eval without running stats", [] { batch_norm(make_input({2, 3}, kFloat32, 1), {}, {}); },
       "must be defined in evaluation mode"},
  };
}
KILN_OP_SAMPLES(batch_norm, batch_norm_samples, batch_norm_errors);

// ---- _batch_norm_training (Note [Batch norm's training node]): the output, and the batch mean
// and biased variance per channel; gradients through all three ----
std::vector<OpSample> batch_norm_training_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, bool affine, double eps = 1e-5) {
    const int64_t C = x.sizes()[1];
    const DType t = x.dtype();
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, affine ? make_input({C}, t, 41) : Tensor(), affine ? make_input({C}, t, 42) : Tensor()};
    s.fn = [=](const TensorList& in) {
      std::vector<Tensor> r = call_op(OpId::_batch_norm_training, {in[0], in[1], in[2]}, {eps});
      return TensorList(r.begin(), r.end());
    };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      Ref mu(Shape{C}), var(Shape{C});
      const double n = static_cast<double>(a.numel() / C);
      for (int64_t i = 0; i < a.numel(); ++i) mu.v[unravel(i, a.shape)[1]] += a.v[i] / n;
      for (int64_t i = 0; i < a.numel(); ++i) {
        const int64_t c = unravel(i, a.shape)[1];
        var.v[c] += (a.v[i] - mu.v[c]) * (a.v[i] - mu.v[c]) / n;
      }
      auto chan = [](const Shape& idx) { return idx[1]; };
      Ref y = ref_affine(ref_normalize(a, C, chan, eps), in[1], in[2], chan);
      const DType ct = t == kFloat64 ? kFloat64 : kFloat32;
      return TensorList{y.to(t), mu.to(ct), var.to(ct)};
    };
    s.atol = norm_atol(t);
    s.rtol = in_reduced(t) ? 2e-2 : 1e-5;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) add("[4,3] affine " + dname(t), make_input({4, 3}, t, 1), true);
  add("[2,3,4] noncontig", make_input({2, 3, 4}, kFloat64, 3, -2, 2, true), true);
  add("[2,2,2,3] no affine, eps 0.1", make_input({2, 2, 2, 3}, kFloat32, 4), false, 0.1);
  add("[3,2,5] offset values", make_input({3, 2, 5}, kFloat32, 5, 3, 5), true);
  return out;
}
std::vector<ErrorSample> batch_norm_training_errors() {
  auto run = [](const Tensor& x, const Tensor& w) { call_op(OpId::_batch_norm_training, {x, w, Tensor()}, {1e-5}); };
  return {
      {"1-D input", [=] { run(make_input({3}, kFloat32, 1), Tensor()); }, "at least 2 dims"},
      {"weight shape", [=] { run(make_input({2, 4}, kFloat32, 1), ones({3})); }, "expected weight of shape"},
      {"one value per channel", [=] { run(make_input({1, 3}, kFloat32, 1), Tensor()); }, "more than 1 value per channel"},
      {"integer input", [=] { run(make_input({2, 3}, kInt64, 1), Tensor()); }, "floating"},
  };
}
KILN_OP_SAMPLES(_batch_norm_training, batch_norm_training_samples, batch_norm_training_errors);

// ---- _batch_norm_backward (Note [Fused batch_norm backward]): against the Jacobian of the
// normalisation taken element by element, d xhat_j / d x_i = rstd (delta_ij - 1/M - xhat_i
// xhat_j / M) over a channel's M values in training, rstd delta_ij in evaluation ----
std::vector<OpSample> batch_norm_backward_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, bool affine, bool training, double eps = 1e-5) {
    const int64_t C = x.sizes()[1];
    const DType t = x.dtype();
    OpSample s;
    s.name = std::move(name);
    s.inputs = {make_input(x.sizes().vec(), t, 31), x, affine ? make_input({C}, t, 32) : Tensor(),
                training ? Tensor() : make_input({C}, kFloat32, 33, -0.5, 0.5),
                training ? Tensor() : make_input({C}, kFloat32, 34, 0.5, 2.0)};
    s.fn = [=](const TensorList& in) {
      std::vector<Tensor> r = call_op(OpId::_batch_norm_backward, {in[0], in[1], in[2], in[3], in[4]}, {training, eps});
      return TensorList(r.begin(), r.end());
    };
    s.reference = [=](const TensorList& in) {
      Ref g = Ref::of(in[0]), a = Ref::of(in[1]);
      Ref gx(a.shape), gw(Shape{C}), gb(Shape{C});
      for (int64_t c = 0; c < C; ++c) {
        std::vector<int64_t> at;  // the channel's flat positions
        for (int64_t i = 0; i < a.numel(); ++i)
          if (unravel(i, a.shape)[1] == c) at.push_back(i);
        const double M = static_cast<double>(at.size());
        double mean = 0, var = 0;
        if (training) {
          for (int64_t i : at) mean += a.v[i] / M;
          for (int64_t i : at) var += (a.v[i] - mean) * (a.v[i] - mean) / M;
        } else {
          mean = Ref::of(in[3]).v[c];
          var = Ref::of(in[4]).v[c];
        }
        const double rstd = 1 / std::sqrt(var + eps), w = in[2].defined() ? Ref::of(in[2]).v[c] : 1.0;
        auto xhat = [&](int64_t i) { return (a.v[i] - mean) * rstd; };
        for (int64_t i : at) {
          gb.v[c] += g.v[i];
          gw.v[c] += g.v[i] * xhat(i);
          double acc = 0;
          for (int64_t j : at) {
            double jac = (i == j ? 1.0 : 0.0);
            if (training) jac -= 1 / M + xhat(i) * xhat(j) / M;
            acc += g.v[j] * w * rstd * jac;
          }
          gx.v[i] = acc;
        }
      }
      const DType ct = t == kFloat64 ? kFloat64 : kFloat32;
      return TensorList{gx.to(t), gw.to(ct), gb.to(ct)};
    };
    s.atol = norm_atol(t);
    s.rtol = in_reduced(t) ? 2e-2 : 1e-5;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) {
    add("[4,3] training affine " + dname(t), make_input({4, 3}, t, 1), true, true);
    add("[2,3,2,2] eval affine " + dname(t), make_input({2, 3, 2, 2}, t, 2), true, false);
  }
  add("[2,3,4] training noncontig", make_input({2, 3, 4}, kFloat64, 3, -2, 2, true), true, true);
  add("[3,2,5] training, no weight", make_input({3, 2, 5}, kFloat32, 4, 3, 5), false, true);
  add("[2,3] eval, no weight, eps 0.1", make_input({2, 3}, kFloat32, 5), false, false, 0.1);
  add("empty [0,3,2] training", make_input({0, 3, 2}, kFloat32, 6), true, true);
  return out;
}
KILN_OP_SAMPLES(_batch_norm_backward, batch_norm_backward_samples, nullptr);

// ---- _layer_norm_backward (Note [Fused norm and activation backward]): against the Jacobian
// of a row's normalisation taken element by element, d xhat_j / d x_i = rstd (delta_ij - 1/N -
// xhat_i xhat_j / N) over the row's N values ----
std::vector<OpSample> layer_norm_backward_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, Shape ns, bool affine, double eps = 1e-5, bool noncontig_g = false) {
    const DType t = x.dtype();
    OpSample s;
    s.name = std::move(name);
    s.inputs = {make_input(x.sizes().vec(), t, 41, -2, 2, noncontig_g), x, affine ? make_input(ns, t, 42) : Tensor()};
    s.fn = [=](const TensorList& in) {
      std::vector<Tensor> r = call_op(OpId::_layer_norm_backward, {in[0], in[1], in[2]}, {ns, eps});
      return TensorList(r.begin(), r.end());
    };
    s.reference = [=](const TensorList& in) {
      Ref g = Ref::of(in[0]), a = Ref::of(in[1]);
      const int64_t N = ref_numel(ns), M = N == 0 ? 0 : a.numel() / N;
      Ref gx(a.shape), gw(ns), gb(ns);
      Ref w = in[2].defined() ? Ref::of(in[2]) : Ref(ns, 1.0);
      for (int64_t r = 0; r < M; ++r) {
        const int64_t o = r * N;
        double mean = 0, var = 0;
        for (int64_t i = 0; i < N; ++i) mean += a.v[o + i] / static_cast<double>(N);
        for (int64_t i = 0; i < N; ++i) var += (a.v[o + i] - mean) * (a.v[o + i] - mean) / static_cast<double>(N);
        const double rstd = 1 / std::sqrt(var + eps);
        auto xhat = [&](int64_t i) { return (a.v[o + i] - mean) * rstd; };
        for (int64_t i = 0; i < N; ++i) {
          gb.v[i] += g.v[o + i];
          gw.v[i] += g.v[o + i] * xhat(i);
          double acc = 0;
          for (int64_t j = 0; j < N; ++j) {
            const double jac =
                (i == j ? 1.0 : 0.0) - 1 / static_cast<double>(N) - xhat(i) * xhat(j) / static_cast<double>(N);
            acc += g.v[o + j] * w.v[j] * rstd * jac;
          }
          gx.v[o + i] = acc;
        }
      }
      const DType ct = t == kFloat64 ? kFloat64 : kFloat32;
      return TensorList{gx.to(t), gw.to(ct), gb.to(ct)};
    };
    s.atol = norm_atol(t);
    s.rtol = in_reduced(t) ? 2e-2 : 1e-5;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) {
    add("[4,5] affine " + dname(t), make_input({4, 5}, t, 1), {5}, true);
    add("[2,3,4] over [3,4] " + dname(t), make_input({2, 3, 4}, t, 2), {3, 4}, true);
  }
  add("[3,6] noncontig x and grad_out", make_input({3, 6}, kFloat64, 3, -2, 2, true), {6}, true, 1e-5, true);
  add("[2,2,7] no weight, eps 0.1", make_input({2, 2, 7}, kFloat32, 4, 3, 5), {7}, false, 0.1);
  add("[5] one row", make_input({5}, kFloat32, 5), {5}, true);
  add("[300,40] many rows (parallel)", make_input({300, 40}, kFloat32, 6), {40}, true);
  add("empty [0,4]", make_input({0, 4}, kFloat32, 7), {4}, true);
  return out;
}
std::vector<ErrorSample> layer_norm_backward_errors() {
  auto call = [](const Tensor& g, const Tensor& x, Shape ns) {
    call_op(OpId::_layer_norm_backward, {g, x, Tensor()}, {ns, 1e-5});
  };
  return {
      {"grad_out shape",
       [=] {
         call(make_input({2, 3}, kFloat32, 1), make_input({2, 4}, kFloat32, 2), {4});
       },
       "expected grad_out of shape [2, 4]"},
      {"grad_out dtype",
       [=] {
         call(make_input({2, 4}, kFloat64, 1), make_input({2, 4}, kFloat32, 2), {4});
       },
       "expected grad_out of dtype"},
      {"normalized_shape",
       [=] {
         call(make_input({2, 4}, kFloat32, 1), make_input({2, 4}, kFloat32, 2), {3});
       },
       "normalized_shape"},
  };
}
KILN_OP_SAMPLES(_layer_norm_backward, layer_norm_backward_samples, layer_norm_backward_errors);

// ---- group_norm ----
std::vector<OpSample> group_norm_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, int64_t G, bool affine, double eps = 1e-5) {
    int64_t C = x.sizes()[1];
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, affine ? make_input({C}, x.dtype(), 31) : Tensor(), affine ? make_input({C}, x.dtype(), 32) : Tensor()};
    s.fn = [=](const TensorList& in) { return TensorList{group_norm(in[0], G, in[1], in[2], eps)}; };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      auto grp = [&](const Shape& idx) { return idx[0] * G + idx[1] / (C / G); };
      Ref y = ref_normalize(a, a.shape[0] * G, grp, eps);
      return TensorList{ref_affine(y, in[1], in[2], [](const Shape& idx) { return idx[1]; }).to(in[0].dtype())};
    };
    s.atol = norm_atol(x.dtype());
    s.rtol = in_reduced(x.dtype()) ? 2e-2 : 0;
    out.push_back(s);
  };
  for (DType t : kFloatTypes) add("[2,4,3] G=2 affine " + dname(t), make_input({2, 4, 3}, t, 1), 2, true);
  add("[2,6,2,2] G=3 noncontig", make_input({2, 6, 2, 2}, kFloat64, 2, -2, 2, true), 3, true);
  add("[3,4] G=4 (per channel), no affine", make_input({3, 4}, kFloat32, 3), 4, false);
  add("[2,4,3] G=1", make_input({2, 4, 3}, kFloat32, 4), 1, false, 1e-3);
  return out;
}
std::vector<ErrorSample> group_norm_errors() {
  return {{"channels not divisible", [] { group_norm(make_input({2, 5, 3}, kFloat32, 1), 2); }, "divisible by num_groups"},
          {"weight shape", [] { group_norm(make_input({2, 4, 3}, kFloat32, 1), 2, ones({3})); }, "expected weight"}};
}
KILN_OP_SAMPLES(group_norm, group_norm_samples, group_norm_errors);

// ---- rms_norm ----
std::vector<OpSample> rms_norm_samples() {
  std::vector<OpSample> out;
  auto add = [&](std::string name, Tensor x, Shape ns, Tensor w, std::optional<double> eps) {
    OpSample s;
    s.name = std::move(name);
    s.inputs = {x, w};
    s.fn = [=](const TensorList& in) { return TensorList{rms_norm(in[0], ns, in[1], eps)}; };
    s.reference = [=](const TensorList& in) {
      Ref a = Ref::of(in[0]);
      // torch: eps defaults to the machine epsilon of the opmath type (float for half/bfloat16).
      double e = eps.value_or(in[0].dtype() == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                         : double(std::numeric_limits<float>::epsilon()));
      int64_t n = ref_numel(ns);
      auto row = [&](const Shape& idx) { return ravel(idx, a.shape) / n; };
      auto col = [&](const Shape& idx) { return ravel(idx, a.shape) % n; };
      Ref y = ref_affine(ref_normalize(a, n ? a.numel() / n : 0, row, e, true), in[1], Tensor(), col);
      DType t = in[1].defined() ? promote_types(in[0].dtype(), in[1].dtype()) : in[0].dtype();
      return TensorList{y.to(t)};
    };
    s.atol = norm_atol(x.dtype());
    s.rtol = in_reduced(x.dtype()) ? 2e-2 : 0;
    out.push_back(s);
  };
  for (DType t : kFloatTypes)
    add("[3,4] ns [4] weight " + dname(t), make_input({3, 4}, t, 1), {4}, make_input({4}, t, 2), std::nullopt);
  add("[2,3,4] ns [3,4] eps 0.1 noncontig", make_input({2, 3, 4}, kFloat64, 3, -2, 2, true), {3, 4}, Tensor(), 0.1);
  add("empty [0,4]", make_input({0, 4}, kFloat32, 4), {4}, Tensor(), std::nullopt);
  return out;
}
std::vector<ErrorSample> rms_norm_errors() {
  return {{"normalized_shape mismatch", [] { rms_norm(make_input({2, 3}, kFloat32, 1), {2}); }, "normalized_shape"}};
}
KILN_OP_SAMPLES(rms_norm, rms_norm_samples, rms_norm_errors);

}  // namespace
}  // namespace kiln::test
