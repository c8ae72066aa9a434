// Reduction loops for CPU kernels (Note [Reduction loops]).
#pragma once
#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "backend/cpu/loops.h"
#include "core/scalar_math.h"

namespace kiln::cpu {

// Note [Reduction loops]
// A reduction sees the input as (kept dims) x (reduced dims). Kept dims stay in
// output order (the output is contiguous); reduced dims are sorted by stride and
// both groups are coalesced. Three shapes of loop follow from the innermost strides:
//  - inner: the smallest reduced stride is 1, so each output reduces contiguous
//    runs with several independent lanes (vectorizes);
//  - outer: the innermost kept dim has stride 1, so a block of outputs
//    accumulates whole contiguous rows (no transpose copy);
//  - otherwise a strided scalar loop.
// Work is split over output units; when there are too few of them (full
// reductions, sums over a long dim 0) the reduced range is split instead into
// per-thread partial accumulators combined in a fixed order (deterministic).
//
// An Op supplies: lane_t/acc_t/out_t, lane_init(), step(lane, x), acc_init(),
// fold(acc, lane), combine(acc, acc), project(acc) -> out_t. Lanes run short
// (kChunk elements over kLanes lanes, kRowChunk rows) before being folded into
// the accumulator, so a float sum adds at most 64 floats in float before moving
// to double (cascade summation: accurate and still vectorized).

struct RDim {
  int64_t size;
  int64_t stride;  // elements
};

struct ReducePlan {
  std::vector<RDim> kept;  // output order, outer→inner, size-1 dims dropped
  std::vector<RDim> red;   // by stride, outer→inner
  int64_t n_out = 1, n_red = 1;
};

ReducePlan make_reduce_plan(const Tensor& x, const std::vector<bool>& mask);

inline constexpr int kLanes = 16;
inline constexpr int64_t kChunk = 1024;     // elements per lane flush (inner)
inline constexpr int64_t kRowChunk = 32;    // rows per lane flush (outer)
inline constexpr int64_t kBlock = 64;       // outputs per block (index reductions, scans)
inline constexpr int64_t kOuterBlock = 1024; // outputs per block of the row-accumulating reduce loop
inline constexpr int64_t kReduceGrain = 32768;
inline constexpr int64_t kSplitRows = 1024;   // least reduced length worth splitting over threads

template <class T>
inline bool is_nan_value(T x) {
  if constexpr (math::is_floating_v<T>) return static_cast<float>(x) != static_cast<float>(x);
  else return false;
}
inline bool is_nan_value(double x) { return x != x; }
inline bool is_nan_value(float x) { return x != x; }

// Offset (elements) of flat index i over dims (outer→inner).
inline int64_t flat_offset(const std::vector<RDim>& dims, size_t nd, int64_t i) {
  int64_t off = 0;
  for (size_t d = nd; d-- > 0;) {
    off += (i % dims[d].size) * dims[d].stride;
    i /= dims[d].size;
  }
  return off;
}

// Calls f(offset, n, stride) for the runs along the innermost dim that cover
// flat indices [b, e) of dims.
template <class F>
void for_runs(const std::vector<RDim>& dims, int64_t b, int64_t e, const F& f) {
  if (b >= e) return;
  if (dims.empty()) {
    f(int64_t(0), int64_t(1), int64_t(1));
    return;
  }
  size_t nd = dims.size();
  int64_t inner = dims.back().size, st = dims.back().stride;
  std::vector<int64_t> idx(nd, 0);
  int64_t pos = b % inner, rem = b / inner, off = 0;
  for (size_t d = nd - 1; d-- > 0;) {
    idx[d] = rem % dims[d].size;
    rem /= dims[d].size;
    off += idx[d] * dims[d].stride;
  }
  while (b < e) {
    int64_t n = std::min(inner - pos, e - b);
    f(off + pos * st, n, st);
    b += n;
    pos = 0;
    for (size_t d = nd - 1; d-- > 0;) {
      off += dims[d].stride;
      if (++idx[d] < dims[d].size) break;
      off -= dims[d].size * dims[d].stride;
      idx[d] = 0;
    }
  }
}

// Folds lanes[0..kLanes) into acc as a balanced tree (short dependency chains:
// a serial fold of 16 lanes into one double costs more than the chunk's adds).
template <class Op>
typename Op::acc_t fold_lanes(const Op& op, const typename Op::lane_t* lanes, typename Op::acc_t acc) {
  using A = typename Op::acc_t;
  A t[kLanes];
  for (int k = 0; k < kLanes; ++k) t[k] = op.fold(op.acc_init(), lanes[k]);
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) t[k] = op.combine(t[k], t[k + w]);
  return op.combine(acc, t[0]);
}

