// flip, pad, scatter and index_add on CUDA, composed on the host from the existing launches
// (elementwise.cu's gather, scatter, fill and copy): no new device code.
// flip and the reflect/replicate pads are one gather per dim, with an index computed here.
#include <algorithm>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/launch.h"
#include "dispatch/dispatch.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

void* data(const Tensor& t) { return t.unsafe_impl()->data(); }

// Two zeroed int64 for the gather/scatter kernels' bad-index flag, unread where indices are ours.
Tensor bad_flag(const Device& dev, cudaStream_t s) {
  Tensor bad = make_tensor({2}, DType::Int64, dev);
  launch_fill(make_elementwise_args({&bad}), 0.0, 0, true, s);
  return bad;
}

// src with dim d replaced by src's entries at `index` (each in [0, src.size(d))): a new tensor.
Tensor gather_dim(const Tensor& src, int64_t d, const std::vector<int64_t>& index) {
  const Device dev = src.device();
  cudaStream_t s = current_cuda_stream(dev.index);
  Shape sizes(src.sizes().begin(), src.sizes().end());
  sizes[d] = static_cast<int64_t>(index.size());
  Tensor out = make_tensor(sizes, src.dtype(), dev);
  if (out.numel() == 0) return out;
  Tensor idx = make_tensor({static_cast<int64_t>(index.size())}, DType::Int64, dev);
  // From pageable memory: the call returns once `index` is staged, so it may go out of scope.
  KILN_CUDA_CHECK(cudaMemcpyAsync(data(idx), index.data(), index.size() * sizeof(int64_t), cudaMemcpyHostToDevice, s),
                  "cudaMemcpyAsync (host to device)");
  Shape zero(sizes.size(), 0), src_strides(src.strides().begin(), src.strides().end());
  zero[d] = 1;
  Tensor iv = make_view(idx, sizes, zero, 0);
  src_strides[d] = 0;
  Tensor sv = make_view(src, sizes, src_strides, src.storage_offset());
  Tensor bad = bad_flag(dev, s);
  ElementwiseArgs a = make_elementwise_args({&out, &iv, &sv});
  launch_gather(a, src.stride(d) * static_cast<int64_t>(itemsize(src.dtype())), src.size(d),
                reinterpret_cast<int64_t*>(data(bad)), s);
  return out;
}

void flip_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  DeviceGuard g(x.device().index);
  std::vector<int64_t> dims;
  for (int64_t d : c.attrs.ints(0))
    if (x.dim() > 0) dims.push_back(wrap_dim(d, x.dim(), c.name()));
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  Tensor cur = x;
  for (int64_t d : dims) {
    std::vector<int64_t> index(static_cast<size_t>(cur.size(d)));
    for (size_t j = 0; j < index.size(); ++j) index[j] = static_cast<int64_t>(index.size() - 1 - j);
    cur = gather_dim(cur, d, index);
  }
  copy_same_device(outs[0], cur);
}
KILN_REGISTER_KERNEL(flip, CUDA, flip_kernel);

// (x; pad, mode, value): pads pair up from the last dim backwards, as F.pad (meta_pad checks them).
void pad_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x = c.in(0);
  const Tensor& out = outs[0];
  const auto& pad = c.attrs.ints(0);
  const std::string& mode = c.attrs.str(1);
  DeviceGuard g(out.device().index);
  cudaStream_t s = current_cuda_stream(out.device().index);
  if (mode == "constant") {
    // Fill, then copy the kept part of x (a negative pad crops) into its place.
    Tensor o = out;
    launch_fill(make_elementwise_args({&o}), c.attrs.f(2), 0, false, s);
    Shape kept(x.sizes().begin(), x.sizes().end());
    int64_t x_off = x.storage_offset(), o_off = out.storage_offset();
    for (size_t k = 0; k < pad.size() / 2; ++k) {
      int64_t d = x.dim() - 1 - static_cast<int64_t>(k), l = pad[2 * k], r = pad[2 * k + 1];
      kept[d] = x.size(d) - std::max<int64_t>(-l, 0) - std::max<int64_t>(-r, 0);
      if (kept[d] <= 0) return;
      x_off += std::max<int64_t>(-l, 0) * x.stride(d);
      o_off += std::max<int64_t>(l, 0) * out.stride(d);
    }
    Tensor xv = make_view(x, kept, x.strides(), x_off), ov = make_view(out, kept, out.strides(), o_off);
    copy_same_device(ov, xv);
    return;
  }
  // reflect / replicate: one gather per padded dim, as the CPU kernel's tables.
  Tensor cur = x;
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    int64_t d = x.dim() - 1 - static_cast<int64_t>(k), l = pad[2 * k], n = x.size(d), m = out.size(d);
    std::vector<int64_t> index(static_cast<size_t>(m));
    for (int64_t o = 0; o < m; ++o) {
      int64_t i = o - l;
      if (mode == "reflect")
        i = i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
      else
        i = std::clamp<int64_t>(i, 0, n - 1);
      index[static_cast<size_t>(o)] = i;
    }
    cur = gather_dim(cur, d, index);
  }
  copy_same_device(out, cur);
}
KILN_REGISTER_KERNEL(pad, CUDA, pad_kernel);

