// Copies, casts and fills through the strided elementwise kernel (elementwise_kernel.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cstring>
#include <type_traits>

#include "backend/cuda/elementwise.h"
#include "backend/cuda/elementwise_kernel.cuh"
#include "core/dtype_dispatch.h"
#include "core/half.h"

namespace kiln::cuda {
namespace {

// kiln::convert (core/convert.h) for device code: the same rules (through float for
// Half/BFloat16, non-zero is true). TODO: mark convert.h KILN_HD and use it directly (that
// rebuilds every CPU kernel, so it waits for a quiet moment).
template <class To>
struct Convert {
  template <class From>
  KILN_HD To operator()(From v) const {
    constexpr bool from16 = is_reduced_float_v<From>;
    constexpr bool to16 = is_reduced_float_v<To>;
    if constexpr (std::is_same_v<To, From>)
      return v;
    else if constexpr (std::is_same_v<To, bool>) {
      if constexpr (from16)
        return static_cast<float>(v) != 0.0f;
      else
        return v != From(0);
    } else if constexpr (from16)
      return static_cast<To>(static_cast<float>(v));
    else if constexpr (to16)
      return To(static_cast<float>(v));
    else
      return static_cast<To>(v);
  }
};

template <class T>
struct Constant {
  T value;
  KILN_HD T operator()() const { return value; }
};

__device__ inline void report_bad(int64_t* bad, int64_t v) {
  if (atomicCAS(reinterpret_cast<unsigned long long*>(bad), 0ull, 1ull) == 0ull) bad[1] = v;
}

template <class T>
__global__ void gather_kernel(ElementwiseArgs a, int64_t stride, int64_t size, int64_t* bad, bool wrap) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += step) {
    Offsets<3, int64_t> o = offsets_of<3, int64_t>(a, i);
    int64_t v = *reinterpret_cast<const int64_t*>(a.ops[1].data + o.off[1]);
    if (wrap && v < 0 && v >= -size) v += size;
    if (v < 0 || v >= size) {
      report_bad(bad, v);
      continue;
    }
    *reinterpret_cast<T*>(a.ops[0].data + o.off[0]) =
        *reinterpret_cast<const T*>(a.ops[2].data + o.off[2] + v * stride);
  }
}

template <class T>
__device__ inline void atomic_add(T* p, T v) {
  if constexpr (std::is_same_v<T, int64_t>)
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));  // two's complement
  else if constexpr (std::is_same_v<T, Half>)  // kiln's Half has __half's bits (sm_70+)
    atomicAdd(reinterpret_cast<__half*>(p), __ushort_as_half(v.x));
  else if constexpr (std::is_same_v<T, BFloat16>)  // sm_80+
    atomicAdd(reinterpret_cast<__nv_bfloat16*>(p), __ushort_as_bfloat16(v.x));
  else
    atomicAdd(p, v);
}

template <class T, bool Accumulate>
__global__ void scatter_kernel(ElementwiseArgs a, int64_t stride, int64_t size, int64_t* bad, bool wrap) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += step) {
    Offsets<3, int64_t> o = offsets_of<3, int64_t>(a, i);
    int64_t v = *reinterpret_cast<const int64_t*>(a.ops[1].data + o.off[1]);
    if (wrap && v < 0 && v >= -size) v += size;
    if (v < 0 || v >= size) {
      report_bad(bad, v);
      continue;
    }
    T* dst = reinterpret_cast<T*>(a.ops[0].data + o.off[0] + v * stride);
    T val = *reinterpret_cast<const T*>(a.ops[2].data + o.off[2]);
    if constexpr (Accumulate)
      atomic_add(dst, val);
    else
      *dst = val;
  }
}

