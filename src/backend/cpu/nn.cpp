// CPU kernels for softmax, log_softmax and layer_norm: one pass per row over
// contiguous data, computing in the opmath type (float for Half/BFloat16),
// parallel over rows; and the fused backward ops _batch_norm_backward, _layer_norm_backward and
// _softmax_backward_data, in the opmath type with their sums in double. The decompositions in
// src/ops/nn_*.cpp define the semantics; these are the fast eager path.
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/isa.h"
#include "backend/cpu/loops.h"
#include "core/scalar_math.h"
#include "ops/registry.h"

namespace kiln::cpu {
namespace {

// x converted to dtype t and made contiguous (x itself when it already is).
Tensor dense(const Tensor& x, DType t) {
  if (x.dtype() == t && x.is_contiguous()) return x;
  Tensor out = make_tensor(x.sizes(), t, x.device());
  copy_cpu(out, x);
  return out;
}

// The [outer, n, inner] view of a tensor around dim d.
struct Split3 {
  int64_t outer = 1, n = 1, inner = 1;
  Split3(IntArrayRef s, int64_t d) {
    for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i) {
      if (i < d) outer *= s[i];
      else if (i == d) n = s[i];
      else inner *= s[i];
    }
  }
};

// Sum of f(i) over [0, n) in double, in 8 independent partial sums: one accumulator would run at
// the adder's latency, and 8 lanes let g++ vectorize f. The order is fixed, so the result does
// not depend on the thread count.
template <class F>
inline double lane_sum(int64_t n, const F& f) {
  double p[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) p[k] += static_cast<double>(f(i + k));
  double tail = 0;
  for (; i < n; ++i) tail += static_cast<double>(f(i));
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7])) + tail;
}

// Sum of f(e) over the flat offsets e of channel ch of a dense [N, Ch, HW] tensor, a plane of HW
// at a time in lane_sum's fixed order.
template <class F>
inline double channel_lane_sum(int64_t N, int64_t Ch, int64_t HW, int64_t ch, const F& f) {
  double s = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t o = (n * Ch + ch) * HW;
    s += lane_sum(HW, [&](int64_t i) { return f(o + i); });
  }
  return s;
}

template <class T, bool Log>
void softmax_lastdim(const T* x, T* y, int64_t rows, int64_t n) {
  using C = math::opmath_t<T>;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    with_best_isa([&] {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = x + r * n;
        T* yr = y + r * n;
        C mx = -std::numeric_limits<C>::infinity();
        for (int64_t i = 0; i < n; ++i) mx = std::max(mx, C(xr[i]));
        // A row of -inf (or a NaN) has no finite shift: x - mx gives NaN, as torch.
        if constexpr (Log) {
          const double s = lane_sum(n, [&](int64_t i) { return math::Exp{}(C(xr[i]) - mx); });
          const C lse = mx + C(std::log(s));
          for (int64_t i = 0; i < n; ++i) yr[i] = T(C(xr[i]) - lse);
        } else {
          // Write exp into y when T is C (saves recomputing it); else recompute.
          C s = 0;
          for (int64_t i = 0; i < n; ++i) {
            C ev = math::Exp{}(C(xr[i]) - mx);
            if constexpr (std::is_same_v<T, C>) yr[i] = ev;
            s += ev;
          }
          C inv = C(1) / s;
          for (int64_t i = 0; i < n; ++i) {
            if constexpr (std::is_same_v<T, C>) yr[i] = yr[i] * inv;
            else yr[i] = T(math::Exp{}(C(xr[i]) - mx) * inv);
          }
        }
      }
    });
  });
}

