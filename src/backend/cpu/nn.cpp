// CPU kernels for softmax, log_softmax and layer_norm: one pass per row over
// contiguous data, computing in the opmath type (float for Half/BFloat16),
// parallel over rows; and the fused backward ops _batch_norm_backward, _layer_norm_backward and
// _softmax_backward_data, in double (the reference the CUDA kernels are tested against). The decompositions in
// src/ops/nn_*.cpp define the semantics; these are the fast eager path.
#include <cmath>
#include <vector>

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

template <class T, bool Log>
void softmax_lastdim(const T* x, T* y, int64_t rows, int64_t n) {
  using C = math::opmath_t<T>;
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      C mx = -std::numeric_limits<C>::infinity();
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, C(xr[i]));
      // A row of -inf (or a NaN) has no finite shift: x - mx gives NaN, as torch.
      C s = 0;
      if constexpr (Log) {
        for (int64_t i = 0; i < n; ++i) s += std::exp(C(xr[i]) - mx);
        C lse = mx + std::log(s);
        for (int64_t i = 0; i < n; ++i) yr[i] = T(C(xr[i]) - lse);
      } else {
        // Write exp into y when T is C (saves recomputing it); else recompute.
        for (int64_t i = 0; i < n; ++i) {
          C ev = std::exp(C(xr[i]) - mx);
          if constexpr (std::is_same_v<T, C>) yr[i] = ev;
          s += ev;
        }
        C inv = C(1) / s;
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<T, C>) yr[i] = yr[i] * inv;
          else yr[i] = T(std::exp(C(xr[i]) - mx) * inv);
        }
      }
    }
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

// _batch_norm_backward (Note [Fused batch_norm backward]) in double, a channel at a time: the
// statistics (two passes in training, the running ones in evaluation), the sums of g and
// g * xhat, then grad_x = w * rstd * (g - mean(g) - xhat * mean(g * xhat)) (training) or
// w * rstd * g (evaluation).
void batch_norm_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x0 = c.in(1);
  const bool training = c.attrs.b(0);
  const double eps = c.attrs.f(1);
  const int64_t N = x0.sizes()[0], C = x0.sizes()[1];
  const int64_t HW = N * C == 0 ? 0 : x0.numel() / (N * C), M = N * HW;
  const DType d = DType::Float64;
  Tensor g = dense(c.in(0), d), x = dense(x0, d);
  Tensor w = c.in(2).defined() ? dense(c.in(2), d) : Tensor();
  Tensor rm = training ? Tensor() : dense(c.in(3), d), rv = training ? Tensor() : dense(c.in(4), d);
  Tensor gx = make_tensor(x0.sizes(), d, x0.device()), gw = make_tensor({C}, d, x0.device()),
         gb = make_tensor({C}, d, x0.device());
  const double* gp = static_cast<const double*>(g.data_ptr());
  const double* xp = static_cast<const double*>(x.data_ptr());
  const double* wp = w.defined() ? static_cast<const double*>(w.data_ptr()) : nullptr;
  double* gxp = static_cast<double*>(gx.data_ptr());
  double* gwp = static_cast<double*>(gw.data_ptr());
  double* gbp = static_cast<double*>(gb.data_ptr());
  parallel_for(0, C, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t ch = lo; ch < hi; ++ch) {
      auto each = [&](auto&& f) {
        for (int64_t b = 0; b < N; ++b)
          for (int64_t i = 0; i < HW; ++i) f((b * C + ch) * HW + i);
      };
      double mean = 0, rstd = 0;
      if (!training) {
        mean = static_cast<const double*>(rm.data_ptr())[ch];
        rstd = 1 / std::sqrt(static_cast<const double*>(rv.data_ptr())[ch] + eps);
      } else if (M > 0) {
        double s = 0, sq = 0;
        each([&](int64_t e) { s += xp[e]; });
        mean = s / static_cast<double>(M);
        each([&](int64_t e) { sq += (xp[e] - mean) * (xp[e] - mean); });
        rstd = 1 / std::sqrt(sq / static_cast<double>(M) + eps);
      }
      double sg = 0, sgx = 0;
      each([&](int64_t e) {
        sg += gp[e];
        sgx += gp[e] * (xp[e] - mean) * rstd;
      });
      gwp[ch] = sgx;
      gbp[ch] = sg;
      const double a = (wp ? wp[ch] : 1.0) * rstd;
      if (training && M > 0) {
        const double mg = sg / static_cast<double>(M), mgx = sgx / static_cast<double>(M);
        each([&](int64_t e) { gxp[e] = a * (gp[e] - mg - (xp[e] - mean) * rstd * mgx); });
      } else {
        each([&](int64_t e) { gxp[e] = a * gp[e]; });
      }
    }
  });
  copy_cpu(outs[0], gx);
  copy_cpu(outs[1], gw);
  copy_cpu(outs[2], gb);
}
KILN_REGISTER_KERNEL(_batch_norm_backward, CPU, batch_norm_backward_kernel);

