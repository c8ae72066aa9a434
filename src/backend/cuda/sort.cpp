// sort and topk on CUDA (sort.cu): the dim moves last in a dense copy, each row is sorted, and
// the first k of each row go back through a view of the outputs with the dim last again. unique
// and unique_consecutive without a dim (Note [CUDA unique]).
#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/sort.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

// t's sizes and strides with `dim` moved last (a view; 0-d tensors as [1]).
Tensor dim_last(const Tensor& t, int64_t dim) {
  Shape sizes, strides;
  if (t.dim() == 0) return make_view(t, Shape{1}, Shape{1}, t.storage_offset());
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d != dim) sizes.push_back(t.sizes()[d]), strides.push_back(t.strides()[d]);
  sizes.push_back(t.sizes()[dim]);
  strides.push_back(t.strides()[dim]);
  return make_view(t, sizes, strides, t.storage_offset());
}

Tensor dense(const Tensor& t) {
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_same_device(c, t);
  return c;
}

// values/indices = the first k of x's rows along dim, ordered (descending: largest first).
void sort_rows(const Tensor& x_in, const Tensor& values, const Tensor& indices, int64_t dim, int64_t k,
               bool descending) {
  if (values.numel() == 0) return;
  DeviceGuard g(x_in.device().index);
  cudaStream_t s = current_cuda_stream(x_in.device().index);
  Tensor x = dense(dim_last(x_in, dim));
  const int64_t n = x.sizes()[x.dim() - 1], rows = n ? x.numel() / n : 0;
  Tensor vv = dim_last(values, dim), iv = dim_last(indices, dim);
  Tensor v = make_tensor(vv.sizes(), values.dtype(), values.device());
  Tensor i = make_tensor(iv.sizes(), DType::Int64, values.device());
  size_t bytes = sort_rows_workspace(x.dtype(), rows, n, descending);
  Tensor ws = make_tensor({static_cast<int64_t>(bytes)}, DType::UInt8, x.device());
  launch_sort_rows(x.dtype(), x.unsafe_impl()->data(), v.unsafe_impl()->data(),
                   reinterpret_cast<int64_t*>(i.unsafe_impl()->data()), rows, n, k, descending,
                   ws.unsafe_impl()->data(), bytes, s);
  copy_same_device(vv, v);
  copy_same_device(iv, i);
}

int64_t dim_of(const OpCall& c, int64_t attr) {
  return c.in(0).dim() == 0 ? 0 : wrap_dim(c.attrs.i(attr), c.in(0).dim(), c.name());
}

// Radix sorts are stable, so `stable` changes nothing (the CPU's unstable sort breaks ties by index too).
void sort_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const int64_t dim = dim_of(c, 0);
  const int64_t n = c.in(0).dim() == 0 ? 1 : c.in(0).sizes()[dim];
  sort_rows(c.in(0), outs[0], outs[1], dim, n, c.attrs.b(1));
}
KILN_REGISTER_KERNEL(sort, CUDA, sort_kernel);

// sorted=false may return any order; the sorted one is one of them (as the CPU).
void topk_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const int64_t dim = dim_of(c, 1);
  const int64_t k = c.in(0).dim() == 0 ? 1 : c.attrs.i(0);
  sort_rows(c.in(0), outs[0], outs[1], dim, k, c.attrs.b(2));
}
KILN_REGISTER_KERNEL(topk, CUDA, topk_kernel);

// Note [CUDA unique]
// unique and unique_consecutive over all elements (dim=None): unique sorts x's elements (stable,
// the CPU's order: NaN last, -0 == +0), then group starts are flagged where an element differs
// from the one before (NaN equals nothing: each is its own value), an inclusive scan numbers the
// groups, and one pass writes each group's value (its first element in the sorted order: the
// CPU's representative, bits and all), the inverse and the counts (int64 atomics: exact). The
// group count is read back to size the outputs (one synchronization, as PyTorch's). With a dim
// the slices compare whole: staged through the CPU (Note [CUDA staged through the CPU]).
void unique_on_device(const OpCall& c, std::vector<Tensor>& outs, bool sort) {
  const Tensor& x = c.in(0);
  const size_t a = sort ? 1 : 0;  // attrs: [sorted,] return_inverse, return_counts, dim
  const bool want_inverse = c.attrs.b(a), want_counts = c.attrs.b(a + 1);
  const int64_t n = x.numel();
  if (c.attrs.opt_i(a + 2) || n == 0 || n >= (int64_t(1) << 31)) return staged_on_cpu(c, outs);
  const Device dev = x.device();
  DeviceGuard g(dev.index);
  cudaStream_t s = current_cuda_stream(dev.index);
  Tensor xd = dense_as(x, x.dtype());
  Tensor keys = xd, perm;
  if (sort) {
    keys = make_tensor({n}, x.dtype(), dev);
    perm = make_tensor({n}, DType::Int64, dev);
    size_t bytes = sort_rows_workspace(x.dtype(), 1, n, false);
    Tensor ws = make_tensor({static_cast<int64_t>(bytes)}, DType::UInt8, dev);
    launch_sort_rows(x.dtype(), xd.unsafe_impl()->data(), keys.unsafe_impl()->data(),
                     reinterpret_cast<int64_t*>(perm.unsafe_impl()->data()), 1, n, n, false, ws.unsafe_impl()->data(),
                     bytes, s);
  }
  auto i64 = [](const Tensor& t) { return reinterpret_cast<int64_t*>(t.unsafe_impl()->data()); };
  Tensor starts = make_tensor({n}, DType::Int64, dev), group = make_tensor({n}, DType::Int64, dev);
  launch_group_starts(x.dtype(), keys.unsafe_impl()->data(), i64(starts), n, s);
  size_t bytes = inclusive_sum_workspace(n);
  Tensor ws = make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::UInt8, dev);
  launch_inclusive_sum(i64(starts), i64(group), n, ws.unsafe_impl()->data(), bytes, s);
  int64_t groups = 0;
  KILN_CUDA_CHECK(cudaMemcpyAsync(&groups, i64(group) + (n - 1), sizeof groups, cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync (device to host)");
  KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  Tensor values = make_tensor({groups}, x.dtype(), dev);
  Tensor inverse = make_tensor(want_inverse ? Shape(x.sizes().begin(), x.sizes().end()) : Shape{0}, DType::Int64, dev);
  Tensor counts = make_tensor(Shape{want_counts ? groups : 0}, DType::Int64, dev);
  if (want_counts)
    KILN_CUDA_CHECK(cudaMemsetAsync(counts.unsafe_impl()->data(), 0, counts.nbytes(), s), "cudaMemsetAsync");
  launch_unique_scatter(xd.unsafe_impl()->data(), itemsize(x.dtype()), sort ? i64(perm) : nullptr, i64(starts),
                        i64(group), n, values.unsafe_impl()->data(), want_inverse ? i64(inverse) : nullptr,
                        want_counts ? i64(counts) : nullptr, s);
  outs = {values, inverse, counts};
}

void unique_kernel(const OpCall& c, std::vector<Tensor>& outs) { unique_on_device(c, outs, true); }
void unique_consecutive_kernel(const OpCall& c, std::vector<Tensor>& outs) { unique_on_device(c, outs, false); }
KILN_REGISTER_KERNEL(unique, CUDA, unique_kernel);
KILN_REGISTER_KERNEL(unique_consecutive, CUDA, unique_consecutive_kernel);

}  // namespace
}  // namespace kiln::cuda
