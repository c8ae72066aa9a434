// nonzero and masked_select on CUDA (sort.cu's DeviceSelect): flags, one stream compaction
// into a worst-case buffer, then the count read back (the output's size depends on it: one
// synchronization, as any data-dependent op) and the result cut to it.
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/sort.h"
#include "dispatch/dispatch.h"
#include "ops/meta_util.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

void* data(const Tensor& t) { return t.unsafe_impl()->data(); }

Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_same_device(c, t);
  return c;
}

// t seen with `sizes` (t's dims right-aligned, stride 0 where t has size 1 or no dim).
Tensor broadcast_to(const Tensor& t, const Shape& sizes) {
  Shape strides(sizes.size(), 0);
  const size_t off = sizes.size() - static_cast<size_t>(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) != 1) strides[off + static_cast<size_t>(d)] = t.stride(d);
  return make_view(t, sizes, strides, t.storage_offset());
}

// The selected items of `in` (dense, n items) by `flags` into a [n] buffer; returns how many.
int64_t select(const Tensor& in, const Tensor& flags, const Tensor& out, int64_t n, cudaStream_t s) {
  const size_t width = itemsize(in.dtype());
  const size_t bytes = select_workspace(n, width);
  Tensor ws = make_tensor({static_cast<int64_t>(bytes)}, DType::UInt8, in.device());
  Tensor count = make_tensor({1}, DType::Int64, in.device());
  launch_select_flagged(data(in), static_cast<const uint8_t*>(data(flags)), data(out),
                        static_cast<int64_t*>(data(count)), n, width, data(ws), bytes, s);
  int64_t k = 0;
  KILN_CUDA_CHECK(cudaMemcpyAsync(&k, data(count), sizeof k, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  return k;
}

// nonzero(x): [K, x.dim()] int64 coordinates of the non-zero elements, in row-major order.
void nonzero_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor x = dense(c.in(0));
  const Device dev = x.device();
  DeviceGuard g(dev.index);
  cudaStream_t s = current_cuda_stream(dev.index);
  const int64_t n = x.numel(), nd = x.dim();
  KILN_CHECK(nd <= 16, c.name(), ": at most 16 dims are supported on cuda, got ", nd);
  outs.clear();
  if (n == 0) {
    outs.push_back(make_tensor({0, nd}, DType::Int64, dev));
    return;
  }
  Tensor flags = make_tensor({n}, DType::UInt8, dev);
  launch_nonzero_flags(x.dtype(), data(x), static_cast<uint8_t*>(data(flags)), n, s);
  Tensor iota = make_tensor({n}, DType::Int64, dev), flat = make_tensor({n}, DType::Int64, dev);
  launch_iota(static_cast<int64_t*>(data(iota)), n, s);
  const int64_t k = select(iota, flags, flat, n, s);
  Tensor out = make_tensor({k, nd}, DType::Int64, dev);
  UnravelSizes sz;
  sz.ndim = static_cast<int>(nd);
  for (int64_t d = 0; d < nd; ++d) sz.sizes[d] = x.size(d);
  launch_unravel(static_cast<const int64_t*>(data(flat)), k, sz, static_cast<int64_t*>(data(out)), s);
  outs.push_back(out);
}
KILN_REGISTER_KERNEL(nonzero, CUDA, nonzero_kernel);

// masked_select(x, mask): the elements of x (broadcast with the bool mask) where mask is true, 1-d.
void masked_select_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &x = c.in(0), &mask = c.in(1);
  if (mask.dtype() != DType::Bool || x.is_cpu() || mask.is_cpu()) {
    staged_on_cpu(c, outs);  // the CPU's checks and messages, or a 0-d CPU operand
    return;
  }
  const Device dev = x.device();
  DeviceGuard g(dev.index);
  cudaStream_t s = current_cuda_stream(dev.index);
  Shape bs = broadcast_shapes(x.sizes(), mask.sizes(), c.name());
  Tensor xb = make_tensor(bs, x.dtype(), dev), mb = make_tensor(bs, DType::Bool, dev);
  copy_same_device(xb, broadcast_to(x, bs));
  copy_same_device(mb, broadcast_to(mask, bs));
  const int64_t n = xb.numel();
  outs.clear();
  if (n == 0) {
    outs.push_back(make_tensor({0}, x.dtype(), dev));
    return;
  }
  Tensor buf = make_tensor({n}, x.dtype(), dev);
  const int64_t k = select(xb, mb, buf, n, s);
  Tensor out = make_tensor({k}, x.dtype(), dev);
  if (k > 0) copy_same_device(out, make_view(buf, {k}, {1}, 0));
  outs.push_back(out);
}
KILN_REGISTER_KERNEL(masked_select, CUDA, masked_select_kernel);

}  // namespace
}  // namespace kiln::cuda