// *p = f(*p) atomically, for elements of any width: a compare-and-swap loop on the element, or
// for 1- and 2-byte elements on the aligned 32-bit word holding it (allocations are aligned, so
// the word lies inside the block; little-endian byte order).
template <class T, class F>
__device__ inline void atomic_apply(T* p, const F& f) {
  if constexpr (sizeof(T) == 8 || sizeof(T) == 4) {
    using W = std::conditional_t<sizeof(T) == 8, unsigned long long, unsigned int>;
    W* w = reinterpret_cast<W*>(p);
    W old = *w, assumed;
    do {
      assumed = old;
      T cur, next;
      memcpy(&cur, &assumed, sizeof(T));
      next = f(cur);
      W bits;
      memcpy(&bits, &next, sizeof(T));
      old = atomicCAS(w, assumed, bits);
    } while (old != assumed);
  } else {
    static_assert(sizeof(T) == 2 || sizeof(T) == 1, "atomic_apply: 1, 2, 4 or 8-byte elements");
    using B = std::conditional_t<sizeof(T) == 2, unsigned short, unsigned char>;
    const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
    unsigned int* w = reinterpret_cast<unsigned int*>(addr & ~uintptr_t(3));
    const unsigned shift = static_cast<unsigned>(addr & 3) * 8;
    const unsigned mask = ((1u << (8 * sizeof(T))) - 1u) << shift;
    unsigned old = *w, assumed;
    do {
      assumed = old;
      const B cur_bits = static_cast<B>((assumed & mask) >> shift);
      T cur;
      memcpy(&cur, &cur_bits, sizeof(T));
      const T next = f(cur);
      B next_bits;
      memcpy(&next_bits, &next, sizeof(T));
      old = atomicCAS(w, assumed, (assumed & ~mask) | (static_cast<unsigned>(next_bits) << shift));
    } while (old != assumed);
  }
}

// The CPU's reduce_step (backend/cpu/indexing.cpp) in its accumulator type A (float for
// Half/BFloat16, else T): NaN propagates through amax/amin.
template <class A>
__device__ inline A reduce_step(ScatterReduce r, A a, A b) {
  auto nan = [](A v) {
    if constexpr (std::is_floating_point_v<A>)
      return v != v;
    else
      return false;
  };
  switch (r) {
    case ScatterReduce::Prod:
      return static_cast<A>(a * b);
    case ScatterReduce::Max:
      return (b > a || nan(b)) ? b : a;
    case ScatterReduce::Min:
      return (b < a || nan(b)) ? b : a;
    default:
      return static_cast<A>(a + b);
  }
}

template <class T, ScatterReduce R>
__global__ void scatter_reduce_kernel(ElementwiseArgs a, int64_t stride, int64_t size, int64_t* bad) {
  using A = std::conditional_t<is_reduced_float_v<T>, float, T>;
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < a.numel; i += step) {
    Offsets<3, int64_t> o = offsets_of<3, int64_t>(a, i);
    int64_t v = *reinterpret_cast<const int64_t*>(a.ops[1].data + o.off[1]);
    if (v < 0 || v >= size) {
      report_bad(bad, v);
      continue;
    }
    T* dst = reinterpret_cast<T*>(a.ops[0].data + o.off[0] + v * stride);
    const A val = Convert<A>{}(*reinterpret_cast<const T*>(a.ops[2].data + o.off[2]));
    atomic_apply(dst, [val](T cur) { return Convert<T>{}(reduce_step<A>(R, Convert<A>{}(cur), val)); });
  }
}

// scatter_reduce's mean: the sum divided by the count (at least 1); integers round down, as the CPU.
template <class T>
struct MeanDivide {
  __device__ T operator()(T v, int64_t count) const {
    using A = std::conditional_t<is_reduced_float_v<T>, float, T>;
    const A n = static_cast<A>(count > 1 ? count : int64_t(1));
    const A x = Convert<A>{}(v);
    if constexpr (std::is_integral_v<A>) {
      A q = static_cast<A>(x / n);
      if constexpr (std::is_signed_v<A>)
        if ((x % n != 0) && ((x < 0) != (n < 0))) --q;
      return Convert<T>{}(q);
    } else {
      return Convert<T>{}(x / n);
    }
  }
};

// histc: backend/cpu/indexops.cpp's bin rule, each step rounded to T (C = float for
// Half/BFloat16) and without FMA contraction; counts in int64 as the CPU's.
template <class C>
__device__ inline C sub_rn(C a, C b) {
  if constexpr (std::is_same_v<C, double>)
    return __dsub_rn(a, b);
  else
    return __fsub_rn(a, b);
}
template <class C>
__device__ inline C mul_rn(C a, C b) {
  if constexpr (std::is_same_v<C, double>)
    return __dmul_rn(a, b);
  else
    return __fmul_rn(a, b);
}
template <class C>
__device__ inline C div_rn(C a, C b) {
  if constexpr (std::is_same_v<C, double>)
    return __ddiv_rn(a, b);
  else
    return __fdiv_rn(a, b);
}