// Reduction over a non-innermost dim: columns of `inner` are processed together
// so the inner loops run over contiguous memory.
template <class T, bool Log>
void softmax_inner(const T* x, T* y, const Split3& sp) {
  using C = math::opmath_t<T>;
  constexpr int64_t kBlock = 256;
  int64_t nblk = (sp.inner + kBlock - 1) / kBlock;
  int64_t tasks = sp.outer * nblk;
  parallel_for(0, tasks, std::max<int64_t>(1, 16384 / std::max<int64_t>(sp.n * kBlock, 1)), [&](int64_t b, int64_t e) {
    std::vector<C> mx(kBlock), s(kBlock);
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / nblk, j0 = (t % nblk) * kBlock, w = std::min(kBlock, sp.inner - j0);
      const T* xb = x + o * sp.n * sp.inner + j0;
      T* yb = y + o * sp.n * sp.inner + j0;
      std::fill(mx.begin(), mx.begin() + w, -std::numeric_limits<C>::infinity());
      std::fill(s.begin(), s.begin() + w, C(0));
      for (int64_t i = 0; i < sp.n; ++i)
        for (int64_t j = 0; j < w; ++j) mx[j] = std::max(mx[j], C(xb[i * sp.inner + j]));
      for (int64_t i = 0; i < sp.n; ++i)
        for (int64_t j = 0; j < w; ++j) s[j] += std::exp(C(xb[i * sp.inner + j]) - mx[j]);
      for (int64_t j = 0; j < w; ++j) s[j] = Log ? mx[j] + std::log(s[j]) : C(1) / s[j];
      for (int64_t i = 0; i < sp.n; ++i)
        for (int64_t j = 0; j < w; ++j) {
          C v = C(xb[i * sp.inner + j]);
          yb[i * sp.inner + j] = Log ? T(v - s[j]) : T(std::exp(v - mx[j]) * s[j]);
        }
    }
  });
}

void softmax_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor& out = outs[0];
  if (out.numel() == 0) return;
  Tensor x = dense(c.in(0), out.dtype());
  int64_t d = x.dim() == 0 ? 0 : wrap_dim(c.attrs.i(0), x.dim(), c.name());
  Split3 sp(x.sizes(), d);
  bool log = c.op == OpId::log_softmax;
  visit_floating(out.dtype(), c.name(), [&]<class T>() {
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(out.data_ptr());
    if (sp.inner == 1) {
      if (log) softmax_lastdim<T, true>(xp, yp, sp.outer, sp.n);
      else softmax_lastdim<T, false>(xp, yp, sp.outer, sp.n);
    } else {
      if (log) softmax_inner<T, true>(xp, yp, sp);
      else softmax_inner<T, false>(xp, yp, sp);
    }
  });
}
KILN_REGISTER_KERNEL(softmax, CPU, softmax_kernel);
KILN_REGISTER_KERNEL(log_softmax, CPU, softmax_kernel);

// layer_norm over the trailing N elements of each of M rows. Two passes
// (mean, then the sum of squared deviations) for accuracy.
void layer_norm_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor& out = outs[0];
  if (out.numel() == 0) return;
  const Tensor& x0 = c.in(0);
  int64_t N = 1;
  for (int64_t s : c.attrs.ints(0)) N *= s;
  int64_t M = x0.numel() / N;
  double eps = c.attrs.f(1);
  visit_floating(out.dtype(), c.name(), [&]<class T>() {
    using C = math::opmath_t<T>;
    Tensor x = dense(x0, out.dtype());
    DType cd = dtype_of<C>();
    Tensor w = c.in(1).defined() ? dense(c.in(1), cd) : Tensor();
    Tensor b = c.in(2).defined() ? dense(c.in(2), cd) : Tensor();
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(out.data_ptr());
    const C* wp = w.defined() ? static_cast<const C*>(w.data_ptr()) : nullptr;
    const C* bp = b.defined() ? static_cast<const C*>(b.data_ptr()) : nullptr;
    parallel_for(0, M, std::max<int64_t>(1, 16384 / N), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T* xr = xp + r * N;
        T* yr = yp + r * N;
        C mu = 0;
        for (int64_t i = 0; i < N; ++i) mu += C(xr[i]);
        mu /= C(N);
        C var = 0;
        for (int64_t i = 0; i < N; ++i) {
          C dv = C(xr[i]) - mu;
          var += dv * dv;
        }
        C rstd = C(1) / std::sqrt(var / C(N) + C(eps));
        for (int64_t i = 0; i < N; ++i) {
          C v = (C(xr[i]) - mu) * rstd;
          if (wp) v *= wp[i];
          if (bp) v += bp[i];
          yr[i] = T(v);
        }
      }
    });
  });
}
KILN_REGISTER_KERNEL(layer_norm, CPU, layer_norm_kernel);

