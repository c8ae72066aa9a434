// Samples for the fused cross_entropy ops (Note [Fused cross_entropy] in ops/loss_fused.cpp):
// per-row losses, target weights and logsumexp, and the logits' gradient, against naive double
// loops over log-probabilities.
#include "dispatch/dispatch.h"
#include "tests/ops/samples_nn_util.h"

namespace kiln::test {
namespace {
using namespace nn;

Tensor class_targets(const std::vector<int64_t>& v) {
  return tensor<int64_t>(v, {static_cast<int64_t>(v.size())}, kInt64);
}

struct CeRef {
  Ref loss, tw, lse, logp;  // logp: [N, C]
  std::vector<double> w;    // class weights (ones without)
};

CeRef ce_ref(const TensorList& in, int64_t ignore, double ls) {
  Ref x = Ref::of(in[0]), t = Ref::of(in[1]);
  const int64_t N = x.shape[0], C = x.shape[1];
  CeRef r{Ref({N}), Ref({N}), Ref({N}), x, {}};
  r.w = in[2].defined() ? Ref::of(in[2]).v : std::vector<double>(static_cast<size_t>(C), 1.0);
  for_rows(r.logp, 1, [](std::vector<double>& row) { softmax_row(row, true); });
  for (int64_t i = 0; i < N; ++i) {
    r.lse.v[i] = x.v[i * C] - r.logp.v[i * C];  // x - log p = lse, at any column
    const int64_t ti = static_cast<int64_t>(t.v[i]);
    if (ti == ignore) continue;
    r.tw.v[i] = r.w[ti];
    double smooth = 0;
    for (int64_t c = 0; c < C; ++c) smooth -= r.w[c] * r.logp.v[i * C + c];
    r.loss.v[i] = -(1 - ls) * r.w[ti] * r.logp.v[i * C + ti] + ls / static_cast<double>(C) * smooth;
  }
  return r;
}

struct CeCase {
  std::string name;
  Shape shape;
  std::vector<int64_t> t;
  bool weighted;
  int64_t ignore;
  double ls;
  bool noncontig = false;
};

std::vector<CeCase> ce_cases() {
  std::vector<int64_t> long_t{0, 1499, 700};
  return {
      {"[4,5]", {4, 5}, {1, 0, 4, 2}, false, -100, 0},
      {"[4,5] weighted, ignore_index 0", {4, 5}, {1, 0, 4, 0}, true, 0, 0},
      {"[4,5] smoothing 0.2", {4, 5}, {1, 0, 4, 2}, false, -100, 0.2},
      {"[4,5] weighted, ignore, smoothing, noncontig", {4, 5}, {1, -1, 4, 2}, true, -1, 0.3, true},
      {"[3,1500] long rows", {3, 1500}, long_t, false, -100, 0},
      {"[3,1500] long rows weighted, smoothing", {3, 1500}, long_t, true, -100, 0.1},
      {"[0,3] empty", {0, 3}, {}, false, -100, 0},
  };
}

std::vector<OpSample> fused_ce_samples() {
  std::vector<OpSample> out;
  int seed = 1;
  for (const CeCase& cc : ce_cases())
    for (DType t : kFloatTypes) {
      if (cc.shape[1] > 100 && in_reduced(t)) continue;
      OpSample s;
      s.name = cc.name + " " + dname(t);
      s.inputs = {make_input(cc.shape, t, seed++, -3, 3, cc.noncontig), class_targets(cc.t),
                  cc.weighted ? make_input({cc.shape[1]}, t, seed++, 0.2, 2) : Tensor()};
      const int64_t ign = cc.ignore;
      const double ls = cc.ls;
      s.fn = [=](const TensorList& in) {
        std::vector<Tensor> r = call_op(OpId::_fused_cross_entropy, {in[0], in[1], in[2]}, {ign, ls});
        return TensorList(r.begin(), r.end());
      };
      // All three outputs in the opmath dtype, to its accuracy: bf16/fp16 logits are read as they
      // are and computed in float32 (Note [Fused cross_entropy]).
      s.reference = [=](const TensorList& in) {
        CeRef r = ce_ref(in, ign, ls);
        const DType c = in[0].dtype() == kFloat64 ? kFloat64 : kFloat32;
        return TensorList{r.loss.to(c), r.tw.to(c), r.lse.to(c)};
      };
      s.grad_inputs = {0, 2};
      s.check_grad = cc.shape[1] <= 100;  // finite differences over 4500 logits: minutes; the short rows check it
      out.push_back(s);
    }
  return out;
}
std::vector<ErrorSample> fused_ce_errors() {
  auto call = [](const Tensor& x, const Tensor& t, int64_t ignore = -100) {
    call_op(OpId::_fused_cross_entropy, {x, t, Tensor()}, {ignore, 0.0});
  };
  return {
      {"target out of range", [=] { call(make_input({2, 3}, kFloat32, 1), class_targets({0, 3})); },
       "target 3 is out of bounds: expected class indices in [0, 3) or ignore_index -100"},
      {"negative target", [=] { call(make_input({2, 3}, kFloat32, 1), class_targets({-1, 0})); }, "target -1 is out"},
      {"3-D logits", [=] { call(make_input({2, 3, 4}, kFloat32, 1), class_targets({0, 1})); },
       "expected floating logits [N, C]"},
      {"float targets", [=] { call(make_input({2, 3}, kFloat32, 1), make_input({2}, kFloat32, 2)); },
       "expected integer class indices"},
  };
}
KILN_OP_SAMPLES(_fused_cross_entropy, fused_ce_samples, fused_ce_errors);

// The backward against d/dx of the reference's losses and logsumexp: g (1 - ls) w_t (p - onehot)
// + g ls / C (W p - w) + g_lse p.
std::vector<OpSample> fused_ce_backward_samples() {
  std::vector<OpSample> out;
  int seed = 100;
  for (const CeCase& cc : ce_cases())
    for (DType t : kFloatTypes) {
      if (cc.shape[1] > 100 && in_reduced(t)) continue;
      for (bool with_glse : {false, true}) {
        if (with_glse && t != kFloat64) continue;
        OpSample s;
        s.name = cc.name + (with_glse ? " with grad_logsumexp " : " ") + dname(t);
        const int64_t N = cc.shape[0], C = cc.shape[1];
        Tensor x = make_input(cc.shape, t, seed++, -3, 3, cc.noncontig), tg = class_targets(cc.t);
        Tensor w = cc.weighted ? make_input({C}, t, seed++, 0.2, 2) : Tensor();
        const int64_t ign = cc.ignore;
        const double ls = cc.ls;
        std::vector<Tensor> f = call_op(OpId::_fused_cross_entropy, {x, tg, w}, {ign, ls});
        // grad_loss, as the losses, in the opmath dtype; the gradient comes back in the logits'.
        Tensor g = make_input({N}, f[0].dtype(), seed++);
        s.inputs = {g, x, tg, w, f[2], with_glse ? make_input({N}, f[2].dtype(), seed++) : Tensor()};
        s.fn = [=](const TensorList& in) {
          return TensorList{call_op1(OpId::_fused_cross_entropy_backward, in, {ign, ls})};
        };
        s.reference = [=](const TensorList& in) {
          CeRef r = ce_ref({in[1], in[2], in[3]}, ign, ls);
          Ref g = Ref::of(in[0]), tr = Ref::of(in[2]);
          Ref gl = in[5].defined() ? Ref::of(in[5]) : Ref({N});
          double W = 0;
          for (double v : r.w) W += v;
          Ref gx({N, C});
          for (int64_t i = 0; i < N; ++i) {
            const int64_t ti = static_cast<int64_t>(tr.v[i]);
            const bool kept = ti != ign;
            for (int64_t c = 0; c < C; ++c) {
              const double p = std::exp(r.logp.v[i * C + c]);
              double d = gl.v[i] * p;
              if (kept)
                d += g.v[i] * ((1 - ls) * r.w[ti] * (p - (c == ti ? 1.0 : 0.0)) +
                               ls / static_cast<double>(C) * (W * p - r.w[c]));
              gx.v[i * C + c] = d;
            }
          }
          return TensorList{gx.to(in[1].dtype())};
        };
        s.check_grad = false;
        if (in_reduced(t)) s.atol = 3e-2;
        out.push_back(s);
      }
    }
  return out;
}
// The forward's checks, on the target the backward indexes the row and the weights by.
std::vector<ErrorSample> fused_ce_backward_errors() {
  auto call = [](const Tensor& x, const Tensor& t, int64_t ignore = -100) {
    const int64_t N = x.sizes()[0];
    call_op1(OpId::_fused_cross_entropy_backward,
             {make_input({N}, kFloat32, 3), x, t, Tensor(), make_input({N}, kFloat32, 4), Tensor()}, {ignore, 0.0});
  };
  return {
      {"target out of range", [=] { call(make_input({2, 3}, kFloat32, 1), class_targets({0, 3})); },
       "target 3 is out of bounds: expected class indices in [0, 3) or ignore_index -100"},
      {"negative target", [=] { call(make_input({2, 3}, kFloat32, 1), class_targets({-1, 0})); }, "target -1 is out"},
      // One bad row: CUDA names whichever bad row it meets first.
      {"negative target, ignore_index 0",
       [=] { call(make_input({4, 5}, kFloat32, 1), class_targets({1, 0, 4, -3}), 0); },
       "target -3 is out of bounds: expected class indices in [0, 5) or ignore_index 0"},
      {"3-D logits", [=] { call(make_input({2, 3, 4}, kFloat32, 1), class_targets({0, 1})); },
       "expected floating logits [N, C]"},
      {"float targets", [=] { call(make_input({2, 3}, kFloat32, 1), make_input({2}, kFloat32, 2)); },
       "expected integer class indices"},
      {"targets of another length", [=] { call(make_input({2, 3}, kFloat32, 1), class_targets({0, 1, 2})); },
       "expected integer class indices of shape [2]"},
  };
}
KILN_OP_SAMPLES(_fused_cross_entropy_backward, fused_ce_backward_samples, fused_ce_backward_errors);

}  // namespace
}  // namespace kiln::test
