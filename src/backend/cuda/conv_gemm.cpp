// 1x1 convolutions (stride 1, no padding, one group) as batched GEMMs on cuBLAS instead of cuDNN:
// conv_cudnn.cpp asks here after the depthwise kernels. On NCHW bfloat16, cuDNN's algorithms for
// them took ~1 ms for mobilenet_v2's 32 -> 192 channel expansions at 28x28 (a 0.6 GFLOP GEMM);
// with the channels of x [N, C, HW] as the GEMM's inner dim, no layout change is needed:
//   out[n] = w [K, C] @ x[n] [C, HW],   grad_x[n] = w^T @ g[n],   grad_w = sum_n g[n] @ x[n]^T.
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "dispatch/dispatch.h"
#include "kiln/cuda.h"
#include "ops/conv_util.h"

namespace kiln::cuda {
namespace {

bool is_gemm_conv(const ConvShape& sh, DType t) {
  if (!is_floating_point(t) || sh.transposed || sh.groups != 1) return false;
  for (int i = 0; i < sh.nd; ++i)
    if (sh.k[i] != 1 || sh.stride[i] != 1 || sh.pad[i] != 0) return false;
  return true;
}

// x [N, C, ...] dense as [N, C, P] (P: the spatial positions).
Tensor as_ncp(const Tensor& x) {
  const int64_t n = x.size(0), c = x.size(1), p = c == 0 || n == 0 ? 0 : x.numel() / (n * c);
  return make_view(x, {n, c, p}, {c * p, p, 1}, x.storage_offset());
}

// w [K, C, 1, ...] dense as [N, K, C] with a batch stride of 0 (or its transpose [N, C, K]).
Tensor weight_batch(const Tensor& w, int64_t n, bool transposed) {
  const int64_t k = w.size(0), c = w.size(1);
  if (!transposed) return make_view(w, {n, k, c}, {0, c, 1}, w.storage_offset());
  return make_view(w, {n, c, k}, {0, 1, c}, w.storage_offset());
}

bool tf32() { return backends::cudnn::allow_tf32(); }  // convolutions follow cuDNN's TF32 switch

void zero(const Tensor& t) {
  if (t.numel() == 0) return;
  KILN_CUDA_CHECK(cudaMemsetAsync(t.unsafe_impl()->data(), 0, t.nbytes(), current_cuda_stream(t.device().index)),
                  "cudaMemsetAsync");
}

}  // namespace

bool gemm_convolution(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  ConvShape sh = conv_shape(c.name(), c.in(0), c.in(1), c.in(2), c.attrs);
  if (!is_gemm_conv(sh, out.dtype())) return false;
  DeviceGuard g(out.device().index);
  const Tensor x = dense_as(c.in(0), out.dtype()), w = dense_as(c.in(1), out.dtype());
  const bool bias = c.in(2).defined();
  if (bias) {  // the bias first, for the GEMM to accumulate onto
    const Tensor b = dense_as(c.in(2), out.dtype());
    const Tensor ov = as_ncp(out);
    copy_same_device(ov, make_view(b, ov.sizes(), {0, 1, 0}, b.storage_offset()));
  }
  if (sh.C_in == 0) {  // an empty sum: the bias, or zeros
    if (!bias) zero(out);
    return true;
  }
  gemm_batched(weight_batch(w, sh.N, false), as_ncp(x), as_ncp(out), bias, tf32());
  return true;
}

// Outputs not asked for by output_mask have shape [0] (meta_convolution_backward).
bool gemm_convolution_backward(const OpCall& c, std::vector<Tensor>& outs) {
  ConvShape sh = conv_shape(c.name(), c.in(1), c.in(2), Tensor(), c.attrs);
  const DType t = c.in(1).dtype();
  if (!is_gemm_conv(sh, t)) return false;
  const auto& mask = c.attrs.ints(6);
  const Device dev = c.in(1).device();
  DeviceGuard g(dev.index);
  const Tensor go = dense_as(c.in(0), t), x = dense_as(c.in(1), t), w = dense_as(c.in(2), t);
  const bool empty = go.numel() == 0 || x.numel() == 0 || w.numel() == 0;
  if (mask[0] && outs[0].numel() > 0) {
    if (empty)
      zero(outs[0]);
    else
      gemm_batched(weight_batch(w, sh.N, true), as_ncp(go), as_ncp(outs[0]), false, tf32());
  }
  if (mask[1] && outs[1].numel() > 0) {
    // Per-image products summed over the batch, in float32 for half types (as cuDNN accumulates).
    const DType acc = t == DType::Float64 ? t : DType::Float32;
    const int64_t k = sh.C_out, cin = sh.C_in, n = sh.N;
    if (empty) {
      zero(outs[1]);
    } else {
      const Tensor xv = as_ncp(x), gv = as_ncp(go);
      const int64_t p = xv.size(2);
      // Two ways, the one with the smaller temporaries taken: per-image products [N, K, C] summed
      // over the batch (small where the channels are few and the images large), or g and x copied
      // to [K, N P] and [C, N P] for one GEMM over N P (small where the channels are many and the
      // images small, as the last layers of mobilenet_v2: 1280 x 320 channels at 7 x 7, where
      // the products were 3.3 times the copies and set the step's peak memory).
      const int64_t per_bytes = n * k * cin * static_cast<int64_t>(itemsize(acc));
      const int64_t copy_bytes = n * (k + cin) * p * static_cast<int64_t>(itemsize(t)) +
                                 (acc == t ? 0 : k * cin * static_cast<int64_t>(itemsize(acc)));
      Tensor gw;
      if (per_bytes <= copy_bytes) {
        const Tensor xt = make_view(xv, {n, p, cin}, {cin * p, 1, p}, xv.storage_offset());
        Tensor per = make_tensor({n, k, cin}, acc, dev);
        gemm_batched(gv, xt, per, false, tf32());
        gw = backend_call(OpId::sum, std::span<const Tensor>(&per, 1),
                          Attrs{std::vector<int64_t>{0}, false, std::monostate{}})[0];
      } else {
        Tensor gk = make_tensor({k, n, p}, t, dev), xc = make_tensor({cin, n, p}, t, dev);
        copy_same_device(gk, make_view(gv, {k, n, p}, {p, k * p, 1}, gv.storage_offset()));
        copy_same_device(xc, make_view(xv, {cin, n, p}, {p, cin * p, 1}, xv.storage_offset()));
        gw = make_tensor({1, k, cin}, acc, dev);
        gemm_batched(make_view(gk, {1, k, n * p}, {0, n * p, 1}, 0), make_view(xc, {1, n * p, cin}, {0, 1, n * p}, 0),
                     gw, false, tf32());
      }
      copy_same_device(outs[1], make_view(gw, outs[1].sizes(), outs[1].strides(), 0));
    }
  }
  if (mask[2] && outs[2].numel() > 0) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < go.dim(); ++d) dims.push_back(d);
    if (go.numel() == 0) {
      zero(outs[2]);
      return true;
    }
    Tensor gb = backend_call(OpId::sum, std::span<const Tensor>(&go, 1), Attrs{dims, false, std::monostate{}})[0];
    copy_same_device(outs[2], gb);
  }
  return true;
}

}  // namespace kiln::cuda