template <class T, class C>
__global__ void histc_kernel(const T* x, int64_t n, int64_t bins, C l, C h, C width, C nb, unsigned long long* count) {
  auto r = [](C v) { return static_cast<C>(T(v)); };
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const C v = static_cast<C>(x[i]);
    if (!(v >= l && v <= h)) continue;  // outside [lo, hi] or NaN
    int64_t pos = static_cast<int64_t>(r(div_rn(r(mul_rn(r(sub_rn(v, l)), nb)), width)));
    pos = pos < 0 ? 0 : pos > bins - 1 ? bins - 1 : pos;
    atomicAdd(count + pos, 1ull);
  }
}

template <class T>
__global__ void int_min_max_kernel(const T* x, int64_t n, long long* min_max) {
  long long mn = LLONG_MAX, mx = LLONG_MIN;
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const long long v = static_cast<long long>(x[i]);
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
  }
  atomicMin(min_max, mn);
  atomicMax(min_max + 1, mx);
}

// The smallest and largest value as order-preserving keys of their float64 bits (negative values
// flipped whole, others with the sign bit set), and whether any is NaN.
__device__ inline unsigned long long order_key(double v) {
  const unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(v));
  return (u >> 63) ? ~u : u | (1ull << 63);
}

template <class T>
__global__ void float_min_max_kernel(const T* x, int64_t n, unsigned long long* keys) {
  unsigned long long mn = ~0ull, mx = 0ull, nan = 0ull;
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const double v =
        static_cast<double>(static_cast<std::conditional_t<std::is_same_v<T, double>, double, float>>(x[i]));
    if (v != v) {
      nan = 1ull;
      continue;
    }
    const unsigned long long k = order_key(v);
    mn = k < mn ? k : mn;
    mx = k > mx ? k : mx;
  }
  atomicMin(keys, mn);
  atomicMax(keys + 1, mx);
  if (nan) atomicOr(keys + 2, nan);
}

template <class T>
__global__ void bincount_kernel(const T* x, int64_t n, unsigned long long* count) {
  int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    atomicAdd(count + static_cast<int64_t>(x[i]), 1ull);
}

template <class F>
void visit_index_integer(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::UInt8:
      return f.template operator()<uint8_t>();
    case DType::Int8:
      return f.template operator()<int8_t>();
    case DType::Int16:
      return f.template operator()<int16_t>();
    case DType::Int32:
      return f.template operator()<int32_t>();
    case DType::Int64:
      return f.template operator()<int64_t>();
    default:
      KILN_FAIL(op, ": expected an integral input, got dtype ", t);
  }
}

}  // namespace

void launch_scatter_reduce(const ElementwiseArgs& a, ScatterReduce r, int64_t indexed_stride, int64_t indexed_size,
                           int64_t* bad, cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(a.ops[0].dtype, [&]<class T>() {
    auto run = [&]<ScatterReduce R>() {
      scatter_reduce_kernel<T, R><<<grid_for(a.numel), kThreads, 0, stream>>>(a, indexed_stride, indexed_size, bad);
    };
    switch (r) {
      case ScatterReduce::Sum:
        run.template operator()<ScatterReduce::Sum>();
        break;
      case ScatterReduce::Prod:
        run.template operator()<ScatterReduce::Prod>();
        break;
      case ScatterReduce::Max:
        run.template operator()<ScatterReduce::Max>();
        break;
      case ScatterReduce::Min:
        run.template operator()<ScatterReduce::Min>();
        break;
    }
  });
  check_launch();
}

void launch_mean_divide(const ElementwiseArgs& a, cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(a.ops[0].dtype, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>)
      KILN_FAIL("scatter_reduce: mean is not defined for bool");
    else
      launch_elementwise<T, T, int64_t>(a, MeanDivide<T>{}, stream);
  });
}

