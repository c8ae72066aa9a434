// The one block-reduction kernel template (reduce.h): a block per row (grid-stride over
// rows); each thread folds a strided slice of the row, then the block combines the threads'
// partial results in a fixed tree, so the answer does not depend on timing.
#include <limits>
#include <type_traits>

#include "backend/cuda/elementwise_kernel.cuh"
#include "backend/cuda/reduce.h"
#include "core/dtype_dispatch.h"
#include "core/scalar_math.h"

namespace kiln::cuda {
namespace {

template <class T>
KILN_HD bool is_nan(T x) {
  if constexpr (math::is_floating_v<T>)
    return static_cast<float>(x) != static_cast<float>(x);
  else
    return false;
}

template <class T>
using sum_acc_t = std::conditional_t<math::is_floating_v<T>, double, int64_t>;
template <class T>
using prod_acc_t =
    std::conditional_t<math::is_floating_v<T>, std::conditional_t<math::is_reduced_float_v<T>, float, double>, int64_t>;

// Each op: A (accumulator), init(), step(a, x, index), combine(a, b). Index-carrying ops keep
// (value, index) pairs.
template <class T>
struct SumR {
  using A = sum_acc_t<T>;
  KILN_HD A init() const { return A(0); }
  KILN_HD A lift(T x) const {
    if constexpr (math::is_reduced_float_v<T>)
      return A(static_cast<float>(x));
    else
      return static_cast<A>(x);
  }
  KILN_HD A combine(A a, A b) const {
    if constexpr (std::is_same_v<A, int64_t>)
      return math::detail::wrap_add<int64_t>(a, b);
    else
      return a + b;
  }
};
template <class T>
struct ProdR {
  using A = prod_acc_t<T>;
  KILN_HD A init() const { return A(1); }
  KILN_HD A lift(T x) const {
    if constexpr (math::is_reduced_float_v<T>)
      return A(static_cast<float>(x));
    else
      return static_cast<A>(x);
  }
  KILN_HD A combine(A a, A b) const {
    if constexpr (std::is_same_v<A, int64_t>)
      return math::detail::wrap_mul<int64_t>(a, b);
    else
      return a * b;
  }
};
template <class T, bool IsMax>
struct MinMaxR {
  using A = math::opmath_t<T>;
  KILN_HD A init() const {
    if constexpr (std::is_same_v<T, bool>)
      return !IsMax;
    else if constexpr (math::is_floating_v<T>)
      return IsMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    else
      return IsMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  KILN_HD A lift(T x) const { return A(x); }
  // NaN propagates (the CPU's fold).
  KILN_HD A combine(A a, A x) const {
    if constexpr (math::is_floating_v<T>) {
      if (a != a) return a;
      if constexpr (IsMax)
        return !(x <= a) ? x : a;
      else
        return !(x >= a) ? x : a;
    } else {
      if constexpr (IsMax)
        return x > a ? x : a;
      else
        return x < a ? x : a;
    }
  }
};
template <class T, bool IsAll>
struct LogicalR {
  using A = bool;
  KILN_HD A init() const { return IsAll; }
  KILN_HD A lift(T x) const {
    if constexpr (math::is_reduced_float_v<T>)
      return static_cast<float>(x) != 0.0f;
    else
      return x != T(0);
  }
  KILN_HD A combine(A a, A b) const { return IsAll ? (a && b) : (a || b); }
};

constexpr int kReduceThreads = 256;

template <class T, class Op>
__global__ void reduce_kernel(const T* x, int64_t rows, int64_t n, typename Op::A* out, double scale, Op op) {
  using A = typename Op::A;
  __shared__ A part[kReduceThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * n;
    A a = op.init();
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) a = op.combine(a, op.lift(row[i]));
    part[threadIdx.x] = a;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s) part[threadIdx.x] = op.combine(part[threadIdx.x], part[threadIdx.x + s]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      A v = part[0];
      if constexpr (std::is_floating_point_v<A>) {
        if (scale != 1.0) v = static_cast<A>(v * scale);
      }
      out[r] = v;
    }
    __syncthreads();
  }
}

// argmax/argmin: (value, index) pairs; the first of equal values wins, the first NaN wins.
template <class V, bool IsMax>
KILN_HD bool better(V x, int64_t xi, V best, int64_t bi) {
  bool xn = is_nan(x), bn = is_nan(best);
  if (xn || bn) return xn && (!bn || xi < bi);
  if (x == best) return xi < bi;
  return IsMax ? x > best : x < best;
}

template <class T, bool IsMax>
__global__ void arg_reduce_kernel(const T* x, int64_t rows, int64_t n, math::opmath_t<T>* values, int64_t* index) {
  using V = math::opmath_t<T>;
  __shared__ V pv[kReduceThreads];
  __shared__ int64_t pi[kReduceThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* row = x + r * n;
    V best = V(row[0]);
    int64_t bi = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      V v = V(row[i]);
      if (better<V, IsMax>(v, i, best, bi)) best = v, bi = i;
    }
    pv[threadIdx.x] = best;
    pi[threadIdx.x] = bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if (static_cast<int>(threadIdx.x) < s &&
          better<V, IsMax>(pv[threadIdx.x + s], pi[threadIdx.x + s], pv[threadIdx.x], pi[threadIdx.x])) {
        pv[threadIdx.x] = pv[threadIdx.x + s];
        pi[threadIdx.x] = pi[threadIdx.x + s];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if (values) values[r] = pv[0];
      index[r] = pi[0];
    }
    __syncthreads();
  }
}

