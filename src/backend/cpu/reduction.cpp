// CPU kernels for reductions (sum prod mean amax amin all any) on the loops of
// reduce.h, and for index reductions (max/min with dim, argmax/argmin) and scans
// (cumsum/cumprod) over one dim.
#include "backend/cpu/reduce.h"
#include "ops/meta_util.h"

namespace kiln::cpu {

ReducePlan make_reduce_plan(const Tensor& x, const std::vector<bool>& mask) {
  ReducePlan pl;
  std::vector<RDim> kept, red;
  for (int64_t d = 0; d < x.dim(); ++d) {
    int64_t sz = x.sizes()[d];
    if (mask[d]) {
      pl.n_red *= sz;
      if (sz != 1) red.push_back({sz, x.strides()[d]});
    } else {
      pl.n_out *= sz;
      if (sz != 1) kept.push_back({sz, x.strides()[d]});
    }
  }
  // Reduced dims may be visited in any order: walk them in memory order.
  std::stable_sort(red.begin(), red.end(),
                   [](const RDim& a, const RDim& b) { return std::abs(a.stride) > std::abs(b.stride); });
  auto coalesce = [](const std::vector<RDim>& v) {
    std::vector<RDim> r;
    for (const RDim& d : v) {
      if (!r.empty() && r.back().stride == d.stride * d.size) {
        r.back().size *= d.size;
        r.back().stride = d.stride;
      } else {
        r.push_back(d);
      }
    }
    return r;
  };
  pl.kept = coalesce(kept);
  pl.red = coalesce(red);
  return pl;
}

Tensor contiguous_as(const Tensor& x, DType t) {
  if (x.dtype() == t && x.is_contiguous()) return x;
  Tensor out = make_tensor(x.sizes(), t, x.device());
  copy_cpu(out, x);
  return out;
}

namespace {

std::vector<bool> mask_of(const OpCall& c, size_t attr) { return dim_mask(c.attrs.ints(attr), c.in(0).dim(), c.name()); }

// sum/prod/mean compute in the output dtype, except that integral inputs with an
// integral output accumulate straight from the input (in int64, as torch).
Tensor compute_input(const Tensor& x, DType out) {
  if (is_integral(x.dtype(), true) && is_integral(out, true)) return x;
  return cast_to(x, out);
}

void sum_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor x = compute_input(c.in(0), outs[0].dtype());
  auto mask = mask_of(c, 0);
  visit_dtype(x.dtype(), [&]<class T>() { reduce_into(outs[0], x, mask, SumOp<T>{}); });
}
KILN_REGISTER_KERNEL(sum, CPU, sum_kernel);

void mean_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor x = cast_to(c.in(0), outs[0].dtype());
  auto mask = mask_of(c, 0);
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) n *= x.sizes()[d];
  visit_floating(x.dtype(), "mean", [&]<class T>() {
    SumOp<T> op;
    op.scale = 1.0 / static_cast<double>(n);  // n == 0: 0 * inf = nan, as torch
    reduce_into(outs[0], x, mask, op);
  });
}
KILN_REGISTER_KERNEL(mean, CPU, mean_kernel);

void prod_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor x = compute_input(c.in(0), outs[0].dtype());
  auto mask = mask_of(c, 0);
  visit_dtype(x.dtype(), [&]<class T>() { reduce_into(outs[0], x, mask, ProdOp<T>{}); });
}
KILN_REGISTER_KERNEL(prod, CPU, prod_kernel);

template <bool IsMax>
void minmax_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  auto mask = mask_of(c, 0);
  visit_dtype(c.in(0).dtype(), [&]<class T>() { reduce_into(outs[0], c.in(0), mask, MinMaxOp<T, IsMax>{}); });
}
KILN_REGISTER_KERNEL(amax, CPU, minmax_kernel<true>);
KILN_REGISTER_KERNEL(amin, CPU, minmax_kernel<false>);

template <bool IsAll>
void logical_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  auto mask = mask_of(c, 0);
  visit_dtype(c.in(0).dtype(), [&]<class T>() { reduce_into(outs[0], c.in(0), mask, LogicalOp<T, IsAll>{}); });
}
KILN_REGISTER_KERNEL(all, CPU, logical_kernel<true>);
KILN_REGISTER_KERNEL(any, CPU, logical_kernel<false>);

// ---- index reductions: x viewed as [outer, n, inner] (contiguous) ----

