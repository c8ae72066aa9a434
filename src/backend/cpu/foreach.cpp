// CPU kernels for the multi-tensor (foreach) ops (Note [Foreach ops]) and _fused_adam_.
#include <algorithm>
#include <cmath>

#include "backend/cpu/pointwise.h"

namespace kiln::cpu {
namespace {

// Note [Foreach kernels]
// One parallel region walks every tensor of the lists: their elements are
// numbered one after another and each thread takes a range of that numbering,
// so many small tensors (biases, norms) share a thread and a large one is
// split. Each element goes through the scalar functor of the single-tensor
// op, with scalars converted the same way, so a foreach step and a loop of
// single-tensor ops give bit-identical results (the optimizer tests check it).

// The operands of one list position: the written tensor first, then the inputs.
template <size_t N>
using Operands = std::array<const Tensor*, N>;

// out[i] = f(in...[i]) over one run of n elements, all of C++ type T (loops.h's elementwise_run).
template <class T, size_t>
using Repeat = T;  // T once per index of a pack

template <class T, size_t N, class F>
void run_loop(const std::array<char*, N>& p, const std::array<int64_t, N>& st, int64_t n, const F& f) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    elementwise_run<T, Repeat<T, I>...>(p, st, n, f);
  }(std::make_index_sequence<N - 1>{});
}

// Calls make_f.operator()<T>(k) for position k's functor and runs it over all
// positions in one parallel region (Note [Foreach kernels]).
template <size_t N, class MakeF>
void foreach_apply(const std::vector<Operands<N>>& ops, const MakeF& make_f) {
  std::vector<StridedIter<N>> iters;
  std::vector<int64_t> start{0};
  iters.reserve(ops.size());
  for (const Operands<N>& o : ops) {
    iters.emplace_back(o);
    start.push_back(start.back() + o[0]->numel());
  }
  parallel_for(0, start.back(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    size_t k = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
    for (; b < e; ++k) {
      const int64_t hi = std::min(e, start[k + 1]);
      if (hi <= b) continue;  // an empty tensor
      visit_in_set<TypeSet::Floating>(ops[k][0]->dtype(), [&]<class T>() {
        const auto f = make_f.template operator()<T>(k);
        iters[k].for_range(b - start[k], hi - start[k],
                           [&](const std::array<char*, N>& p, const std::array<int64_t, N>& st, int64_t n) {
                             run_loop<T, N>(p, st, n, f);
                           });
      });
      b = hi;
    }
  });
}

// Position i's operands: outs[i] (or self[i] when in place), then list l's tensor i for each list.
template <size_t N>
std::vector<Operands<N>> operands(const OpCall& c, const std::vector<Tensor>& outs) {
  constexpr size_t lists = N - 1;
  const size_t n = c.inputs.size() / lists;
  std::vector<Operands<N>> ops(n);
  for (size_t i = 0; i < n; ++i) {
    ops[i][0] = outs.empty() ? &c.inputs[i] : &outs[i];
    for (size_t l = 0; l < lists; ++l) ops[i][l + 1] = &c.inputs[l * n + i];
  }
  return ops;
}

// The k-th of the per-tensor scalars (a single value applies to every tensor).
double scalar_at(const OpCall& c, size_t k) {
  const std::vector<double>& s = c.attrs.doubles(0);
  return s.size() == 1 ? s[0] : s[k];
}

// Unary: out = F(self). The single-tensor kernels apply F in the tensor's dtype.
template <class F>
void unary_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  foreach_apply(operands<2>(c, outs), []<class T>(size_t) { return [](T a) { return F{}(a); }; });
}
KILN_REGISTER_KERNEL(_foreach_neg, CPU, unary_kernel<math::Neg>);
KILN_REGISTER_KERNEL(_foreach_sqrt, CPU, unary_kernel<math::Sqrt>);