unsigned grid_rows(int64_t rows) { return static_cast<unsigned>(rows < 65536 ? rows : 65536); }

// Note [CUDA reductions over outer and inner dims]
// x viewed as [A, M, B] reduced over A and B (a batch norm's statistics: [N, C, H, W] over N, H
// and W; a full reduction: M == 1) without moving the reduced dims last: block (m, s) folds the
// s-th of `splits` equal ranges of the A*B elements of m, walking b fastest (coalesced), into
// partial[m * splits + s]; a second kernel folds each m's partials in order. Fixed ranges and a
// fixed tree: the same answer run to run.
template <class T, class Op>
__global__ void reduce_outer_inner_kernel(const T* x, int64_t A, int64_t M, int64_t B, int64_t splits,
                                          typename Op::A* partial, Op op) {
  using Acc = typename Op::A;
  __shared__ Acc part[kReduceThreads];
  const int64_t m = blockIdx.x, sp = blockIdx.y, total = A * B;
  const int64_t per = (total + splits - 1) / splits, lo = sp * per, hi = lo + per < total ? lo + per : total;
  Acc a = op.init();
  for (int64_t t = lo + threadIdx.x; t < hi; t += blockDim.x) {
    const int64_t outer = t / B, inner = t - outer * B;
    a = op.combine(a, op.lift(x[(outer * M + m) * B + inner]));
  }
  part[threadIdx.x] = a;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] = op.combine(part[threadIdx.x], part[threadIdx.x + w]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[m * splits + sp] = part[0];
}

template <class Op>
__global__ void combine_partials_kernel(const typename Op::A* partial, int64_t M, int64_t splits,
                                        typename Op::A* out, double scale, Op op) {
  using Acc = typename Op::A;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (m >= M) return;
  Acc a = partial[m * splits];
  for (int64_t s = 1; s < splits; ++s) a = op.combine(a, partial[m * splits + s]);
  if constexpr (std::is_floating_point_v<Acc>) {
    if (scale != 1.0) a = static_cast<Acc>(a * scale);
  }
  out[m] = a;
}

// The same for B == 1 (a bias gradient: [rows, M] summed over rows): threads take adjacent
// columns, so a warp reads one row's 32 consecutive values; kColumnRows rows of a block go
// at once, folded in a fixed order at the end.
constexpr int kColumnRows = 8;
template <class T, class Op>
__global__ void reduce_columns_kernel(const T* x, int64_t A, int64_t M, int64_t splits, typename Op::A* partial,
                                      Op op) {
  using Acc = typename Op::A;
  __shared__ Acc part[kColumnRows][33];
  const int64_t m = static_cast<int64_t>(blockIdx.x) * 32 + threadIdx.x, sp = blockIdx.y;
  const int64_t per = (A + splits - 1) / splits, lo = sp * per, hi = lo + per < A ? lo + per : A;
  Acc a = op.init();
  if (m < M)
    for (int64_t r = lo + threadIdx.y; r < hi; r += kColumnRows) a = op.combine(a, op.lift(x[r * M + m]));
  part[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y != 0 || m >= M) return;
  for (int y = 1; y < kColumnRows; ++y) a = op.combine(a, part[y][threadIdx.x]);
  partial[m * splits + sp] = a;
}

template <class T, class Op>
void run_outer_inner(const void* x, int64_t A, int64_t M, int64_t B, void* out, double scale, void* scratch,
                     int64_t splits, cudaStream_t s, Op op) {
  using Acc = typename Op::A;
  Acc* partial = static_cast<Acc*>(scratch);
  if (B == 1)
    reduce_columns_kernel<T, Op><<<dim3(static_cast<unsigned>((M + 31) / 32), static_cast<unsigned>(splits)),
                                   dim3(32, kColumnRows), 0, s>>>(static_cast<const T*>(x), A, M, splits, partial, op);
  else
    reduce_outer_inner_kernel<T, Op><<<dim3(static_cast<unsigned>(M), static_cast<unsigned>(splits)), kReduceThreads, 0,
                                     s>>>(static_cast<const T*>(x), A, M, B, splits, partial, op);
  combine_partials_kernel<Op><<<static_cast<unsigned>((M + kReduceThreads - 1) / kReduceThreads), kReduceThreads, 0,
                                s>>>(partial, M, splits, static_cast<Acc*>(out), scale, op);
}

