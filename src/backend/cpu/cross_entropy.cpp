// CPU kernels of the fused cross_entropy ops (Note [Fused cross_entropy] in ops/loss_fused.cpp):
// the reference the CUDA kernels are tested against, in double, a row per task. (cross_entropy
// itself keeps its decomposition on the CPU.)
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/loops.h"
#include "ops/registry.h"

namespace kiln::cpu {
namespace {

struct Rows {
  int64_t N, C;
  std::vector<double> x, w;  // w: the class weights (ones without a weight)
  std::vector<int64_t> t;
  double W = 0;  // sum of w
  int64_t ignore;
  double ls;
  Rows(const Tensor& input, const Tensor& target, const Tensor& weight, const Attrs& a)
      : N(input.sizes()[0]), C(input.sizes()[1]), x(dense_doubles(input)),
        w(weight.defined() ? dense_doubles(weight) : std::vector<double>(static_cast<size_t>(C), 1.0)),
        t(target.to(kInt64).contiguous().to_vector<int64_t>()), ignore(a.i(0)), ls(a.f(1)) {
    for (double v : w) W += v;
  }
  const double* row(int64_t i) const { return x.data() + i * C; }
  // Both ops index the weights and the row by the target: refuse one outside [0, C).
  void check_targets() const {
    for (int64_t i = 0; i < N; ++i)
      KILN_CHECK(t[i] == ignore || (t[i] >= 0 && t[i] < C), "cross_entropy: target ", t[i],
                 " is out of bounds: expected class indices in [0, ", C, ") or ignore_index ", ignore);
  }
};

void fused_ce_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Rows r(c.in(0), c.in(1), c.in(2), c.attrs);
  r.check_targets();
  std::vector<double> loss(static_cast<size_t>(r.N)), tw(loss.size()), lse(loss.size());
  parallel_for(0, r.N, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double* x = r.row(i);
      double m = -std::numeric_limits<double>::infinity(), s = 0;
      for (int64_t k = 0; k < r.C; ++k) m = std::max(m, x[k]);
      for (int64_t k = 0; k < r.C; ++k) s += std::exp(x[k] - m);
      lse[i] = m + std::log(s);
      if (r.t[i] == r.ignore) continue;
      tw[i] = r.w[r.t[i]];
      loss[i] = tw[i] * (lse[i] - x[r.t[i]]);
      if (r.ls > 0) {
        double smooth = 0;  // -sum_c w_c log p_c
        for (int64_t k = 0; k < r.C; ++k) smooth += r.w[k] * (lse[i] - x[k]);
        loss[i] = (1 - r.ls) * loss[i] + r.ls / static_cast<double>(r.C) * smooth;
      }
    }
  });
  store_doubles(outs[0], loss);
  store_doubles(outs[1], tw);
  store_doubles(outs[2], lse);
}
KILN_REGISTER_KERNEL(_fused_cross_entropy, CPU, fused_ce_kernel);

void fused_ce_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Rows r(c.in(1), c.in(2), c.in(3), c.attrs);
  r.check_targets();
  const std::vector<double> g = dense_doubles(c.in(0)), lse = dense_doubles(c.in(4));
  const std::vector<double> gl = c.in(5).defined() ? dense_doubles(c.in(5)) : std::vector<double>(g.size(), 0.0);
  std::vector<double> gx(r.x.size());
  parallel_for(0, r.N, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double* x = r.row(i);
      const bool kept = r.t[i] != r.ignore;
      const double wt = kept ? r.w[r.t[i]] : 0.0, k1 = (1 - r.ls) * wt, k2 = kept ? r.ls / static_cast<double>(r.C) : 0;
      for (int64_t k = 0; k < r.C; ++k) {
        const double p = std::exp(x[k] - lse[i]);
        const double d = k1 * (p - (k == r.t[i] ? 1.0 : 0.0)) + k2 * (r.W * p - r.w[k]);
        gx[i * r.C + k] = g[i] * d + gl[i] * p;
      }
    }
  });
  store_doubles(outs[0], gx);
}
KILN_REGISTER_KERNEL(_fused_cross_entropy_backward, CPU, fused_ce_backward_kernel);

}  // namespace
}  // namespace kiln::cpu