// Reduces n elements at p (stride st) into acc.
template <class Op, class T>
typename Op::acc_t reduce_run(const Op& op, const T* p, int64_t n, int64_t st, typename Op::acc_t acc) {
  using L = typename Op::lane_t;
  int64_t i = 0;
  if constexpr (requires { op.contig(p, n, acc); }) {
    if (st == 1) return op.contig(p, n, acc);
  }
  if (st == 1) {
    while (n - i >= kLanes) {
      L lanes[kLanes];
      for (int k = 0; k < kLanes; ++k) lanes[k] = op.lane_init();
      int64_t end = i + std::min<int64_t>(kChunk, (n - i) / kLanes * kLanes);
      for (; i < end; i += kLanes)
        for (int k = 0; k < kLanes; ++k) lanes[k] = op.step(lanes[k], p[i + k]);
      acc = fold_lanes(op, lanes, acc);
    }
    for (; i < n; ++i) acc = op.fold(acc, op.step(op.lane_init(), p[i]));
  } else {
    for (; i < n; ++i) acc = op.fold(acc, op.step(op.lane_init(), p[i * st]));
  }
  return acc;
}

// Accumulates reduced rows [rb, re) into acc[0..w) for w contiguous outputs at p.
template <class Op, class T>
void reduce_rows(const Op& op, const T* p, const std::vector<RDim>& red, int64_t rb, int64_t re, int64_t w,
                 typename Op::acc_t* acc) {
  using L = typename Op::lane_t;
  L lanes[kOuterBlock];
  for (int64_t j = 0; j < w; ++j) lanes[j] = op.lane_init();
  int64_t rows = 0;
  for_runs(red, rb, re, [&](int64_t off, int64_t n, int64_t st) {
    for (int64_t r = 0; r < n; ++r) {
      const T* row = p + off + r * st;
      if (r + 4 <= n && rows + 4 <= kRowChunk) {
        // Four rows per pass over the lanes: fewer lane loads/stores and four
        // read streams (same order of steps as one row at a time).
        const T *r1 = row + st, *r2 = row + 2 * st, *r3 = row + 3 * st;
        for (int64_t j = 0; j < w; ++j)
          lanes[j] = op.step(op.step(op.step(op.step(lanes[j], row[j]), r1[j]), r2[j]), r3[j]);
        r += 3;
        rows += 3;
      } else {
        for (int64_t j = 0; j < w; ++j) lanes[j] = op.step(lanes[j], row[j]);
      }
      if (++rows == kRowChunk) {
        for (int64_t j = 0; j < w; ++j) {
          acc[j] = op.fold(acc[j], lanes[j]);
          lanes[j] = op.lane_init();
        }
        rows = 0;
      }
    }
  });
  for (int64_t j = 0; j < w; ++j) acc[j] = op.fold(acc[j], lanes[j]);
}

// out (contiguous, dtype of Op::out_t, the reduced shape) = op over the dims in mask of x.
template <class Op>
void reduce_loop(const Tensor& out, const Tensor& x, const std::vector<bool>& mask, const Op& op) {
  using T = typename Op::in_t;
  using A = typename Op::acc_t;
  using O = typename Op::out_t;
  ReducePlan pl = make_reduce_plan(x, mask);
  if (pl.n_out == 0) return;
  const T* xp = static_cast<const T*>(x.data_ptr());
  O* op_out = static_cast<O*>(out.data_ptr());
  bool outer = !pl.kept.empty() && pl.kept.back().stride == 1 && !pl.red.empty() && pl.red.back().stride != 1;
  int64_t kin = outer ? pl.kept.back().size : 1;
  int64_t nblk = outer ? (kin + kOuterBlock - 1) / kOuterBlock : 1;
  int64_t units = pl.n_out / kin * nblk;
  size_t nk_outer = outer ? pl.kept.size() - 1 : pl.kept.size();

  // Accumulates unit u over reduced range [rb, re) into acc (its w outputs), returning
  // the index of its first output.
  auto run_unit = [&](int64_t u, int64_t rb, int64_t re, A* acc) -> int64_t {
    if (outer) {
      int64_t ko = u / nblk, j0 = (u % nblk) * kOuterBlock;
      int64_t w = std::min(kOuterBlock, kin - j0);
      const T* base = xp + flat_offset(pl.kept, nk_outer, ko) + j0;
      reduce_rows(op, base, pl.red, rb, re, w, acc);
      return ko * kin + j0;
    }
    const T* base = xp + flat_offset(pl.kept, nk_outer, u);
    A a = acc[0];
    for_runs(pl.red, rb, re, [&](int64_t off, int64_t n, int64_t st) { a = reduce_run(op, base + off, n, st, a); });
    acc[0] = a;
    return u;
  };
  auto unit_width = [&](int64_t u) { return outer ? std::min(kOuterBlock, kin - (u % nblk) * kOuterBlock) : int64_t(1); };

  int nt = get_num_threads();
  int64_t work = pl.n_out * std::max<int64_t>(pl.n_red, 1);
  bool split = nt > 1 && !in_parallel_region() && units < 4 * nt && work > kReduceGrain &&
               pl.n_red >= kSplitRows;
  if (!split) {
    int64_t per_unit = std::max<int64_t>(1, pl.n_red * (outer ? kOuterBlock : 1));
    int64_t grain = std::max<int64_t>(1, kReduceGrain / per_unit);
    parallel_for(0, units, grain, [&](int64_t b, int64_t e) {
      A acc[kOuterBlock];
      for (int64_t u = b; u < e; ++u) {
        int64_t w = unit_width(u);
        for (int64_t j = 0; j < w; ++j) acc[j] = op.acc_init();
        int64_t o = run_unit(u, 0, pl.n_red, acc);
        for (int64_t j = 0; j < w; ++j) op_out[o + j] = op.project(acc[j]);
      }
    });
    return;
  }
  // Split the reduced range: chunk c accumulates every output over its rows.
  int64_t nchunks = std::min<int64_t>(nt, pl.n_red / (kSplitRows / 2));
  // (not std::vector: A may be bool)
  std::unique_ptr<A[]> partial(new A[static_cast<size_t>(nchunks * pl.n_out)]);
  parallel_for(0, nchunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      int64_t rb = pl.n_red * c / nchunks, re = pl.n_red * (c + 1) / nchunks;
      A* part = partial.get() + c * pl.n_out;
      for (int64_t u = 0; u < units; ++u) {
        A acc[kOuterBlock];
        int64_t w = unit_width(u);
        for (int64_t j = 0; j < w; ++j) acc[j] = op.acc_init();
        int64_t o = run_unit(u, rb, re, acc);
        for (int64_t j = 0; j < w; ++j) part[o + j] = acc[j];
      }
    }
  });
  for (int64_t o = 0; o < pl.n_out; ++o) {
    A a = partial[o];
    for (int64_t c = 1; c < nchunks; ++c) a = op.combine(a, partial[c * pl.n_out + o]);
    op_out[o] = op.project(a);
  }
}

