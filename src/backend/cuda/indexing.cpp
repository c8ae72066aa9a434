// CUDA kernels for gather and scatter_add (elementwise.cu's launch_gather/launch_scatter_add).
//
// Note [CUDA gather]
// Both walk the index tensor's elements. The tensor addressed by index values is viewed with
// the index's sizes and a zero stride along `dim`; the kernel adds value * its real stride.
// An index out of range is flagged on the device and raised here after the launch (one
// synchronization per call, as the CPU kernels raise the same error; a device-side assert
// would avoid it but would poison the context).
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "dispatch/dispatch.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

// A 0-d tensor as a 1-d tensor of one element (the CPU kernels' sizes_1d).
Tensor as_1d(const Tensor& t) { return t.dim() == 0 ? make_view(t, {1}, {1}, t.storage_offset()) : t; }

Tensor index_int64(const Tensor& index) {
  if (index.dtype() == DType::Int64) return as_1d(index);
  Tensor i = make_tensor(index.sizes(), DType::Int64, index.device());
  copy_same_device(i, index);
  return as_1d(i);
}

// `t` seen with the index's sizes, its own strides, and stride 0 along dim if `indexed`.
Tensor with_index_sizes(const Tensor& t, const Tensor& index, int64_t dim, bool indexed) {
  Shape strides(t.strides().begin(), t.strides().end());
  if (indexed) strides[static_cast<size_t>(dim)] = 0;
  return make_view(t, index.sizes(), strides, t.storage_offset());
}

// Runs `launch` with a zeroed two-int64 flag and raises the first bad index it reports.
template <class F>
void with_bad_index_check(const char* op, int64_t dim, int64_t size, const Device& dev, const F& launch) {
  cudaStream_t s = current_cuda_stream(dev.index);
  Tensor bad = make_tensor({2}, DType::Int64, dev);
  launch_fill(make_elementwise_args({&bad}), 0.0, 0, true, s);
  launch(reinterpret_cast<int64_t*>(bad.unsafe_impl()->data()), s);
  int64_t host[2] = {0, 0};
  KILN_CUDA_CHECK(cudaMemcpyAsync(host, bad.unsafe_impl()->data(), sizeof host, cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync (device to host)");
  KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  KILN_CHECK(host[0] == 0, op, ": index ", host[1], " is out of bounds for dimension ", dim, " with size ", size);
}

void gather_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  if (outs[0].numel() == 0) return;
  Tensor x = as_1d(c.in(0)), out = as_1d(outs[0]);
  DeviceGuard g(out.device().index);
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  Tensor idx = index_int64(c.in(1));
  Tensor xv = with_index_sizes(x, idx, dim, true);
  ElementwiseArgs a = make_elementwise_args({&out, &idx, &xv});
  int64_t stride = x.stride(dim) * static_cast<int64_t>(itemsize(x.dtype())), size = x.size(dim);
  with_bad_index_check(c.name(), dim, size, out.device(),
                       [&](int64_t* bad, cudaStream_t s) { launch_gather(a, stride, size, bad, s); });
}
KILN_REGISTER_KERNEL(gather, CUDA, gather_kernel);

void scatter_add_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  copy_same_device(outs[0], c.in(0));
  if (c.in(1).numel() == 0) return;
  Tensor out = as_1d(outs[0]), src = as_1d(c.in(2));
  DeviceGuard g(out.device().index);
  int64_t dim = wrap_dim(c.attrs.i(0), out.dim(), c.name());
  Tensor idx = index_int64(c.in(1));
  Tensor ov = with_index_sizes(out, idx, dim, true), sv = with_index_sizes(src, idx, dim, false);
  if (sv.dtype() != ov.dtype()) {
    Tensor conv = make_tensor(sv.sizes(), ov.dtype(), ov.device());
    copy_same_device(conv, sv);
    sv = conv;
  }
  ElementwiseArgs a = make_elementwise_args({&ov, &idx, &sv});
  int64_t stride = out.stride(dim) * static_cast<int64_t>(itemsize(out.dtype())), size = out.size(dim);
  with_bad_index_check(c.name(), dim, size, out.device(),
                       [&](int64_t* bad, cudaStream_t s) { launch_scatter_add(a, stride, size, bad, s); });
}
KILN_REGISTER_KERNEL(scatter_add, CUDA, scatter_add_kernel);

