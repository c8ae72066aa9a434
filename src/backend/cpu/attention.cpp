// CPU kernels of the fused attention ops (Note [Flash attention]): the reference the CUDA kernels
// are tested against. Scores, weights and sums are in double, one query row (forward) or one
// batch entry (backward) per task; the matmul decomposition of scaled_dot_product_attention stays
// the CPU's fast path, so these favour clarity over speed.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/loops.h"
#include "ops/registry.h"

namespace kiln::cpu {
namespace {

struct Dims {
  int64_t N, L, S, E, Ev;
  bool causal;
  double scale;
  // q [..., L, E], k [..., S, E], v [..., S, Ev]: the batch dims flattened to N.
  Dims(const Tensor& q, const Tensor& k, const Tensor& v, const Attrs& a)
      : N(1), L(q.size(-2)), S(k.size(-2)), E(q.size(-1)), Ev(v.size(-1)), causal(a.b(0)), scale(a.f(1)) {
    for (int64_t d = 0; d < q.dim() - 2; ++d) N *= q.size(d);
  }
  // Key j is seen by query i (top-left aligned causal mask).
  bool keeps(int64_t i, int64_t j) const { return !causal || j <= i; }
};

// The scaled score of query row i against key row j of batch entry n.
double score(const std::vector<double>& q, const std::vector<double>& k, const Dims& d, int64_t n, int64_t i,
             int64_t j) {
  const double* qi = q.data() + (n * d.L + i) * d.E;
  const double* kj = k.data() + (n * d.S + j) * d.E;
  double s = 0;
  for (int64_t e = 0; e < d.E; ++e) s += qi[e] * kj[e];
  return s * d.scale;
}

void flash_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Dims d(c.in(0), c.in(1), c.in(2), c.attrs);
  std::vector<double> q = dense_doubles(c.in(0)), k = dense_doubles(c.in(1)), v = dense_doubles(c.in(2));
  std::vector<double> out(static_cast<size_t>(d.N * d.L * d.Ev)), lse(static_cast<size_t>(d.N * d.L));
  const double ninf = -std::numeric_limits<double>::infinity();
  parallel_for(0, d.N * d.L, 1, [&](int64_t b, int64_t e) {
    std::vector<double> p(static_cast<size_t>(d.S));
    for (int64_t r = b; r < e; ++r) {
      int64_t n = r / d.L, i = r % d.L;
      double m = ninf;
      for (int64_t j = 0; j < d.S; ++j) {
        p[j] = d.keeps(i, j) ? score(q, k, d, n, i, j) : ninf;
        m = std::max(m, p[j]);
      }
      double* o = out.data() + r * d.Ev;
      if (m == ninf) {  // no key: zeros, as the decomposition's fully masked rows
        lse[r] = ninf;
        continue;
      }
      double sum = 0;
      for (int64_t j = 0; j < d.S; ++j) sum += p[j] = std::exp(p[j] - m);
      lse[r] = m + std::log(sum);
      for (int64_t j = 0; j < d.S; ++j) {
        if (p[j] == 0) continue;
        const double w = p[j] / sum;
        const double* vj = v.data() + (n * d.S + j) * d.Ev;
        for (int64_t c2 = 0; c2 < d.Ev; ++c2) o[c2] += w * vj[c2];
      }
    }
  });
  store_doubles(outs[0], out);
  store_doubles(outs[1], lse);
}
KILN_REGISTER_KERNEL(_scaled_dot_product_flash_attention, CPU, flash_kernel);

void flash_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Dims d(c.in(1), c.in(2), c.in(3), c.attrs);
  std::vector<double> go = dense_doubles(c.in(0)), q = dense_doubles(c.in(1)), k = dense_doubles(c.in(2)),
                      v = dense_doubles(c.in(3)), o = dense_doubles(c.in(4)), lse = dense_doubles(c.in(5));
  std::vector<double> glse = c.in(6).defined() ? dense_doubles(c.in(6)) : std::vector<double>(lse.size(), 0.0);
  std::vector<double> dq(q.size()), dk(k.size()), dv(v.size());
  parallel_for(0, d.N, 1, [&](int64_t b, int64_t e) {
    for (int64_t n = b; n < e; ++n) {
      for (int64_t i = 0; i < d.L; ++i) {
        const int64_t r = n * d.L + i;
        if (std::isinf(lse[r]) && lse[r] < 0) continue;  // a row without keys has no gradient
        const double* gi = go.data() + r * d.Ev;
        double D = -glse[r];
        for (int64_t c2 = 0; c2 < d.Ev; ++c2) D += gi[c2] * o[r * d.Ev + c2];
        for (int64_t j = 0; j < d.S; ++j) {
          if (!d.keeps(i, j)) continue;
          const double p = std::exp(score(q, k, d, n, i, j) - lse[r]);
          const double* vj = v.data() + (n * d.S + j) * d.Ev;
          double dp = 0;
          for (int64_t c2 = 0; c2 < d.Ev; ++c2) {
            dp += gi[c2] * vj[c2];
            dv[(n * d.S + j) * d.Ev + c2] += p * gi[c2];
          }
          const double ds = p * (dp - D) * d.scale;
          for (int64_t e2 = 0; e2 < d.E; ++e2) {
            dq[r * d.E + e2] += ds * k[(n * d.S + j) * d.E + e2];
            dk[(n * d.S + j) * d.E + e2] += ds * q[r * d.E + e2];
          }
        }
      }
    }
  });
  store_doubles(outs[0], dq);
  store_doubles(outs[1], dk);
  store_doubles(outs[2], dv);
}
KILN_REGISTER_KERNEL(_scaled_dot_product_flash_attention_backward, CPU, flash_backward_kernel);

}  // namespace
}  // namespace kiln::cpu