// _layer_norm_backward (Note [Fused norm and activation backward]) in double over M rows of N:
// per row mean and rstd (two passes), then with gh = g * w, grad_x = rstd * (gh - mean(gh) -
// xhat * mean(gh * xhat)); grad_weight = sum over rows of g * xhat, grad_bias of g.
void layer_norm_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x0 = c.in(1);
  int64_t N = 1;
  for (int64_t s : c.attrs.ints(0)) N *= s;
  const int64_t M = N == 0 ? 0 : x0.numel() / N;
  const double eps = c.attrs.f(1);
  const DType d = DType::Float64;
  Tensor g = dense(c.in(0), d), x = dense(x0, d);
  Tensor w = c.in(2).defined() ? dense(c.in(2), d) : Tensor();
  Tensor gx = make_tensor(x0.sizes(), d, x0.device());
  Tensor xhat = make_tensor(x0.sizes(), d, x0.device());  // kept for the column sums below
  const double* gp = static_cast<const double*>(g.data_ptr());
  const double* xp = static_cast<const double*>(x.data_ptr());
  const double* wp = w.defined() ? static_cast<const double*>(w.data_ptr()) : nullptr;
  double* gxp = static_cast<double*>(gx.data_ptr());
  double* hp = static_cast<double*>(xhat.data_ptr());
  parallel_for(0, M, std::max<int64_t>(1, 16384 / std::max<int64_t>(N, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      const double *gr = gp + r * N, *xr = xp + r * N;
      double *gxr = gxp + r * N, *hr = hp + r * N;
      double mu = 0, var = 0;
      for (int64_t i = 0; i < N; ++i) mu += xr[i];
      mu /= static_cast<double>(N);
      for (int64_t i = 0; i < N; ++i) var += (xr[i] - mu) * (xr[i] - mu);
      const double rstd = 1 / std::sqrt(var / static_cast<double>(N) + eps);
      double sgh = 0, sghx = 0;
      for (int64_t i = 0; i < N; ++i) {
        hr[i] = (xr[i] - mu) * rstd;
        const double gh = wp ? gr[i] * wp[i] : gr[i];
        sgh += gh;
        sghx += gh * hr[i];
      }
      const double mg = sgh / static_cast<double>(N), mgx = sghx / static_cast<double>(N);
      for (int64_t i = 0; i < N; ++i) gxr[i] = rstd * ((wp ? gr[i] * wp[i] : gr[i]) - mg - hr[i] * mgx);
    }
  });
  Tensor gw = make_tensor(outs[1].sizes(), d, x0.device()), gb = make_tensor(outs[2].sizes(), d, x0.device());
  double* gwp = static_cast<double*>(gw.data_ptr());
  double* gbp = static_cast<double*>(gb.data_ptr());
  parallel_for(0, N, std::max<int64_t>(1, 16384 / std::max<int64_t>(M, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      double sw = 0, sb = 0;
      for (int64_t r = 0; r < M; ++r) {
        sw += gp[r * N + i] * hp[r * N + i];
        sb += gp[r * N + i];
      }
      gwp[i] = sw;
      gbp[i] = sb;
    }
  });
  copy_cpu(outs[0], gx);
  copy_cpu(outs[1], gw);
  copy_cpu(outs[2], gb);
}
KILN_REGISTER_KERNEL(_layer_norm_backward, CPU, layer_norm_backward_kernel);

// _softmax_backward_data (Note [Fused norm and activation backward]) in double, for each of the
// outer x inner rows along dim: softmax y (g - sum(g y)); log_softmax g - exp(y) sum(g).
void softmax_backward_data_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& y0 = c.in(1);
  if (y0.numel() == 0) return;
  const int64_t dim = y0.dim() == 0 ? 0 : wrap_dim(c.attrs.i(0), y0.dim(), c.name());
  const bool log = c.attrs.b(1);
  const Split3 sp(y0.sizes(), dim);
  const DType d = DType::Float64;
  Tensor g = dense(c.in(0), d), y = dense(y0, d), gx = make_tensor(y0.sizes(), d, y0.device());
  const double* gp = static_cast<const double*>(g.data_ptr());
  const double* yp = static_cast<const double*>(y.data_ptr());
  double* gxp = static_cast<double*>(gx.data_ptr());
  parallel_for(0, sp.outer * sp.inner, std::max<int64_t>(1, 16384 / std::max<int64_t>(sp.n, 1)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t t = lo; t < hi; ++t) {
                   const int64_t base = (t / sp.inner) * sp.n * sp.inner + t % sp.inner;
                   double s = 0;
                   for (int64_t i = 0; i < sp.n; ++i) {
                     const int64_t e = base + i * sp.inner;
                     s += log ? gp[e] : gp[e] * yp[e];
                   }
                   for (int64_t i = 0; i < sp.n; ++i) {
                     const int64_t e = base + i * sp.inner;
                     gxp[e] = log ? gp[e] - std::exp(yp[e]) * s : yp[e] * (gp[e] - s);
                   }
                 }
               });
  copy_cpu(outs[0], gx);
}
KILN_REGISTER_KERNEL(_softmax_backward_data, CPU, softmax_backward_data_kernel);

}  // namespace
}  // namespace kiln::cpu
