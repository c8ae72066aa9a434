// Host side of the pooling and scan prims on CUDA (kernels in nn_kernels.cu): shapes from the
// same functions as the CPU's kernels (ops/conv_util.h), dense inputs, then one launch.
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/launch.h"
#include "backend/cuda/nn_kernels.h"
#include "dispatch/dispatch.h"
#include "ops/conv_util.h"
#include "ops/meta_util.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

const void* cptr(const Tensor& t) { return t.unsafe_impl()->data(); }
void* mptr(const Tensor& t) { return t.unsafe_impl()->data(); }
cudaStream_t stream_of(const Tensor& t) { return current_cuda_stream(t.device().index); }

// ---- pooling: 2-D pools are 3-D ones with a unit depth, as on the CPU ----
PoolArgs pool_args(const PoolShape& s) {
  PoolArgs p;
  p.planes = s.N * s.C;
  const int64_t in[3] = {1, s.H, s.W}, k[3] = {1, s.kH, s.kW}, st[3] = {1, s.sh, s.sw}, pad[3] = {0, s.ph, s.pw},
                dil[3] = {1, s.dh, s.dw}, out[3] = {1, s.Ho, s.Wo};
  for (int j = 0; j < 3; ++j)
    p.in[j] = in[j], p.k[j] = k[j], p.stride[j] = st[j], p.pad[j] = pad[j], p.dil[j] = dil[j], p.out[j] = out[j];
  return p;
}
PoolArgs pool_args(const PoolNdShape& s) {
  PoolArgs p;
  p.planes = s.N * s.C;
  for (int j = 0; j < 3; ++j)
    p.in[j] = s.in[j], p.k[j] = s.k[j], p.stride[j] = s.stride[j], p.pad[j] = s.pad[j], p.dil[j] = s.dil[j],
    p.out[j] = s.out[j];
  return p;
}

PoolArgs max_pool2d_args(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  return pool_args(pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4)));
}
PoolArgs avg_pool2d_args(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  PoolArgs p =
      pool_args(pool_shape(c.name(), x, a.ints(0), a.ints(1), a.ints(2), std::vector<int64_t>{1}, a.b(3), false));
  p.count_include_pad = a.b(4);
  p.divisor_override = a.none(5) ? 0 : a.i(5);
  return p;
}
PoolArgs max_pool3d_args(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  return pool_args(pool_nd_shape(c.name(), 3, x, a.ints(0), a.ints(1), a.ints(2), a.ints(3), a.b(4)));
}
PoolArgs avg_pool3d_args(const OpCall& c, const Tensor& x) {
  const Attrs& a = c.attrs;
  PoolArgs p =
      pool_args(pool_nd_shape(c.name(), 3, x, a.ints(0), a.ints(1), a.ints(2), std::vector<int64_t>{1}, a.b(3), false));
  p.count_include_pad = a.b(4);
  p.divisor_override = a.none(5) ? 0 : a.i(5);
  return p;
}

template <PoolArgs (*Args)(const OpCall&, const Tensor&)>
void max_pool_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  PoolArgs p = Args(c, c.in(0));
  DeviceGuard g(outs[0].device().index);
  Tensor x = dense_as(c.in(0), c.in(0).dtype());
  launch_max_pool(p, x.dtype(), cptr(x), mptr(outs[0]), static_cast<int64_t*>(mptr(outs[1])), stream_of(x));
}
KILN_REGISTER_KERNEL(max_pool2d, CUDA, max_pool_kernel<max_pool2d_args>);
KILN_REGISTER_KERNEL(max_pool3d, CUDA, max_pool_kernel<max_pool3d_args>);

// (grad_out, x, indices): the gradient of max_pool2d with respect to x.
void max_pool2d_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  PoolArgs p = max_pool2d_args(c, c.in(1));
  DeviceGuard g(outs[0].device().index);
  Tensor go = dense_as(c.in(0), outs[0].dtype()), idx = dense_as(c.in(2), DType::Int64);
  launch_max_pool_backward(p, outs[0].dtype(), cptr(go), static_cast<const int64_t*>(cptr(idx)), mptr(outs[0]),
                           stream_of(go));
}
KILN_REGISTER_KERNEL(max_pool2d_backward, CUDA, max_pool2d_backward_kernel);