void launch_histc(DType t, const void* x, int64_t n, int64_t bins, double lo, double hi, void* count,
                  cudaStream_t stream) {
  if (n == 0) return;
  visit_floating(t, "histc", [&]<class T>() {
    using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
    auto r = [](C v) { return static_cast<C>(T(v)); };  // on the host, as the CPU kernel
    const C l = r(C(lo)), h = r(C(hi)), width = r(h - l), nb = r(C(bins));
    histc_kernel<T, C><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), n, bins, l, h, width, nb,
                                                             static_cast<unsigned long long*>(count));
  });
  check_launch();
}

void launch_float_min_max(DType t, const void* x, int64_t n, uint64_t* keys, cudaStream_t stream) {
  if (n == 0) return;
  visit_floating(t, "histc", [&]<class T>() {
    float_min_max_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), n,
                                                                  reinterpret_cast<unsigned long long*>(keys));
  });
  check_launch();
}

void launch_int_min_max(DType t, const void* x, int64_t n, int64_t* min_max, cudaStream_t stream) {
  if (n == 0) return;
  visit_index_integer(t, "bincount", [&]<class T>() {
    int_min_max_kernel<T>
        <<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), n, reinterpret_cast<long long*>(min_max));
  });
  check_launch();
}

void launch_bincount(DType t, const void* x, int64_t n, int64_t* count, cudaStream_t stream) {
  if (n == 0) return;
  visit_index_integer(t, "bincount", [&]<class T>() {
    bincount_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), n,
                                                             reinterpret_cast<unsigned long long*>(count));
  });
  check_launch();
}

void launch_gather(const ElementwiseArgs& a, int64_t indexed_stride, int64_t indexed_size, int64_t* bad,
                   cudaStream_t stream, bool wrap_negative) {
  if (a.numel == 0) return;
  // Elements are moved as raw bytes of their size: one instantiation per width.
  auto run = [&]<class T>() {
    gather_kernel<T><<<grid_for(a.numel), kThreads, 0, stream>>>(a, indexed_stride, indexed_size, bad, wrap_negative);
  };
  switch (itemsize(a.ops[0].dtype)) {
    case 1:
      run.template operator()<uint8_t>();
      break;
    case 2:
      run.template operator()<uint16_t>();
      break;
    case 4:
      run.template operator()<uint32_t>();
      break;
    default:
      run.template operator()<uint64_t>();
      break;
  }
  check_launch();
}

void launch_scatter_add(const ElementwiseArgs& a, int64_t indexed_stride, int64_t indexed_size, int64_t* bad,
                        cudaStream_t stream, bool accumulate, bool wrap_negative) {
  if (a.numel == 0) return;
  auto run = [&]<class T, bool Acc>() {
    scatter_kernel<T, Acc>
        <<<grid_for(a.numel), kThreads, 0, stream>>>(a, indexed_stride, indexed_size, bad, wrap_negative);
  };
  if (!accumulate) {
    switch (itemsize(a.ops[0].dtype)) {  // stores move raw bytes: one instantiation per width
      case 1:
        run.template operator()<uint8_t, false>();
        break;
      case 2:
        run.template operator()<uint16_t, false>();
        break;
      case 4:
        run.template operator()<uint32_t, false>();
        break;
      default:
        run.template operator()<uint64_t, false>();
        break;
    }
  } else {
    switch (a.ops[0].dtype) {
      case DType::Float32:
        run.template operator()<float, true>();
        break;
      case DType::Float64:
        run.template operator()<double, true>();
        break;
      case DType::Int32:
        run.template operator()<int32_t, true>();
        break;
      case DType::Int64:
        run.template operator()<int64_t, true>();
        break;
      case DType::Float16:
        run.template operator()<Half, true>();
        break;
      case DType::BFloat16:
        run.template operator()<BFloat16, true>();
        break;
      default:
        KILN_FAIL("scatter_add: not supported yet on cuda for dtype ", a.ops[0].dtype);
    }
  }
  check_launch();
}

// Note [Chunked copies]
// A same-dtype copy between layouts whose innermost dim is dense in every operand (a transpose of
// attention heads, [B, T, H, E] to [B, H, T, E]) moves whole chunks of that dim: the copy is
// relaunched over 16-, 8- or 4-byte "elements", the innermost size and strides rescaled, so the
// dividing index path and the memory accesses run once per chunk instead of once per element.
template <int Bytes>
struct alignas(Bytes) Chunk {
  unsigned char b[Bytes];
};