template <class T, class Op>
void run(const void* x, int64_t rows, int64_t n, void* out, double scale, cudaStream_t s, Op op) {
  reduce_kernel<T, Op><<<grid_rows(rows), kReduceThreads, 0, s>>>(static_cast<const T*>(x), rows, n,
                                                                  static_cast<typename Op::A*>(out), scale, op);
}

}  // namespace

DType reduce_result_dtype(ReduceOp op, DType in) {
  return visit_dtype(in, [&]<class T>() {
    switch (op) {
      case ReduceOp::Sum:
        return dtype_of<sum_acc_t<T>>();
      case ReduceOp::Prod:
        return dtype_of<prod_acc_t<T>>();
      case ReduceOp::All:
      case ReduceOp::Any:
        return DType::Bool;
      default:
        return dtype_of<math::opmath_t<T>>();
    }
  });
}

int64_t outer_inner_splits(int64_t A, int64_t M, int64_t B) {
  // About four blocks per SM of an H100 in all, each with at least 4096 elements (columns: 32
  // outputs per block, at least 64 rows).
  const int64_t blocks = B == 1 ? (M + 31) / 32 : M;
  int64_t want = (528 + blocks - 1) / blocks, most = B == 1 ? (A + 63) / 64 : (A * B + 4095) / 4096;
  int64_t splits = want < most ? want : most;
  return splits < 1 ? 1 : (splits > 65535 ? 65535 : splits);
}

void launch_reduce_outer_inner(ReduceOp op, const void* x, DType in, int64_t A, int64_t M, int64_t B, void* values,
                               double scale, void* scratch, cudaStream_t s) {
  KILN_CHECK(op != ReduceOp::ArgMax && op != ReduceOp::ArgMin, "internal: no outer/inner arg reductions");
  if (M == 0) return;
  KILN_CHECK(M <= 65535 || B == 1, "internal: outer/inner reduction of ", M, " outputs");
  const int64_t splits = outer_inner_splits(A, M, B);
  visit_dtype(in, [&]<class T>() {
    switch (op) {
      case ReduceOp::Sum:
        run_outer_inner<T>(x, A, M, B, values, scale, scratch, splits, s, SumR<T>{});
        break;
      case ReduceOp::Prod:
        run_outer_inner<T>(x, A, M, B, values, scale, scratch, splits, s, ProdR<T>{});
        break;
      case ReduceOp::Max:
        run_outer_inner<T>(x, A, M, B, values, scale, scratch, splits, s, MinMaxR<T, true>{});
        break;
      case ReduceOp::Min:
        run_outer_inner<T>(x, A, M, B, values, scale, scratch, splits, s, MinMaxR<T, false>{});
        break;
      case ReduceOp::All:
        run_outer_inner<T>(x, A, M, B, values, scale, scratch, splits, s, LogicalR<T, true>{});
        break;
      case ReduceOp::Any:
        run_outer_inner<T>(x, A, M, B, values, scale, scratch, splits, s, LogicalR<T, false>{});
        break;
      default:
        break;
    }
  });
  check_launch();
}

void launch_reduce(ReduceOp op, const void* x, DType in, int64_t rows, int64_t n, void* values, int64_t* index,
                   double scale, cudaStream_t s) {
  if (rows == 0) return;
  visit_dtype(in, [&]<class T>() {
    switch (op) {
      case ReduceOp::Sum:
        run<T>(x, rows, n, values, scale, s, SumR<T>{});
        break;
      case ReduceOp::Prod:
        run<T>(x, rows, n, values, scale, s, ProdR<T>{});
        break;
      case ReduceOp::Max:
        run<T>(x, rows, n, values, scale, s, MinMaxR<T, true>{});
        break;
      case ReduceOp::Min:
        run<T>(x, rows, n, values, scale, s, MinMaxR<T, false>{});
        break;
      case ReduceOp::All:
        run<T>(x, rows, n, values, scale, s, LogicalR<T, true>{});
        break;
      case ReduceOp::Any:
        run<T>(x, rows, n, values, scale, s, LogicalR<T, false>{});
        break;
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        using V = math::opmath_t<T>;
        KILN_CHECK(n > 0, "argmax: cannot reduce over an empty dimension");
        auto* v = static_cast<V*>(values);
        const T* xs = static_cast<const T*>(x);
        if (op == ReduceOp::ArgMax)
          arg_reduce_kernel<T, true><<<grid_rows(rows), kReduceThreads, 0, s>>>(xs, rows, n, v, index);
        else
          arg_reduce_kernel<T, false><<<grid_rows(rows), kReduceThreads, 0, s>>>(xs, rows, n, v, index);
        break;
      }
    }
  });
  check_launch();
}

}  // namespace kiln::cuda