// Runs reduce_loop into out, through a temporary when out's dtype is not Op::out_t.
template <class Op>
void reduce_into(const Tensor& out, const Tensor& x, const std::vector<bool>& mask, const Op& op) {
  using O = typename Op::out_t;
  if (out.dtype() == dtype_of<O>() && out.is_contiguous()) {
    reduce_loop(out, x, mask, op);
  } else {
    Tensor tmp = make_tensor(out.sizes(), dtype_of<O>(), out.device());
    reduce_loop(tmp, x, mask, op);
    copy_cpu(out, tmp);
  }
}

// ---- ops ----

// Accumulation types: sums of floats cascade float lanes into double; integers
// and bool accumulate in int64 (wrapping, as torch).
template <class T>
using sum_lane_t = std::conditional_t<math::is_floating_v<T>, std::conditional_t<std::is_same_v<T, double>, double, float>, int64_t>;
template <class T>
using sum_acc_t = std::conditional_t<math::is_floating_v<T>, double, int64_t>;
template <class T>
using sum_out_t = std::conditional_t<math::is_floating_v<T>, T, int64_t>;

template <class T>
struct SumOp {
  using in_t = T;
  using lane_t = sum_lane_t<T>;
  using acc_t = sum_acc_t<T>;
  using out_t = sum_out_t<T>;
  double scale = 1.0;  // mean: 1/n
  lane_t lane_init() const { return lane_t(0); }
  lane_t step(lane_t a, T x) const {
    if constexpr (std::is_same_v<lane_t, int64_t>) return math::detail::wrap_add<int64_t>(a, static_cast<int64_t>(x));
    else return a + convert<lane_t>(x);
  }
  acc_t acc_init() const { return acc_t(0); }
  acc_t fold(acc_t a, lane_t l) const {
    if constexpr (std::is_same_v<acc_t, int64_t>) return math::detail::wrap_add<int64_t>(a, l);
    else return a + static_cast<acc_t>(l);
  }
  acc_t combine(acc_t a, acc_t b) const { return fold(a, b); }
  out_t project(acc_t a) const {
    if constexpr (std::is_same_v<acc_t, int64_t>) return a;
    else return convert<out_t>(a * scale);
  }
};

template <class T>
using prod_acc_t = std::conditional_t<math::is_floating_v<T>, std::conditional_t<math::is_reduced_float_v<T>, float, double>, int64_t>;

