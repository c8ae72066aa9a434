// Helpers shared by the indexing-family CPU kernels: strided offset walks,
// index reading and bounds errors reported from parallel regions.
#pragma once
#include <atomic>
#include <cstring>
#include <mutex>

#include "backend/cpu/loops.h"
#include "ops/registry.h"

namespace kiln::cpu {

// Sizes/strides of t, with a 0-d tensor seen as one element of a 1-d one
// (torch's rule for gather/scatter/sort on scalars).
inline Shape sizes_1d(const Tensor& t) { return t.dim() == 0 ? Shape{1} : Shape(t.sizes().begin(), t.sizes().end()); }
inline Shape strides_1d(const Tensor& t) {
  return t.dim() == 0 ? Shape{1} : Shape(t.strides().begin(), t.strides().end());
}

// t itself when contiguous, else a contiguous copy.
inline Tensor contig(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor r = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_cpu(r, t);
  return r;
}

// Index values as a contiguous int64 tensor.
inline Tensor index_as_int64(const Tensor& index) { return contig(cast_to(index, kInt64)); }

// Note [Errors in parallel kernels]: throwing inside a parallel region would
// terminate the process, so a kernel records the first bad index here and
// throws once the loop is done.
struct IndexErrorSlot {
  std::atomic<bool> set{false};
  std::mutex mu;
  int64_t value = 0, dim = 0, size = 0;
  void report(int64_t v, int64_t d, int64_t n) {
    if (set.load(std::memory_order_relaxed)) return;
    std::lock_guard<std::mutex> lock(mu);
    if (set.load()) return;
    value = v;
    dim = d;
    size = n;
    set.store(true);
  }
  void throw_if(const char* op) const {
    KILN_CHECK(!set.load(), op, ": index ", value, " is out of bounds for dimension ", dim, " with size ", size);
  }
};

// Column dims walked in row-major order with N stride sets (in elements),
// e.g. destination and source. Adjacent dims that are contiguous for every
// set are merged, so dense data becomes one long run.
template <size_t N>
struct Cols {
  Shape sizes;
  std::array<Shape, N> st;

  void add(int64_t size, const std::array<int64_t, N>& s) {
    if (size == 1) return;
    sizes.push_back(size);
    for (size_t k = 0; k < N; ++k) st[k].push_back(s[k]);
  }
  void coalesce() {
    Shape ns;
    std::array<Shape, N> nst;
    for (size_t i = 0; i < sizes.size(); ++i) {
      bool merge = !ns.empty();
      for (size_t k = 0; k < N && merge; ++k) merge = nst[k].back() == st[k][i] * sizes[i];
      if (merge) {
        ns.back() *= sizes[i];
        for (size_t k = 0; k < N; ++k) nst[k].back() = st[k][i];
      } else {
        ns.push_back(sizes[i]);
        for (size_t k = 0; k < N; ++k) nst[k].push_back(st[k][i]);
      }
    }
    sizes = std::move(ns);
    st = std::move(nst);
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  int64_t inner(size_t k) const { return sizes.empty() ? 1 : st[k].back(); }

  // Calls f(offsets, n) for each run of the innermost dim within [begin, end).
  template <class F>
  void walk(int64_t begin, int64_t end, const F& f) const {
    std::array<int64_t, N> off{};
    if (sizes.empty()) {
      if (begin < end) f(off, int64_t(1));
      return;
    }
    int64_t nd = static_cast<int64_t>(sizes.size());
    int64_t in = sizes[nd - 1];
    for (int64_t idx = begin; idx < end;) {
      int64_t pos = idx % in, rem = idx / in;
      for (size_t k = 0; k < N; ++k) off[k] = pos * st[k][nd - 1];
      for (int64_t d = nd - 2; d >= 0 && rem > 0; --d) {
        int64_t c = rem % sizes[d];
        rem /= sizes[d];
        for (size_t k = 0; k < N; ++k) off[k] += c * st[k][d];
      }
      int64_t n = std::min(in - pos, end - idx);
      f(off, n);
      idx += n;
    }
  }
};

// Copies n elements of `es` bytes between strided runs (strides in elements).
inline void copy_run(char* dst, int64_t sd, const char* src, int64_t ss, int64_t n, size_t es) {
  if (sd == 1 && ss == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * es);
    return;
  }
  auto loop = [&]<class U>() {
    U* d = reinterpret_cast<U*>(dst);
    const U* s = reinterpret_cast<const U*>(src);
    for (int64_t i = 0; i < n; ++i) d[i * sd] = s[i * ss];
  };
  switch (es) {
    case 1: loop.template operator()<uint8_t>(); break;
    case 2: loop.template operator()<uint16_t>(); break;
    case 4: loop.template operator()<uint32_t>(); break;
    default: loop.template operator()<uint64_t>(); break;
  }
}

// The arithmetic type of accumulating kernels: float for 16-bit floats.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

}  // namespace kiln::cpu