// _batch_norm_training (Note [Batch norm's training node]), a channel at a time: the mean and
// biased variance in double (two passes over the channel), then the normalised output in the
// opmath type; the decomposition takes about eight passes and as many temporaries.
void batch_norm_training_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x0 = c.in(0);
  const double eps = c.attrs.f(0);
  const int64_t N = x0.sizes()[0], Ch = x0.sizes()[1];
  const int64_t HW = N * Ch == 0 ? 0 : x0.numel() / (N * Ch), M = N * HW;
  const std::vector<double> w = c.in(1).defined() ? dense_doubles(c.in(1)) : std::vector<double>();
  const std::vector<double> b = c.in(2).defined() ? dense_doubles(c.in(2)) : std::vector<double>();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> means(static_cast<size_t>(Ch), nan), vars(static_cast<size_t>(Ch), nan);
  visit_floating(outs[0].dtype(), c.name(), [&]<class T>() {
    using C = math::opmath_t<T>;
    const Tensor x = dense(x0, outs[0].dtype());
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* yp = static_cast<T*>(outs[0].data_ptr());
    parallel_for(0, M > 0 ? Ch : 0, 1, [&](int64_t lo, int64_t hi) {
      with_best_isa([&] {
        for (int64_t ch = lo; ch < hi; ++ch) {
          auto channel_sum = [&](const auto& f) { return channel_lane_sum(N, Ch, HW, ch, f); };
          const double mean = channel_sum([&](int64_t e) { return C(xp[e]); }) / static_cast<double>(M);
          const C cm = C(mean);
          const double var = channel_sum([&](int64_t e) {
                               const C d = C(xp[e]) - cm;
                               return d * d;
                             }) /
                             static_cast<double>(M);
          means[static_cast<size_t>(ch)] = mean;
          vars[static_cast<size_t>(ch)] = var;
          const double rstd = 1 / std::sqrt(var + eps);
          const C a = C((w.empty() ? 1.0 : w[ch]) * rstd), sh = C(b.empty() ? 0.0 : b[ch]);
          for (int64_t n = 0; n < N; ++n) {
            const int64_t o = (n * Ch + ch) * HW;
            for (int64_t i = 0; i < HW; ++i) yp[o + i] = T((C(xp[o + i]) - cm) * a + sh);
          }
        }
      });
    });
  });
  store_doubles(outs[1], means);
  store_doubles(outs[2], vars);
}
KILN_REGISTER_KERNEL(_batch_norm_training, CPU, batch_norm_training_kernel);

// The fused backward kernels below read their operands in their own dtype and compute each
// element in the opmath type (float for float, Half and BFloat16), as PyTorch's CPU kernels do;
// their reductions (a row's or a channel's sums) accumulate in double. They used to convert
// every operand to double first: for gpt_nano's cross-entropy that is two 100 MB copies each way
// per step, and the time went to the copies and page faults, not the math.