template <class T>
struct ProdOp {
  using in_t = T;
  using lane_t = prod_acc_t<T>;
  using acc_t = lane_t;
  using out_t = sum_out_t<T>;
  lane_t lane_init() const { return lane_t(1); }
  lane_t step(lane_t a, T x) const { return fold(a, convert<lane_t>(x)); }
  acc_t acc_init() const { return acc_t(1); }
  acc_t fold(acc_t a, acc_t b) const {
    if constexpr (std::is_same_v<acc_t, int64_t>) return math::detail::wrap_mul<int64_t>(a, b);
    else return a * b;
  }
  acc_t combine(acc_t a, acc_t b) const { return fold(a, b); }
  out_t project(acc_t a) const { return convert<out_t>(a); }
};

// 16-byte GCC/Clang vector types (SSE2 on baseline x86-64).
typedef float f32x4 __attribute__((vector_size(16)));
typedef int32_t i32x4 __attribute__((vector_size(16)));
typedef double f64x2 __attribute__((vector_size(16)));
typedef int64_t i64x2 __attribute__((vector_size(16)));
template <class U>
struct simd16;
template <>
struct simd16<float> {
  using vec = f32x4;
  using mask = i32x4;
};
template <>
struct simd16<double> {
  using vec = f64x2;
  using mask = i64x2;
};

// amax/amin: NaN wins (propagates), as torch.
template <class T, bool IsMax>
struct MinMaxOp {
  using in_t = T;
  using lane_t = math::opmath_t<T>;
  using acc_t = lane_t;
  using out_t = T;
  lane_t lane_init() const {
    if constexpr (std::is_same_v<T, bool>) return !IsMax;
    else if constexpr (math::is_floating_v<T>)
      return IsMax ? -std::numeric_limits<lane_t>::infinity() : std::numeric_limits<lane_t>::infinity();
    else return IsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  lane_t step(lane_t a, T xin) const { return fold(a, convert<lane_t>(xin)); }
  acc_t acc_init() const { return lane_init(); }
  acc_t fold(acc_t a, acc_t x) const {
    // Non-short-circuit `|` keeps this branch-free so the lanes vectorize.
    // Selects only (vectorizes): take x when it is greater or NaN, unless a is NaN.
    if constexpr (math::is_floating_v<T>) {
      if constexpr (IsMax) return (a != a) ? a : (!(x <= a) ? x : a);
      else return (a != a) ? a : (!(x >= a) ? x : a);
    } else {
      if constexpr (IsMax) return x > a ? x : a;
      else return x < a ? x : a;
    }
  }
  acc_t combine(acc_t a, acc_t b) const { return fold(a, b); }
  out_t project(acc_t a) const { return convert<out_t>(a); }

  // Contiguous float/double runs: GCC does not if-convert the scalar lanes of
  // fold, so use vector extensions (SSE2 baseline): max/min by selects, NaNs
  // tracked in a separate mask and returned at the end.
  template <class U = T>
    requires(std::is_same_v<U, float> || std::is_same_v<U, double>)
  acc_t contig(const U* p, int64_t n, acc_t acc) const {
    constexpr int W = 16 / sizeof(U), V = 4;
    using vec = typename simd16<U>::vec;
    using mask = typename simd16<U>::mask;
    vec m[V];
    mask nan[V];
    for (int k = 0; k < V; ++k) {
      for (int l = 0; l < W; ++l) m[k][l] = lane_init();
      nan[k] = mask{};
    }
    int64_t i = 0;
    for (; i + V * W <= n; i += V * W) {
      for (int k = 0; k < V; ++k) {
        vec x;
        std::memcpy(&x, p + i + k * W, sizeof(vec));
        if constexpr (IsMax) m[k] = x > m[k] ? x : m[k];
        else m[k] = x < m[k] ? x : m[k];
        nan[k] |= (x != x);
      }
    }
    bool any_nan = false;
    for (int k = 0; k < V; ++k)
      for (int l = 0; l < W; ++l) {
        acc = fold(acc, m[k][l]);
        any_nan |= nan[k][l] != 0;
      }
    for (; i < n; ++i) acc = fold(acc, p[i]);
    return any_nan ? fold(acc, std::numeric_limits<U>::quiet_NaN()) : acc;
  }
};

// all/any: truthiness of any dtype (NaN is true).
template <class T, bool IsAll>
struct LogicalOp {
  using in_t = T;
  using lane_t = bool;
  using acc_t = bool;
  using out_t = bool;
  bool lane_init() const { return IsAll; }
  bool step(bool a, T x) const {
    bool t;
    if constexpr (math::is_reduced_float_v<T>) t = static_cast<float>(x) != 0.0f;
    else t = x != T(0);
    return IsAll ? (a && t) : (a || t);
  }
  bool acc_init() const { return IsAll; }
  bool fold(bool a, bool b) const { return IsAll ? (a && b) : (a || b); }
  bool combine(bool a, bool b) const { return fold(a, b); }
  bool project(bool a) const { return a; }
};

// A contiguous copy of x in dtype t (x itself when it already is one).
Tensor contiguous_as(const Tensor& x, DType t);

}  // namespace kiln::cpu