// self + alpha * other, alpha in opmath (as add's kernel; alpha = 1 gives the same bits as Add).
void add_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Scalar& alpha = c.attrs.s(0);
  foreach_apply(operands<3>(c, outs), [&]<class T>(size_t) {
    using C = math::opmath_t<T>;
    return math::AddAlpha<C>{alpha.to<C>()};
  });
}
KILN_REGISTER_KERNEL(_foreach_add, CPU, add_kernel);
KILN_REGISTER_KERNEL(_foreach_add_, CPU, add_kernel);

// Ops with a tensor scalar: the single-tensor ops wrap it as a 0-d tensor converted to the
// tensor's dtype, so the value is converted to T here too.
template <class F>
void scalar_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  foreach_apply(operands<2>(c, outs), [&]<class T>(size_t k) {
    const T s = convert<T>(scalar_at(c, k));
    return [s](T a) { return F{}(a, s); };
  });
}
KILN_REGISTER_KERNEL(_foreach_add_scalar_, CPU, scalar_kernel<math::Add>);
KILN_REGISTER_KERNEL(_foreach_mul_scalar_, CPU, scalar_kernel<math::Mul>);
KILN_REGISTER_KERNEL(_foreach_div_scalar_, CPU, scalar_kernel<math::Div>);

// addcmul/addcdiv take their value in opmath, as the single-tensor kernels.
template <template <class> class F>
void addc_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  foreach_apply(operands<4>(c, outs), [&]<class T>(size_t k) {
    using C = math::opmath_t<T>;
    return F<C>{static_cast<C>(scalar_at(c, k))};
  });
}
KILN_REGISTER_KERNEL(_foreach_addcmul, CPU, addc_kernel<math::Addcmul>);
KILN_REGISTER_KERNEL(_foreach_addcmul_, CPU, addc_kernel<math::Addcmul>);
KILN_REGISTER_KERNEL(_foreach_addcdiv_, CPU, addc_kernel<math::Addcdiv>);

void lerp_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  foreach_apply(operands<3>(c, outs), [&]<class T>(size_t k) {
    const T w = convert<T>(scalar_at(c, k));
    return [w](T a, T b) { return math::Lerp{}(a, b, w); };
  });
}
KILN_REGISTER_KERNEL(_foreach_lerp_, CPU, lerp_kernel);

void maximum_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  foreach_apply(operands<3>(c, outs), []<class T>(size_t) { return math::Maximum{}; });
}
KILN_REGISTER_KERNEL(_foreach_maximum_, CPU, maximum_kernel);

// Note [Fused Adam on the CPU]
// A dense float run of _fused_adam_ is one loop over AdamStep, the scalar functor itself, that the
// compiler vectorizes: the file is built with -fno-math-errno (sqrt vectorizes) and
// -fno-trapping-math (the lerp's select), and without FMA contraction, so it rounds as the foreach
// step, bit for bit. Built twice, for the baseline ISA and for AVX2 (the widest float vectors of
// a Zen or a Xeon without AVX-512's clock penalty), picked at run time. About 8x the strided
// loop, which stayed scalar and compute-bound (a division and a square root per element).
struct DenseAdamRun {
  const math::AdamStep<float>& f;
  float* p;
  const float* g;
  float* m;
  float* v;
  float* vmax;
  int64_t n;
};

// Each combination of the flags that change the arithmetic's shape gets a loop of its own, in
// which AdamStep's branches are constant and its lerp's select is computed both ways
// (-fno-trapping-math allows that): the loop vectorizes.
template <bool Coupled, bool Amsgrad>
[[gnu::always_inline]] inline void dense_adam(const DenseAdamRun& r) {
  math::AdamStep<float> f = r.f;
  f.weight_decay = Coupled || (r.f.weight_decay && r.f.decoupled);
  f.decoupled = !Coupled;
  f.amsgrad = Amsgrad;
  float* __restrict p = r.p;
  const float* __restrict g = r.g;
  float* __restrict m = r.m;
  float* __restrict v = r.v;
  float* __restrict vmax = r.vmax;
  for (int64_t i = 0; i < r.n; ++i) f(p[i], g[i], m[i], v[i], vmax + i);
}