// _batch_norm_backward (Note [Fused batch_norm backward]), a channel at a time: the statistics
// (two passes in training, the running ones in evaluation), the sums of g and g * xhat, then
// grad_x = w * rstd * (g - mean(g) - xhat * mean(g * xhat)) (training) or w * rstd * g
// (evaluation).
void batch_norm_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x0 = c.in(1);
  const bool training = c.attrs.b(0);
  const double eps = c.attrs.f(1);
  const int64_t N = x0.sizes()[0], Ch = x0.sizes()[1];
  const int64_t HW = N * Ch == 0 ? 0 : x0.numel() / (N * Ch), M = N * HW;
  const std::vector<double> w = c.in(2).defined() ? dense_doubles(c.in(2)) : std::vector<double>();
  const std::vector<double> rm = training ? std::vector<double>() : dense_doubles(c.in(3));
  const std::vector<double> rv = training ? std::vector<double>() : dense_doubles(c.in(4));
  std::vector<double> gw(static_cast<size_t>(Ch)), gb(static_cast<size_t>(Ch));
  visit_floating(outs[0].dtype(), c.name(), [&]<class T>() {
    using C = math::opmath_t<T>;
    const Tensor g = dense(c.in(0), outs[0].dtype()), x = dense(x0, outs[0].dtype());
    const T* gp = static_cast<const T*>(g.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* gxp = static_cast<T*>(outs[0].data_ptr());
    parallel_for(0, Ch, 1, [&](int64_t lo, int64_t hi) {
      with_best_isa([&] {
        for (int64_t ch = lo; ch < hi; ++ch) {
          // The sum of f(plane, i) over the channel's N planes of HW.
          auto channel_sum = [&](const auto& f) { return channel_lane_sum(N, Ch, HW, ch, f); };
          double mean = 0, rstd = 0;
          if (!training) {
            mean = rm[ch];
            rstd = 1 / std::sqrt(rv[ch] + eps);
          } else if (M > 0) {
            mean = channel_sum([&](int64_t e) { return C(xp[e]); }) / static_cast<double>(M);
            const C cm = C(mean);
            const double sq = channel_sum([&](int64_t e) {
              const C d = C(xp[e]) - cm;
              return d * d;
            });
            rstd = 1 / std::sqrt(sq / static_cast<double>(M) + eps);
          }
          const C cm = C(mean);
          const double sg = channel_sum([&](int64_t e) { return C(gp[e]); });
          const double sgx = channel_sum([&](int64_t e) { return C(gp[e]) * (C(xp[e]) - cm); }) * rstd;
          gw[ch] = sgx;
          gb[ch] = sg;
          const C a = C((w.empty() ? 1.0 : w[ch]) * rstd);
          const bool centred = training && M > 0;
          const C mg = centred ? C(sg / static_cast<double>(M)) : C(0);
          const C k = centred ? C(rstd * sgx / static_cast<double>(M)) : C(0);
          for (int64_t b = 0; b < N; ++b) {
            const int64_t o = (b * Ch + ch) * HW;
            for (int64_t i = 0; i < HW; ++i)
              gxp[o + i] = T(a * (C(gp[o + i]) - mg - (C(xp[o + i]) - cm) * k));
          }
        }
      });
    });
  });
  store_doubles(outs[1], gw);
  store_doubles(outs[2], gb);
}
KILN_REGISTER_KERNEL(_batch_norm_backward, CPU, batch_norm_backward_kernel);

// _layer_norm_backward (Note [Fused norm and activation backward]) over M rows of N: per row
// mean and rstd (two passes), then with gh = g * w, grad_x = rstd * (gh - mean(gh) -
// xhat * mean(gh * xhat)); grad_weight = sum over rows of g * xhat, grad_bias of g, summed a
// block of columns at a time so that the rows are read along memory.
void layer_norm_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x0 = c.in(1);
  int64_t N = 1;
  for (int64_t s : c.attrs.ints(0)) N *= s;
  const int64_t M = N == 0 ? 0 : x0.numel() / N;
  const double eps = c.attrs.f(1);
  std::vector<double> gw(static_cast<size_t>(N)), gb(static_cast<size_t>(N));
  visit_floating(outs[0].dtype(), c.name(), [&]<class T>() {
    using C = math::opmath_t<T>;
    const Tensor g = dense(c.in(0), outs[0].dtype()), x = dense(x0, outs[0].dtype());
    const Tensor w = c.in(2).defined() ? dense(c.in(2), dtype_of<C>()) : Tensor();
    const T* gp = static_cast<const T*>(g.data_ptr());
    const T* xp = static_cast<const T*>(x.data_ptr());
    const C* wp = w.defined() ? static_cast<const C*>(w.data_ptr()) : nullptr;
    T* gxp = static_cast<T*>(outs[0].data_ptr());
    // Each row's mean and rstd, for the column sums below.
    std::vector<C> mus(static_cast<size_t>(M)), rstds(static_cast<size_t>(M));
    parallel_for(0, M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)), [&](int64_t lo, int64_t hi) {
      with_best_isa([&] {
        for (int64_t r = lo; r < hi; ++r) {
          const T *gr = gp + r * N, *xr = xp + r * N;
          const double mu = lane_sum(N, [&](int64_t i) { return C(xr[i]); }) / static_cast<double>(N);
          const C cm = C(mu);
          const double var = lane_sum(N, [&](int64_t i) {
            const C d = C(xr[i]) - cm;
            return d * d;
          });
          const C rstd = C(1 / std::sqrt(var / static_cast<double>(N) + eps));
          mus[r] = cm;
          rstds[r] = rstd;
          auto gh = [&](int64_t i) { return wp ? C(gr[i]) * wp[i] : C(gr[i]); };
          const C mg = C(lane_sum(N, gh) / static_cast<double>(N));
          const C mgx = C(lane_sum(N, [&](int64_t i) { return gh(i) * ((C(xr[i]) - cm) * rstd); }) / static_cast<double>(N));
          T* gxr = gxp + r * N;
          for (int64_t i = 0; i < N; ++i) gxr[i] = T(rstd * (gh(i) - mg - ((C(xr[i]) - cm) * rstd) * mgx));
        }
      });
    });
    {
      constexpr int64_t kCols = 256;
      parallel_for(0, (N + kCols - 1) / kCols, 1, [&](int64_t lo, int64_t hi) {
        with_best_isa([&] {
          double sw[kCols], sb[kCols];
          for (int64_t blk = lo; blk < hi; ++blk) {
            const int64_t j0 = blk * kCols, wd = std::min(kCols, N - j0);
            std::fill(sw, sw + wd, 0.0);
            std::fill(sb, sb + wd, 0.0);
            for (int64_t r = 0; r < M; ++r) {
              const T *gr = gp + r * N + j0, *xr = xp + r * N + j0;
              const C mu = mus[r], rs = rstds[r];
              for (int64_t j = 0; j < wd; ++j) {
                sw[j] += static_cast<double>(C(gr[j]) * ((C(xr[j]) - mu) * rs));
                sb[j] += static_cast<double>(C(gr[j]));
              }
            }
            std::copy(sw, sw + wd, gw.begin() + j0);
            std::copy(sb, sb + wd, gb.begin() + j0);
          }
        });
      });
    }
  });
  store_doubles(outs[1], gw);
  store_doubles(outs[2], gb);
}
KILN_REGISTER_KERNEL(_layer_norm_backward, CPU, layer_norm_backward_kernel);