// `t` seen with the index's sizes, its own strides, and stride 0 along dim if `indexed`.
Tensor with_sizes(const Tensor& t, IntArrayRef sizes, int64_t dim, bool indexed) {
  Shape strides(t.strides().begin(), t.strides().end());
  if (indexed) strides[static_cast<size_t>(dim)] = 0;
  return make_view(t, sizes, strides, t.storage_offset());
}

// A 0-d CPU tensor may come with CUDA ones (common_device): it is uploaded, as pointwise.cpp's operand.
Tensor as_1d(const Tensor& t, const Device& dev) {
  Tensor d = t;
  if (t.is_cpu()) {
    d = make_tensor(t.sizes(), t.dtype(), dev);
    get_backend(DeviceType::CUDA)->copy(d, t);
  }
  return d.dim() == 0 ? make_view(d, {1}, {1}, d.storage_offset()) : d;
}

Tensor to_int64(const Tensor& index, const Device& dev) {
  Tensor d = as_1d(index, dev);
  if (d.dtype() == DType::Int64) return d;
  Tensor i = make_tensor(d.sizes(), DType::Int64, dev);
  copy_same_device(i, d);
  return i;
}

// Scatters src (viewed with idx's sizes) into out along dim; raises the first bad index.
void scatter_into(const char* op, const Tensor& out, const Tensor& idx, const Tensor& src, int64_t dim,
                  bool accumulate) {
  const Device dev = out.device();
  cudaStream_t s = current_cuda_stream(dev.index);
  Tensor ov = with_sizes(out, idx.sizes(), dim, true), sv = with_sizes(src, idx.sizes(), dim, false);
  if (sv.dtype() != ov.dtype()) {
    Tensor conv = make_tensor(sv.sizes(), ov.dtype(), dev);
    copy_same_device(conv, sv);
    sv = conv;
  }
  Tensor bad = bad_flag(dev, s);
  ElementwiseArgs a = make_elementwise_args({&ov, &idx, &sv});
  const int64_t size = out.size(dim);
  launch_scatter_add(a, out.stride(dim) * static_cast<int64_t>(itemsize(out.dtype())), size,
                     reinterpret_cast<int64_t*>(data(bad)), s, accumulate);
  if (stream_capturing(s)) {  // Note [Checks while capturing]
    launch_assert_flag(reinterpret_cast<const int64_t*>(data(bad)), 0,
                       std::string(op) + ": an index is out of bounds for dimension " + std::to_string(dim) +
                           " with size " + std::to_string(size),
                       s);
    return;
  }
  int64_t host[2] = {0, 0};
  KILN_CUDA_CHECK(cudaMemcpyAsync(host, data(bad), sizeof host, cudaMemcpyDeviceToHost, s),
                  "cudaMemcpyAsync (device to host)");
  KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  KILN_CHECK(host[0] == 0, op, ": index ", host[1], " is out of bounds for dimension ", dim, " with size ", size);
}

// Duplicate indices keep one of their values, not necessarily the last (as PyTorch's CUDA scatter).
void scatter_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  get_backend(DeviceType::CUDA)->copy(outs[0], c.in(0));  // x may be a 0-d CPU tensor
  if (c.in(1).numel() == 0 || outs[0].numel() == 0) return;
  DeviceGuard g(outs[0].device().index);
  const Device dev = outs[0].device();
  Tensor out = as_1d(outs[0], dev);
  int64_t dim = wrap_dim(c.attrs.i(0), out.dim(), c.name());
  scatter_into(c.name(), out, to_int64(c.in(1), dev), as_1d(c.in(2), dev), dim, false);
}
KILN_REGISTER_KERNEL(scatter, CUDA, scatter_kernel);

// (x, index [n], source; dim, alpha): out = x; out[..., index[i], ...] += alpha * source[..., i, ...]
// as a scatter_add with the index broadcast over source (atomics: float32/64, int32/64).
void index_add_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  get_backend(DeviceType::CUDA)->copy(outs[0], c.in(0));  // x may be a 0-d CPU tensor
  if (c.in(1).numel() == 0 || outs[0].numel() == 0) return;
  DeviceGuard g(outs[0].device().index);
  const Device dev = outs[0].device();
  Tensor out = as_1d(outs[0], dev), src = as_1d(c.in(2), dev);
  int64_t dim = wrap_dim(c.attrs.i(0), out.dim(), c.name());
  Tensor idx = to_int64(c.in(1), dev);
  const Scalar& alpha = c.attrs.s(1);
  if (!(alpha.is_floating_point() ? alpha.to_double() == 1.0 : alpha.to_long() == 1)) {
    Tensor a = make_tensor({}, src.dtype(), src.device());
    const bool is_int = !alpha.is_floating_point();
    launch_fill(make_elementwise_args({&a}), is_int ? 0.0 : alpha.to_double(), is_int ? alpha.to_long() : 0, is_int,
                current_cuda_stream(src.device().index));
    src = as_1d(backend_call(OpId::mul, std::vector<Tensor>{src, a}, {})[0], dev);
  }
  Shape strides(src.dim(), 0);
  strides[dim] = idx.stride(0);
  Tensor iv = make_view(idx, src.sizes(), strides, idx.storage_offset());
  scatter_into(c.name(), out, iv, src, dim, true);
}
KILN_REGISTER_KERNEL(index_add, CUDA, index_add_kernel);

}  // namespace
}  // namespace kiln::cuda