template <PoolArgs (*Args)(const OpCall&, const Tensor&)>
void avg_pool_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  PoolArgs p = Args(c, c.in(0));
  DeviceGuard g(outs[0].device().index);
  Tensor x = dense_as(c.in(0), c.in(0).dtype());
  launch_avg_pool(p, x.dtype(), cptr(x), mptr(outs[0]), stream_of(x));
}
KILN_REGISTER_KERNEL(avg_pool2d, CUDA, avg_pool_kernel<avg_pool2d_args>);
KILN_REGISTER_KERNEL(avg_pool3d, CUDA, avg_pool_kernel<avg_pool3d_args>);

// (grad_out, x): the gradient of the avg pool with respect to x.
template <PoolArgs (*Args)(const OpCall&, const Tensor&)>
void avg_pool_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  PoolArgs p = Args(c, c.in(1));
  DeviceGuard g(outs[0].device().index);
  Tensor go = dense_as(c.in(0), outs[0].dtype());
  launch_avg_pool_backward(p, outs[0].dtype(), cptr(go), mptr(outs[0]), stream_of(go));
}
KILN_REGISTER_KERNEL(avg_pool2d_backward, CUDA, avg_pool_backward_kernel<avg_pool2d_args>);
KILN_REGISTER_KERNEL(avg_pool3d_backward, CUDA, avg_pool_backward_kernel<avg_pool3d_args>);

// Over the last three dims; every leading dim is a plane.
void adaptive_max_pool3d_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& xin = c.in(0);
  const int64_t r = xin.dim();
  PoolArgs p;
  p.adaptive = true;
  p.planes = 1;
  for (int64_t d = 0; d < r - 3; ++d) p.planes *= xin.sizes()[d];
  for (int j = 0; j < 3; ++j) p.in[j] = xin.sizes()[r - 3 + j], p.out[j] = outs[0].sizes()[r - 3 + j];
  DeviceGuard g(outs[0].device().index);
  Tensor x = dense_as(xin, xin.dtype());
  launch_max_pool(p, x.dtype(), cptr(x), mptr(outs[0]), static_cast<int64_t*>(mptr(outs[1])), stream_of(x));
}
KILN_REGISTER_KERNEL(adaptive_max_pool3d, CUDA, adaptive_max_pool3d_kernel);

// ---- im2col / col2im: the image is [N, C, H, W] (N = 1 unbatched); attrs from `first`:
// kernel_size, dilation, padding, stride, each one int or a pair (as the CPU's fold_params).
FoldArgs fold_args(const OpCall& c, size_t first, const Tensor& image, int64_t rows_or_c, bool cols_given) {
  auto pair = [&](size_t k) { return int_pair(c.name(), "argument", c.attrs.ints(first + k)); };
  auto k = pair(0), d = pair(1), pd = pair(2), st = pair(3);
  const int64_t r = image.dim();
  FoldArgs f{};
  f.N = r == 4 ? image.sizes()[0] : 1;
  f.H = image.sizes()[r - 2];
  f.W = image.sizes()[r - 1];
  f.kh = k[0], f.kw = k[1], f.dh = d[0], f.dw = d[1], f.ph = pd[0], f.pw = pd[1], f.sh = st[0], f.sw = st[1];
  f.C = cols_given ? rows_or_c / (k[0] * k[1]) : rows_or_c;
  f.oh = (f.H + 2 * f.ph - (f.dh * (f.kh - 1) + 1)) / f.sh + 1;
  f.ow = (f.W + 2 * f.pw - (f.dw * (f.kw - 1) + 1)) / f.sw + 1;
  return f;
}

void im2col_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& xin = c.in(0);
  FoldArgs f = fold_args(c, 0, xin, xin.sizes()[xin.dim() - 3], false);
  DeviceGuard g(outs[0].device().index);
  Tensor x = dense_as(xin, xin.dtype());
  launch_im2col(f, x.dtype(), cptr(x), mptr(outs[0]), stream_of(x));
}
KILN_REGISTER_KERNEL(im2col, CUDA, im2col_kernel);

