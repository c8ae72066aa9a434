// Strided elementwise loops for CPU kernels (Note [Elementwise iteration]).
#pragma once
#include <algorithm>
#include <array>
#include <cstring>
#include <numeric>
#include <tuple>
#include <utility>
#include <vector>

#include "backend/cpu/isa.h"
#include "core/convert.h"
#include "core/parallel.h"
#include "core/tensor_impl.h"
#include "core/dtype_dispatch.h"

namespace kiln::cpu {

// Note [Elementwise iteration]
// Operand 0 is the output; inputs are viewed at the output's shape (broadcast
// dims get stride 0). Dims are ordered by the output's strides (innermost
// last) and adjacent dims that are contiguous for every operand are merged,
// so a dense tensor of any shape becomes one flat loop that vectorizes.
// Work is split across threads by ranges of the flattened index.
template <size_t N>
struct StridedIter {
  // Inline buffers: a tiny op must not pay a heap allocation per loop dim.
  using Dims = SmallVector<int64_t, 8>;
  Dims sizes;                   // coalesced, innermost last
  std::array<Dims, N> strides;  // in bytes, per operand
  std::array<char*, N> base{};
  int64_t numel = 0;

  StridedIter(const std::array<const Tensor*, N>& ops) {
    const Tensor& out = *ops[0];
    int64_t nd = out.dim();
    numel = out.numel();
    // Broadcast strides of every operand to the output shape.
    std::array<Dims, N> st;
    for (size_t k = 0; k < N; ++k) {
      const Tensor& t = *ops[k];
      base[k] = static_cast<char*>(t.data_ptr());
      st[k].assign(nd, 0);
      int64_t off = nd - t.dim();
      for (int64_t d = 0; d < t.dim(); ++d)
        st[k][d + off] = t.sizes()[d] == 1 && out.sizes()[d + off] != 1 ? 0 : t.strides()[d] * int64_t(t.element_size());
    }
    // Order dims by the output's stride (largest first) so the output is walked in memory order.
    Dims perm(nd);
    std::iota(perm.begin(), perm.end(), 0);
    // A stable insertion sort: std::stable_sort would allocate a buffer, and nd is small.
    for (int64_t i = 1; i < nd; ++i)
      for (int64_t j = i; j > 0 && std::abs(st[0][perm[j - 1]]) < std::abs(st[0][perm[j]]); --j)
        std::swap(perm[j - 1], perm[j]);
    // Drop size-1 dims, then merge dims that every operand steps through evenly.
    for (int64_t i = 0; i < nd; ++i) {
      int64_t d = perm[i];
      int64_t sz = out.sizes()[d];
      if (sz == 1) continue;
      sizes.push_back(sz);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(st[k][d]);
    }
    coalesce();
    if (sizes.empty()) {
      sizes.push_back(1);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(0);
    }
  }

  // Merges dim i into i+1 (outer into inner) when for every operand stride[i] == stride[i+1] * size[i+1].
  void coalesce() {
    if (sizes.size() < 2) return;
    Dims ns{sizes[0]};
    std::array<Dims, N> nst;
    for (size_t k = 0; k < N; ++k) nst[k] = {strides[k][0]};
    for (size_t i = 1; i < sizes.size(); ++i) {
      bool ok = true;
      for (size_t k = 0; k < N; ++k)
        if (nst[k].back() != strides[k][i] * sizes[i]) ok = false;
      if (ok) {
        ns.back() *= sizes[i];
        for (size_t k = 0; k < N; ++k) nst[k].back() = strides[k][i];
      } else {
        ns.push_back(sizes[i]);
        for (size_t k = 0; k < N; ++k) nst[k].push_back(strides[k][i]);
      }
    }
    sizes = std::move(ns);
    strides = std::move(nst);
  }