template <class V, bool IsMax>
inline bool better(V x, V best) {
  if (is_nan_value(x)) return !is_nan_value(best);  // the first NaN wins
  return IsMax ? x > best : x < best;                // strict: the first of ties wins
}

template <class T, bool IsMax>
void index_reduce(const T* x, int64_t outer, int64_t n, int64_t inner, T* vals, int64_t* idx) {
  using V = math::opmath_t<T>;
  if (inner == 1) {
    auto scan = [&](const T* p, int64_t b, int64_t e, V& bv, int64_t& bi) {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        // Vectorized extreme (NaN if any), then its first occurrence: the index
        // the scalar scan finds (strict comparisons keep the first of ties, the
        // first NaN wins).
        if (e - b >= 2 * kLanes) {
          MinMaxOp<T, IsMax> op;
          T m = op.contig(p + b, e - b, op.acc_init());
          int64_t k = b;
          if (m != m) {
            while (p[k] == p[k]) ++k;
          } else {
            while (p[k] != m) ++k;
          }
          if (better<V, IsMax>(p[k], bv)) bv = p[k], bi = k;
          return;
        }
      }
      for (int64_t k = b; k < e; ++k) {
        V v = static_cast<V>(p[k]);
        if (better<V, IsMax>(v, bv)) bv = v, bi = k;
      }
    };
    int nt = get_num_threads();
    if (outer < nt && n > 4 * kReduceGrain && !in_parallel_region()) {
      // Long rows: split each row, then merge chunks in order.
      for (int64_t o = 0; o < outer; ++o) {
        const T* p = x + o * n;
        std::vector<V> cv(nt);
        std::vector<int64_t> ci(nt, -1);
        parallel_for(0, nt, 1, [&](int64_t b, int64_t e) {
          for (int64_t c = b; c < e; ++c) {
            int64_t kb = n * c / nt, ke = n * (c + 1) / nt;
            V bv = static_cast<V>(p[kb]);
            int64_t bi = kb;
            scan(p, kb + 1, ke, bv, bi);
            cv[c] = bv;
            ci[c] = bi;
          }
        });
        V bv = cv[0];
        int64_t bi = ci[0];
        for (int c = 1; c < nt; ++c)
          if (better<V, IsMax>(cv[c], bv)) bv = cv[c], bi = ci[c];
        if (vals) vals[o] = static_cast<T>(bv);
        idx[o] = bi;
      }
      return;
    }
    parallel_for(0, outer, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* p = x + o * n;
        V bv = static_cast<V>(p[0]);
        int64_t bi = 0;
        scan(p, 1, n, bv, bi);
        if (vals) vals[o] = static_cast<T>(bv);
        idx[o] = bi;
      }
    });
    return;
  }
  // Reduce over a strided dim: a block of contiguous outputs walks whole rows.
  int64_t nblk = (inner + kBlock - 1) / kBlock;
  parallel_for(0, outer * nblk, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(n * kBlock, 1)),
               [&](int64_t b, int64_t e) {
                 V bv[kBlock];
                 int64_t bi[kBlock];
                 for (int64_t u = b; u < e; ++u) {
                   int64_t o = u / nblk, j0 = (u % nblk) * kBlock, w = std::min(kBlock, inner - j0);
                   const T* p = x + o * n * inner + j0;
                   for (int64_t j = 0; j < w; ++j) bv[j] = static_cast<V>(p[j]), bi[j] = 0;
                   for (int64_t k = 1; k < n; ++k) {
                     const T* row = p + k * inner;
                     for (int64_t j = 0; j < w; ++j) {
                       V v = static_cast<V>(row[j]);
                       if (better<V, IsMax>(v, bv[j])) bv[j] = v, bi[j] = k;
                     }
                   }
                   for (int64_t j = 0; j < w; ++j) {
                     if (vals) vals[o * inner + j0 + j] = static_cast<T>(bv[j]);
                     idx[o * inner + j0 + j] = bi[j];
                   }
                 }
               });
}