struct Identity {
  template <class T>
  __device__ T operator()(T v) const {
    return v;
  }
};

// The largest chunk the layout allows (0: none larger than an element).
int64_t copy_chunk(const ElementwiseArgs& a) {
  if (a.ndim < 1 || a.ops[0].dtype != a.ops[1].dtype) return 0;
  const int64_t isz = static_cast<int64_t>(itemsize(a.ops[0].dtype)), inner = a.ndim - 1;
  for (int64_t c : {16, 8, 4}) {
    if (c <= isz || (a.sizes[inner] * isz) % c != 0) continue;
    bool ok = true;
    for (int k = 0; k < 2 && ok; ++k) {
      const Operand& o = a.ops[k];
      ok = o.strides[inner] == isz && reinterpret_cast<uintptr_t>(o.data) % static_cast<uintptr_t>(c) == 0;
      for (int d = 0; d < inner && ok; ++d) ok = o.strides[d] % c == 0;
    }
    if (ok) return c;
  }
  return 0;
}

template <int Bytes>
void launch_chunked_copy(ElementwiseArgs a, cudaStream_t stream) {
  const int64_t isz = static_cast<int64_t>(itemsize(a.ops[0].dtype)), inner = a.ndim - 1;
  a.numel = a.numel * isz / Bytes;
  a.sizes[inner] = a.sizes[inner] * isz / Bytes;
  for (int k = 0; k < 2; ++k) a.ops[k].strides[inner] = Bytes;
  a.contiguous = a.dense_or_broadcast = false;  // dense copies are cudaMemcpy's (copy_same_device)
  launch_elementwise<Chunk<Bytes>, Chunk<Bytes>>(a, Identity{}, stream);
}

void launch_copy(const ElementwiseArgs& a, cudaStream_t stream) {
  if (a.numel == 0) return;
  switch (copy_chunk(a)) {
    case 16:
      return launch_chunked_copy<16>(a, stream);
    case 8:
      return launch_chunked_copy<8>(a, stream);
    case 4:
      return launch_chunked_copy<4>(a, stream);
    default:
      break;
  }
  visit_dtype(a.ops[0].dtype, [&]<class To>() {
    visit_dtype(a.ops[1].dtype, [&]<class From>() { launch_elementwise<To, From>(a, Convert<To>{}, stream); });
  });
}

void launch_fill(const ElementwiseArgs& a, double fvalue, int64_t ivalue, bool value_is_int, cudaStream_t stream) {
  if (a.numel == 0) return;
  visit_dtype(a.ops[0].dtype, [&]<class T>() {
    // As the CPU fill: bool from truthiness, integers from the integer value, Half/BFloat16
    // through float, float and double from the double.
    T v;
    double d = value_is_int ? static_cast<double>(ivalue) : fvalue;
    if constexpr (std::is_same_v<T, bool>)
      v = value_is_int ? ivalue != 0 : fvalue != 0.0;
    else if constexpr (is_reduced_float_v<T>)
      v = T(static_cast<float>(d));
    else if constexpr (std::is_integral_v<T>)
      v = value_is_int ? static_cast<T>(ivalue) : static_cast<T>(fvalue);
    else
      v = static_cast<T>(d);
    launch_elementwise<T>(a, Constant<T>{v}, stream);
  });
}

namespace {
struct AssertMessage {
  char text[200];
};
__global__ void assert_flag_kernel(const int64_t* flag, int64_t ok, AssertMessage m) {
  if (flag[0] != ok) {
    printf("kiln device assertion: %s (flag %lld, value %lld)\n", m.text, static_cast<long long>(flag[0]),
           static_cast<long long>(flag[1]));
    __trap();
  }
}
}  // namespace

void launch_assert_flag(const int64_t* flag, int64_t ok, const std::string& message, cudaStream_t stream) {
  AssertMessage m{};
  std::strncpy(m.text, message.c_str(), sizeof m.text - 1);
  assert_flag_kernel<<<1, 1, 0, stream>>>(flag, ok, m);
}

bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  return cudaStreamIsCapturing(stream, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone;
}

}  // namespace kiln::cuda