  // Calls body(ptrs, inner_strides, n) for each run of the innermost dim within [begin, end).
  template <class Body>
  void for_range(int64_t begin, int64_t end, const Body& body) const {
    int64_t nd = static_cast<int64_t>(sizes.size());
    int64_t inner = sizes[nd - 1];
    std::array<int64_t, N> inner_st;
    for (size_t k = 0; k < N; ++k) inner_st[k] = strides[k][nd - 1];
    int64_t idx = begin;
    while (idx < end) {
      // Decompose idx into a multi-index to find each operand's pointer.
      int64_t rem = idx / inner;
      int64_t pos = idx % inner;
      std::array<char*, N> ptr;
      for (size_t k = 0; k < N; ++k) ptr[k] = base[k] + pos * inner_st[k];
      for (int64_t d = nd - 2; d >= 0 && rem > 0; --d) {
        int64_t c = rem % sizes[d];
        rem /= sizes[d];
        for (size_t k = 0; k < N; ++k) ptr[k] += c * strides[k][d];
      }
      int64_t n = std::min(inner - pos, end - idx);
      body(ptr, inner_st, n);
      idx += n;
    }
  }
};

inline constexpr int64_t kElementwiseGrain = 32768;

// One run of n elements of the flattened loop: out[i] = f(in0[i], in1[i], ...) with the
// operands' pointers and byte strides from StridedIter::for_range. Dense runs, and dense runs
// with one broadcast (stride-0) input, get loops simple enough to vectorize.
template <class Out, class... In, class F>
inline void elementwise_run(const std::array<char*, sizeof...(In) + 1>& p,
                            const std::array<int64_t, sizeof...(In) + 1>& st, int64_t n, const F& f) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    bool dense = st[0] == sizeof(Out) && ((st[I + 1] == sizeof(In)) && ...);
    if (dense) {
      Out* o = reinterpret_cast<Out*>(p[0]);
      std::tuple<const In*...> in{reinterpret_cast<const In*>(p[I + 1])...};
      for (int64_t i = 0; i < n; ++i) o[i] = f(std::get<I>(in)[i]...);
      return;
    }
    // One broadcast (stride-0) input, the rest dense, as in x * 2.0: hoist
    // its value so the loop stays as simple as the dense one and vectorizes.
    if constexpr (sizeof...(In) >= 2) {
      auto one_scalar = [&]<size_t J>() {
        if (!(st[0] == sizeof(Out) && st[J + 1] == 0 && ((I == J || st[I + 1] == sizeof(In)) && ...)))
          return false;
        Out* o = reinterpret_cast<Out*>(p[0]);
        std::tuple<const In*...> in{reinterpret_cast<const In*>(p[I + 1])...};
        std::tuple<In...> val{*reinterpret_cast<const In*>(p[I + 1])...};
        for (int64_t i = 0; i < n; ++i) o[i] = f((I == J ? std::get<I>(val) : std::get<I>(in)[i])...);
        return true;
      };
      if ((one_scalar.template operator()<I>() || ...)) return;
    }
    for (int64_t i = 0; i < n; ++i)
      *reinterpret_cast<Out*>(p[0] + i * st[0]) = f(*reinterpret_cast<const In*>(p[I + 1] + i * st[I + 1])...);
  }(std::index_sequence_for<In...>{});
}

// Element types whose loops gain from a wider ISA: floating outputs and inputs (bool masks too).
template <class T>
inline constexpr bool kFloatLane = std::is_same_v<T, float> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class Out, class... In>
inline constexpr bool kFloatRun = kFloatLane<Out> && ((kFloatLane<In> || std::is_same_v<In, bool>) && ...);

// out[i] = f(in0[i], in1[i], ...) with exact types: Out is out's C++ type and
// In... the inputs' (callers convert dtypes first). Inputs broadcast to out.
template <class Out, class... In, class F>
void elementwise(const Tensor& out, const std::array<Tensor, sizeof...(In)>& ins, const F& f) {
  constexpr size_t N = sizeof...(In) + 1;
  if (out.numel() == 0) return;
  std::array<const Tensor*, N> ops;
  ops[0] = &out;
  for (size_t k = 0; k < sizeof...(In); ++k) ops[k + 1] = &ins[k];
  StridedIter<N> it(ops);
  parallel_for(0, it.numel, kElementwiseGrain, [&](int64_t b, int64_t e) {
    it.for_range(b, e, [&](const std::array<char*, N>& p, const std::array<int64_t, N>& st, int64_t n) {
      // Floating runs long enough to pay for a call run in the copy for the CPU's best ISA
      // (backend/cpu/isa.h): AVX2 doubles the width, and the math functors (exp_float,
      // tanh_float, ...) inline and vectorize there.
      if constexpr (kFloatRun<Out, In...>) {
        if (n >= 64) {
          with_best_isa([&] { elementwise_run<Out, In...>(p, st, n, f); });
          return;
        }
      }
      elementwise_run<Out, In...>(p, st, n, f);
    });
  });
}

using ::kiln::convert;  // core/convert.h: shared with generated code

// dst = src (same shape after broadcasting, any dtypes, any strides).
void copy_cpu(const Tensor& dst, const Tensor& src);

// x's values as dense doubles, for reference kernels that read every operand many times.
inline std::vector<double> dense_doubles(const Tensor& x) {
  Tensor d = make_tensor(x.sizes(), kFloat64, x.device());
  if (x.numel() > 0) copy_cpu(d, x);
  const double* p = static_cast<const double*>(d.data_ptr());
  return std::vector<double>(p, p + x.numel());
}
// Writes dense doubles into `out` (converted to its dtype).
inline void store_doubles(const Tensor& out, const std::vector<double>& v) {
  if (out.numel() == 0) return;
  Tensor d = make_tensor(out.sizes(), kFloat64, out.device());
  std::copy(v.begin(), v.end(), static_cast<double*>(d.data_ptr()));
  copy_cpu(out, d);
}
// The input converted to dtype `t` (itself when it already has it).
Tensor cast_to(const Tensor& x, DType t);

}  // namespace kiln::cpu