// Runs index_reduce over `dim` of x (nullopt: every element, flattened).
template <bool IsMax>
void index_reduce_dispatch(const Tensor& x_in, std::optional<int64_t> dim, const Tensor* vals, const Tensor& idx) {
  Tensor x = contiguous_as(x_in, x_in.dtype());
  if (x.numel() == 0) return;
  int64_t outer = 1, n = x.numel(), inner = 1;
  if (dim && x.dim() > 0) {
    int64_t d = wrap_dim(*dim, x.dim(), "max");
    n = x.sizes()[d];
    outer = inner = 1;
    for (int64_t i = 0; i < d; ++i) outer *= x.sizes()[i];
    for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.sizes()[i];
  }
  Tensor iout = idx.is_contiguous() && idx.dtype() == kInt64 ? idx : make_tensor(idx.sizes(), kInt64, idx.device());
  visit_dtype(x.dtype(), [&]<class T>() {
    Tensor vout;
    if (vals) vout = vals->is_contiguous() ? *vals : make_tensor(vals->sizes(), vals->dtype(), vals->device());
    index_reduce<T, IsMax>(static_cast<const T*>(x.data_ptr()), outer, n, inner,
                           vals ? static_cast<T*>(vout.data_ptr()) : nullptr,
                           static_cast<int64_t*>(iout.data_ptr()));
    if (vals && !vout.is_same(*vals)) copy_cpu(*vals, vout);
  });
  if (!iout.is_same(idx)) copy_cpu(idx, iout);
}

template <bool IsMax>
void max_dim_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  index_reduce_dispatch<IsMax>(c.in(0), c.attrs.i(0), &outs[0], outs[1]);
}
KILN_REGISTER_KERNEL(max, CPU, max_dim_kernel<true>);
KILN_REGISTER_KERNEL(min, CPU, max_dim_kernel<false>);

template <bool IsMax>
void argmax_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  index_reduce_dispatch<IsMax>(c.in(0), c.attrs.opt_i(0), nullptr, outs[0]);
}
KILN_REGISTER_KERNEL(argmax, CPU, argmax_kernel<true>);
KILN_REGISTER_KERNEL(argmin, CPU, argmax_kernel<false>);

// ---- scans: x viewed as [outer, n, inner] (contiguous, in the output dtype) ----

template <class T, bool IsSum>
void scan_loop(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  // Accumulate floats in double (half in float) and integers in int64, wrapping.
  using A = std::conditional_t<math::is_floating_v<T>, std::conditional_t<math::is_reduced_float_v<T>, float, double>,
                               int64_t>;
  auto op = [](A a, A v) -> A {
    if constexpr (std::is_same_v<A, int64_t>) return IsSum ? math::detail::wrap_add(a, v) : math::detail::wrap_mul(a, v);
    else return IsSum ? a + v : a * v;
  };
  const A init = IsSum ? A(0) : A(1);
  int64_t nblk = (inner + kBlock - 1) / kBlock;
  parallel_for(0, outer * nblk, std::max<int64_t>(1, kReduceGrain / std::max<int64_t>(n * std::min(inner, kBlock), 1)),
               [&](int64_t b, int64_t e) {
                 A acc[kBlock];
                 for (int64_t u = b; u < e; ++u) {
                   int64_t o = u / nblk, j0 = (u % nblk) * kBlock, w = std::min(kBlock, inner - j0);
                   int64_t base = o * n * inner + j0;
                   for (int64_t j = 0; j < w; ++j) acc[j] = init;
                   for (int64_t k = 0; k < n; ++k) {
                     const T* row = x + base + k * inner;
                     T* out = y + base + k * inner;
                     for (int64_t j = 0; j < w; ++j) {
                       acc[j] = op(acc[j], convert<A>(row[j]));
                       out[j] = convert<T>(acc[j]);
                     }
                   }
                 }
               });
}

template <bool IsSum>
void scan_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  Tensor x = contiguous_as(c.in(0), out.dtype());
  int64_t outer = 1, n = 1, inner = 1;
  if (x.dim() > 0) {
    int64_t d = wrap_dim(c.attrs.i(0), x.dim(), c.name());
    n = x.sizes()[d];
    for (int64_t i = 0; i < d; ++i) outer *= x.sizes()[i];
    for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.sizes()[i];
  }
  Tensor y = out.is_contiguous() ? out : make_tensor(out.sizes(), out.dtype(), out.device());
  visit_dtype(out.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      KILN_FAIL(c.name(), ": not implemented for output dtype Bool");
    } else {
      scan_loop<T, IsSum>(static_cast<const T*>(x.data_ptr()), static_cast<T*>(y.data_ptr()), outer, n, inner);
    }
  });
  if (!y.is_same(out)) copy_cpu(out, y);
}
KILN_REGISTER_KERNEL(cumsum, CPU, scan_kernel<true>);
KILN_REGISTER_KERNEL(cumprod, CPU, scan_kernel<false>);

}  // namespace
}  // namespace kiln::cpu