// The one integer index tensor of index/index_put (inputs from `first`): its position among
// x's dims, or an error naming what is not supported yet.
int64_t single_index(const OpCall& c, size_t first) {
  int64_t pos = -1;
  for (size_t i = first; i < c.inputs.size(); ++i) {
    if (!c.in(i).defined()) continue;
    KILN_CHECK(pos < 0, c.name(), ": not supported yet on cuda with more than one index tensor");
    pos = static_cast<int64_t>(i - first);
  }
  KILN_CHECK(pos >= 0, c.name(), ": no index tensor");
  const Tensor& index = c.in(first + static_cast<size_t>(pos));
  KILN_CHECK(is_integral(index.dtype()), c.name(), ": not supported yet on cuda with a ", index.dtype(),
             " index (boolean masks)");
  return pos;
}

// x[..., idx, ...] and the index, seen with the indexing result's sizes `r` (x's dims before
// pos, the index's dims, x's dims after pos): x with stride 0 over the index's dims, the index
// with stride 0 over x's.
std::pair<Tensor, Tensor> index_views(const Tensor& x, const Tensor& index, int64_t pos, IntArrayRef r) {
  Tensor idx = index_int64(index);
  if (index.dim() == 0) idx = make_view(idx, {}, {}, idx.storage_offset());  // a 0-d index drops the dim
  Shape xs, is;
  for (int64_t d = 0; d < pos; ++d) xs.push_back(x.stride(d)), is.push_back(0);
  for (int64_t d = 0; d < idx.dim(); ++d) xs.push_back(0), is.push_back(idx.stride(d));
  for (int64_t d = pos + 1; d < x.dim(); ++d) xs.push_back(x.stride(d)), is.push_back(0);
  return {make_view(x, r, xs, x.storage_offset()), make_view(idx, r, is, idx.storage_offset())};
}

// index (x[idx], embedding, index_select) with one integer index tensor: a gather with x's
// stride along the indexed dim; negative indices wrap.
void index_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &x = c.in(0), &out = outs[0];
  int64_t pos = single_index(c, 1);
  if (out.numel() == 0) return;
  DeviceGuard g(out.device().index);
  auto [xv, iv] = index_views(x, c.in(1 + static_cast<size_t>(pos)), pos, out.sizes());
  ElementwiseArgs a = make_elementwise_args({&out, &iv, &xv});
  int64_t stride = x.stride(pos) * static_cast<int64_t>(itemsize(x.dtype())), size = x.size(pos);
  with_bad_index_check(c.name(), pos, size, out.device(), [&](int64_t* bad, cudaStream_t s) {
    launch_gather(a, stride, size, bad, s, /*wrap_negative=*/true);
  });
}
KILN_REGISTER_KERNEL(index, CUDA, index_kernel);

// index_put (x, values, indices...; accumulate): out = x with out[idx] = values (or += with
// accumulate, the backward of index), for one integer index tensor.
void index_put_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  copy_same_device(out, c.in(0));
  int64_t pos = single_index(c, 2);
  const Tensor& index = c.in(2 + static_cast<size_t>(pos));
  if (index.numel() == 0 || out.numel() == 0) return;
  DeviceGuard g(out.device().index);
  Shape r;
  for (int64_t d = 0; d < pos; ++d) r.push_back(out.size(d));
  for (int64_t d = 0; d < index.dim(); ++d) r.push_back(index.size(d));
  for (int64_t d = pos + 1; d < out.dim(); ++d) r.push_back(out.size(d));
  auto [ov, iv] = index_views(out, index, pos, r);
  // values broadcast to r, in out's dtype.
  Tensor vals = c.in(1);
  if (vals.dtype() != out.dtype() || vals.device() != out.device()) {
    Tensor v = make_tensor(vals.sizes(), out.dtype(), out.device());
    get_backend(DeviceType::CUDA)->copy(v, vals);
    vals = v;
  }
  Shape vs(r.size(), 0);
  for (int64_t i = 0; i < vals.dim(); ++i) {
    size_t di = r.size() - static_cast<size_t>(vals.dim()) + static_cast<size_t>(i);
    if (vals.size(i) != 1) vs[di] = vals.stride(i);
  }
  Tensor vv = make_view(vals, r, vs, vals.storage_offset());
  ElementwiseArgs a = make_elementwise_args({&ov, &iv, &vv});
  int64_t stride = out.stride(pos) * static_cast<int64_t>(itemsize(out.dtype())), size = out.size(pos);
  bool acc = c.attrs.b(0);
  with_bad_index_check(c.name(), pos, size, out.device(), [&](int64_t* bad, cudaStream_t s) {
    launch_scatter_add(a, stride, size, bad, s, acc, /*wrap_negative=*/true);
  });
}
KILN_REGISTER_KERNEL(index_put, CUDA, index_put_kernel);

}  // namespace
}  // namespace kiln::cuda