// _softmax_backward_data (Note [Fused norm and activation backward]), for each of the outer x
// inner rows along dim: softmax y (g - sum(g y)); log_softmax g - exp(y) sum(g).
void softmax_backward_data_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& y0 = c.in(1);
  if (y0.numel() == 0) return;
  const int64_t dim = y0.dim() == 0 ? 0 : wrap_dim(c.attrs.i(0), y0.dim(), c.name());
  const bool log = c.attrs.b(1);
  const Split3 sp(y0.sizes(), dim);
  visit_floating(outs[0].dtype(), c.name(), [&]<class T>() {
    using C = math::opmath_t<T>;
    const Tensor g = dense(c.in(0), outs[0].dtype()), y = dense(y0, outs[0].dtype());
    const T* gp = static_cast<const T*>(g.data_ptr());
    const T* yp = static_cast<const T*>(y.data_ptr());
    T* gxp = static_cast<T*>(outs[0].data_ptr());
    const int64_t n = sp.n, inner = sp.inner;
    parallel_for(0, sp.outer * inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t lo, int64_t hi) {
      with_best_isa([&] {
        for (int64_t t = lo; t < hi; ++t) {
          const int64_t base = (t / inner) * n * inner + t % inner;
          const T *gr = gp + base, *yr = yp + base;
          T* gxr = gxp + base;
          // inner == 1 (the softmax dim is the last) is the common case: its own loops, so that
          // they run over contiguous memory and vectorize.
          if (inner == 1) {
            const C s = C(log ? lane_sum(n, [&](int64_t i) { return C(gr[i]); })
                              : lane_sum(n, [&](int64_t i) { return C(gr[i]) * C(yr[i]); }));
            if (log)
              for (int64_t i = 0; i < n; ++i) gxr[i] = T(C(gr[i]) - math::Exp{}(C(yr[i])) * s);
            else
              for (int64_t i = 0; i < n; ++i) gxr[i] = T(C(yr[i]) * (C(gr[i]) - s));
          } else {
            const C s = C(log ? lane_sum(n, [&](int64_t i) { return C(gr[i * inner]); })
                              : lane_sum(n, [&](int64_t i) { return C(gr[i * inner]) * C(yr[i * inner]); }));
            for (int64_t i = 0; i < n; ++i) {
              const C gv = C(gr[i * inner]), yv = C(yr[i * inner]);
              gxr[i * inner] = T(log ? gv - math::Exp{}(yv) * s : yv * (gv - s));
            }
          }
        }
      });
    });
  });
}
KILN_REGISTER_KERNEL(_softmax_backward_data, CPU, softmax_backward_data_kernel);

}  // namespace
}  // namespace kiln::cpu
