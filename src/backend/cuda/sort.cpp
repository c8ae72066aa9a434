// sort and topk on CUDA (sort.cu): the dim moves last in a dense copy, each row is sorted, and
// the first k of each row go back through a view of the outputs with the dim last again.
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

}  // namespace
}  // namespace kiln::cuda