[[gnu::always_inline]] inline void dense_adam_any(const DenseAdamRun& r) {
  const bool coupled = r.f.weight_decay && !r.f.decoupled;
  if (coupled)
    r.f.amsgrad ? dense_adam<true, true>(r) : dense_adam<true, false>(r);
  else
    r.f.amsgrad ? dense_adam<false, true>(r) : dense_adam<false, false>(r);
}
[[gnu::target("avx2")]] void dense_adam_avx2(const DenseAdamRun& r) { dense_adam_any(r); }
void dense_adam_baseline(const DenseAdamRun& r) { dense_adam_any(r); }
const bool kHaveAvx2 = __builtin_cpu_supports("avx2");

// _fused_adam_ (Note [Fused Adam]): one parallel region over every position, as foreach_apply,
// each element read and written once. Operands: p, g, m, v, vmax (v again without amsgrad).
void fused_adam_kernel(const OpCall& c, std::vector<Tensor>&) {
  const bool amsgrad = c.attrs.b(7);
  const size_t n = c.inputs.size() / (amsgrad ? 5 : 4);
  std::vector<StridedIter<5>> iters;
  std::vector<int64_t> start{0};
  iters.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor* v = &c.inputs[3 * n + i];
    iters.emplace_back(
        Operands<5>{&c.inputs[i], &c.inputs[n + i], &c.inputs[2 * n + i], v, amsgrad ? &c.inputs[4 * n + i] : v});
    start.push_back(start.back() + c.inputs[i].numel());
  }
  parallel_for(0, start.back(), kElementwiseGrain, [&](int64_t b, int64_t e) {
    size_t k = static_cast<size_t>(std::upper_bound(start.begin(), start.end(), b) - start.begin()) - 1;
    for (; b < e; ++k) {
      const int64_t hi = std::min(e, start[k + 1]);
      if (hi <= b) continue;  // an empty tensor
      visit_in_set<TypeSet::Floating>(c.inputs[k].dtype(), [&]<class T>() {
        using C = math::opmath_t<T>;
        math::AdamStep<C> f = math::AdamStep<C>::make(c.attrs.f(2), c.attrs.f(3), c.attrs.f(4), c.attrs.f(5),
                                                      c.attrs.f(6), amsgrad, c.attrs.b(8), c.attrs.b(9));
        f.neg_step_size = static_cast<C>(-c.attrs.doubles(0)[k]);
        f.bc2_sqrt = static_cast<C>(c.attrs.doubles(1)[k]);
        iters[k].for_range(b - start[k], hi - start[k],
                           [&](const std::array<char*, 5>& p, const std::array<int64_t, 5>& st, int64_t len) {
                             if constexpr (std::is_same_v<T, float>) {
                               if (std::all_of(st.begin(), st.end(), [](int64_t s) { return s == 4; })) {
                                 const DenseAdamRun r{f,
                                                      reinterpret_cast<float*>(p[0]),
                                                      reinterpret_cast<const float*>(p[1]),
                                                      reinterpret_cast<float*>(p[2]),
                                                      reinterpret_cast<float*>(p[3]),
                                                      reinterpret_cast<float*>(p[4]),
                                                      len};
                                 kHaveAvx2 ? dense_adam_avx2(r) : dense_adam_baseline(r);
                                 return;
                               }
                             }
                             for (int64_t j = 0; j < len; ++j)
                               f(*reinterpret_cast<T*>(p[0] + j * st[0]), *reinterpret_cast<const T*>(p[1] + j * st[1]),
                                 *reinterpret_cast<T*>(p[2] + j * st[2]), *reinterpret_cast<T*>(p[3] + j * st[3]),
                                 reinterpret_cast<T*>(p[4] + j * st[4]));
                           });
      });
      b = hi;
    }
  });
}
KILN_REGISTER_KERNEL(_fused_adam_, CPU, fused_adam_kernel);

}  // namespace
}  // namespace kiln::cpu
