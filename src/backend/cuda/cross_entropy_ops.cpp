// Host side of the fused cross_entropy ops on CUDA (kernels in cross_entropy.cu, Note [Fused
// cross_entropy] in ops/loss_fused.cpp): operands made dense, class weights in the opmath dtype
// with their sum on the device, and each op's target check read back once (as gather's).
#include <vector>

#include "backend/cuda/cross_entropy.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/launch.h"
#include "dispatch/dispatch.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

void* ptr(const Tensor& t) { return t.defined() ? t.unsafe_impl()->data() : nullptr; }

struct Operands {
  Tensor x, target, weight, wsum;  // weight and wsum: opmath dtype, undefined without a weight
  int64_t n, c;
  Operands(const Tensor& input, const Tensor& tgt, const Tensor& w) {
    const DType cd = input.dtype() == DType::Float64 ? DType::Float64 : DType::Float32;
    x = dense_as(input, input.dtype());
    target = dense_as(tgt, DType::Int64);
    if (w.defined()) {
      weight = dense_as(w, cd);
      wsum = backend_call(OpId::sum, std::span<const Tensor>(&weight, 1),
                          Attrs{std::vector<int64_t>{}, false, std::monostate{}})[0];
    }
    n = x.sizes()[0];
    c = x.sizes()[1];
  }
};

// The (flag, target) pair the kernels set for a target that is neither a class index nor
// ignore_index, zeroed on the stream; check() reads it back once and throws the CPU's error.
struct BadTarget {
  Tensor bad;
  cudaStream_t s;
  BadTarget(Device dev, cudaStream_t stream) : bad(make_tensor({2}, DType::Int64, dev)), s(stream) {
    KILN_CUDA_CHECK(cudaMemsetAsync(ptr(bad), 0, 2 * sizeof(int64_t), s), "cudaMemsetAsync");
  }
  int64_t* data() const { return static_cast<int64_t*>(ptr(bad)); }
  void check(int64_t c, int64_t ignore) const {
    if (stream_capturing(s)) {  // Note [Checks while capturing]
      launch_assert_flag(data(), 0,
                         "cross_entropy: a target is out of bounds: expected class indices in [0, " + std::to_string(c) +
                             ") or ignore_index " + std::to_string(ignore),
                         s);
      return;
    }
    int64_t host[2] = {0, 0};
    KILN_CUDA_CHECK(cudaMemcpyAsync(host, ptr(bad), sizeof host, cudaMemcpyDeviceToHost, s),
                    "cudaMemcpyAsync (device to host)");
    KILN_CUDA_CHECK(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    KILN_CHECK(host[0] == 0, "cross_entropy: target ", host[1], " is out of bounds: expected class indices in [0, ", c,
               ") or ignore_index ", ignore);
  }
};

void fused_ce_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const int d = outs[0].device().index;
  DeviceGuard g(d);
  const Operands o(c.in(0), c.in(1), c.in(2));
  if (o.n == 0) return;
  cudaStream_t s = current_cuda_stream(d);
  const BadTarget bad(outs[0].device(), s);
  const int64_t ignore = c.attrs.i(0);
  launch_fused_cross_entropy(o.x.dtype(), ptr(o.x), static_cast<const int64_t*>(ptr(o.target)), ptr(o.weight),
                             ptr(o.wsum), o.n, o.c, ignore, c.attrs.f(1), ptr(outs[0]), ptr(outs[1]), ptr(outs[2]),
                             bad.data(), s);
  bad.check(o.c, ignore);
}
KILN_REGISTER_KERNEL(_fused_cross_entropy, CUDA, fused_ce_kernel);

void fused_ce_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const int d = outs[0].device().index;
  DeviceGuard g(d);
  const Operands o(c.in(1), c.in(2), c.in(3));
  if (o.n == 0) return;
  const DType t = o.x.dtype(), cd = t == DType::Float64 ? DType::Float64 : DType::Float32;
  const Tensor gl = dense_as(c.in(0), cd), lse = dense_as(c.in(4), cd);
  const Tensor glse = c.in(5).defined() ? dense_as(c.in(5), cd) : Tensor();
  cudaStream_t s = current_cuda_stream(d);
  const BadTarget bad(outs[0].device(), s);
  const int64_t ignore = c.attrs.i(0);
  launch_fused_cross_entropy_backward(t, ptr(gl), ptr(o.x), static_cast<const int64_t*>(ptr(o.target)), ptr(o.weight),
                                      ptr(o.wsum), ptr(lse), ptr(glse), o.n, o.c, ignore, c.attrs.f(1), ptr(outs[0]),
                                      bad.data(), s);
  bad.check(o.c, ignore);
}
KILN_REGISTER_KERNEL(_fused_cross_entropy_backward, CUDA, fused_ce_backward_kernel);

}  // namespace
}  // namespace kiln::cuda