void col2im_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& xin = c.in(0);
  FoldArgs f = fold_args(c, 1, outs[0], xin.sizes()[xin.dim() - 2], true);
  DeviceGuard g(outs[0].device().index);
  Tensor x = dense_as(xin, xin.dtype());
  launch_col2im(f, x.dtype(), cptr(x), mptr(outs[0]), stream_of(x));
}
KILN_REGISTER_KERNEL(col2im, CUDA, col2im_kernel);

// ---- searchsorted (sorted_sequence, values, sorter?; out_int32, right), as the CPU kernel ----
void searchsorted_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &seq = c.in(0), &values = c.in(1), &sorter = c.in(2);
  const Device dev = outs[0].device();
  DeviceGuard g(dev.index);
  Tensor both[] = {seq, values};
  const DType ct = result_type(both);
  auto on_dev = [&](const Tensor& t, DType dt) {
    if (!t.is_cpu()) return dense_as(t, dt);
    Tensor d = make_tensor(t.sizes(), dt, dev);
    get_backend(DeviceType::CUDA)->copy(d, t);
    return d;
  };
  Tensor sq = on_dev(seq, ct), vq = on_dev(values, ct);
  Tensor so = sorter.defined() ? on_dev(sorter, DType::Int64) : Tensor();
  const int64_t len = seq.dim() == 0 ? 1 : seq.sizes().back(), nv = values.numel();
  const int64_t vrow = values.dim() == 0 ? 1 : values.sizes().back();
  cudaStream_t s = stream_of(outs[0]);
  Tensor bad = make_tensor({2}, DType::Int64, dev);
  launch_fill(make_elementwise_args({&bad}), 0.0, 0, true, s);
  launch_searchsorted(ct, cptr(sq), cptr(vq), so.defined() ? static_cast<const int64_t*>(cptr(so)) : nullptr,
                      mptr(outs[0]), outs[0].dtype() == DType::Int32, c.attrs.b(1), len, nv, vrow, seq.dim() <= 1,
                      static_cast<int64_t*>(mptr(bad)), s);
  if (!so.defined()) return;
  if (stream_capturing(s)) {  // Note [Checks while capturing]
    launch_assert_flag(static_cast<const int64_t*>(cptr(bad)), 0,
                       std::string(c.name()) + ": a sorter index is out of range for boundaries whose last dim has size " +
                           std::to_string(len),
                       s);
    return;
  }
  int64_t host[2] = {0, 0};
  KILN_CUDA_CHECK(cudaMemcpyAsync(host, cptr(bad), sizeof host, cudaMemcpyDeviceToHost, s), "cudaMemcpyAsync");
  KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  KILN_CHECK(host[0] == 0, c.name(), ": sorter index ", host[1],
             " is out of range for boundaries whose last dim has size ", len);
}
KILN_REGISTER_KERNEL(searchsorted, CUDA, searchsorted_kernel);

// ---- scans: x as [outer, n, inner] in the output dtype ----
template <bool Sum>
void scan_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  if (out.numel() == 0) return;
  DeviceGuard g(out.device().index);
  Tensor x = dense_as(c.in(0), out.dtype());
  int64_t outer = 1, n = 1, inner = 1;
  if (x.dim() > 0) {
    int64_t d = wrap_dim(c.attrs.i(0), x.dim(), c.name());
    n = x.sizes()[d];
    for (int64_t i = 0; i < d; ++i) outer *= x.sizes()[i];
    for (int64_t i = d + 1; i < x.dim(); ++i) inner *= x.sizes()[i];
  }
  launch_scan(Sum, out.dtype(), cptr(x), mptr(out), outer, n, inner, stream_of(out));
}
KILN_REGISTER_KERNEL(cumsum, CUDA, scan_kernel<true>);
KILN_REGISTER_KERNEL(cumprod, CUDA, scan_kernel<false>);

}  // namespace
}  // namespace kiln::cuda
