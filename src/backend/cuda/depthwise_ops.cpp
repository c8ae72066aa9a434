// Depthwise convolutions on depthwise.cu's kernels instead of cuDNN (conv_cudnn.cpp asks here
// first, with or without cuDNN in the build), as PyTorch routes NCHW depthwise convolutions.
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/depthwise.h"
#include "backend/cuda/launch.h"
#include "dispatch/dispatch.h"
#include "ops/conv_util.h"

namespace kiln::cuda {
namespace {

// groups = in channels > 1 (PyTorch's test too: a single-channel input is an ordinary
// convolution to cuDNN), 1-d or 2-d, not transposed.
bool is_depthwise(const ConvShape& sh, DType t) {
  return is_floating_point(t) && !sh.transposed && sh.nd <= 2 && depthwise_groups(sh.groups, sh.C_in) &&
         sh.C_out % sh.groups == 0;
}

// A 1-d convolution is a 2-d one of height 1 (as conv_cudnn.cpp's unit trailing dim, but
// leading here: the kernels' inner loops run along W).
DepthwiseArgs depthwise_args(const ConvShape& sh) {
  DepthwiseArgs a{};
  a.N = sh.N, a.C = sh.C_in, a.mult = sh.C_out / sh.C_in;
  a.H = 1, a.kh = 1, a.sh = 1, a.ph = 0, a.dh = 1, a.oh = 1;
  if (sh.nd == 2)
    a.H = sh.in[0], a.kh = sh.k[0], a.sh = sh.stride[0], a.ph = sh.pad[0], a.dh = sh.dil[0], a.oh = sh.out[0];
  const int j = sh.nd - 1;
  a.W = sh.in[j], a.kw = sh.k[j], a.sw = sh.stride[j], a.pw = sh.pad[j], a.dw = sh.dil[j], a.ow = sh.out[j];
  return a;
}

const void* cptr(const Tensor& t) { return t.unsafe_impl()->data(); }
void* mptr(const Tensor& t) { return t.unsafe_impl()->data(); }

}  // namespace

bool depthwise_convolution(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  ConvShape sh = conv_shape(c.name(), c.in(0), c.in(1), c.in(2), c.attrs);
  if (!is_depthwise(sh, out.dtype())) return false;
  DeviceGuard g(out.device().index);
  Tensor x = dense_as(c.in(0), out.dtype()), w = dense_as(c.in(1), out.dtype());
  Tensor b = c.in(2).defined() ? dense_as(c.in(2), out.dtype()) : Tensor();
  launch_depthwise_forward(depthwise_args(sh), out.dtype(), cptr(x), cptr(w), b.defined() ? cptr(b) : nullptr,
                           mptr(out), current_cuda_stream(out.device().index));
  return true;
}

// Outputs not asked for by output_mask have shape [0] (meta_convolution_backward).
bool depthwise_convolution_backward(const OpCall& c, std::vector<Tensor>& outs) {
  ConvShape sh = conv_shape(c.name(), c.in(1), c.in(2), Tensor(), c.attrs);
  const DType t = c.in(1).dtype();
  if (!is_depthwise(sh, t)) return false;
  const auto& mask = c.attrs.ints(6);
  const int d = c.in(1).device().index;
  DeviceGuard g(d);
  const cudaStream_t s = current_cuda_stream(d);
  const DepthwiseArgs a = depthwise_args(sh);
  Tensor go = dense_as(c.in(0), t);
  if (mask[0]) {
    Tensor w = dense_as(c.in(2), t);
    launch_depthwise_backward_input(a, t, cptr(go), cptr(w), mptr(outs[0]), s);
  }
  if (mask[1]) {
    Tensor x = dense_as(c.in(1), t);
    launch_depthwise_backward_weight(a, t, cptr(go), cptr(x), mptr(outs[1]), s);
  }
  if (mask[2]) {
    // The sum over every dim but the channels (the CUDA reduction, deterministic).
    std::vector<int64_t> dims{0};
    for (int64_t k = 2; k < go.dim(); ++k) dims.push_back(k);
    Tensor gb = backend_call(OpId::sum, std::span<const Tensor>(&go, 1), Attrs{dims, false, std::monostate{}})[0];
    copy_same_device(outs[2], gb);
  }
  return true;
}

}  // namespace kiln::cuda
