// Host side of batch_norm on CUDA (kernels in batch_norm.cu): the decomposition's semantics
// (ops/nn_norm.cpp decomp_batch_norm) in three launches in training, two in evaluation. The
// op keeps its VJP, so autograd differentiates it as before; only the forward changes.
#include <vector>

#include "backend/cuda/batch_norm.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/launch.h"
#include "ops/registry.h"

namespace kiln::cuda {
namespace {

void* ptr(const Tensor& t) { return t.defined() ? t.unsafe_impl()->data() : nullptr; }

// (x, running_mean?, running_var?, weight?, bias?; training, momentum, eps): out has x's dtype
// (meta_batch_norm); statistics, weight and bias in its opmath dtype.
void batch_norm_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  Tensor& out = outs[0];
  // Empty input: an empty output, running statistics untouched (as the decomposition).
  if (out.numel() == 0) return;
  DeviceGuard g(out.device().index);
  cudaStream_t s = current_cuda_stream(out.device().index);
  const DType t = out.dtype();
  const DType cd = t == DType::Float64 ? DType::Float64 : DType::Float32;
  const bool training = c.attrs.b(0);
  const double momentum = c.attrs.f(1), eps = c.attrs.f(2);
  const Tensor x = dense_as(c.in(0), t);
  const int64_t n = x.sizes()[0], ch = x.sizes()[1], hw = x.numel() / (n * ch);
  const Device dev = out.device();
  Tensor mean = make_tensor({ch}, cd, dev), rstd = make_tensor({ch}, cd, dev);
  if (training) {
    // The running statistics are written in place without bumping their version, as the
    // decomposition's copy_into (see its comment): through opmath copies when they are not
    // already dense in it, copied back after.
    const Tensor &rm0 = c.in(1), &rv0 = c.in(2);
    Tensor rm = rm0.defined() ? dense_as(rm0, cd) : Tensor();
    Tensor rv = rv0.defined() ? dense_as(rv0, cd) : Tensor();
    const int64_t splits = batch_norm_splits(ch, n * hw);
    Tensor part = make_tensor({3 * ch * splits}, cd, dev);
    launch_batch_norm_stats(t, ptr(x), n, ch, hw, splits, eps, momentum, ptr(part), ptr(rm), ptr(rv), ptr(mean),
                            ptr(rstd), s);
    if (rm.defined() && rm.unsafe_impl() != rm0.unsafe_impl()) copy_same_device(rm0, rm);
    if (rv.defined() && rv.unsafe_impl() != rv0.unsafe_impl()) copy_same_device(rv0, rv);
  } else {
    Tensor rm = dense_as(c.in(1), cd), rv = dense_as(c.in(2), cd);
    launch_batch_norm_eval_stats(t, ptr(rm), ptr(rv), ch, eps, ptr(mean), ptr(rstd), s);
  }
  const Tensor w = c.in(3).defined() ? dense_as(c.in(3), cd) : Tensor();
  const Tensor b = c.in(4).defined() ? dense_as(c.in(4), cd) : Tensor();
  launch_batch_norm_apply(t, ptr(x), ptr(mean), ptr(rstd), ptr(w), ptr(b), ptr(out), n, ch, hw, s);
}
KILN_REGISTER_KERNEL(batch_norm, CUDA, batch_norm_kernel);

// (grad_out, x, weight?, running_mean?, running_var?; training, eps) -> (grad_x, grad_weight,
// grad_bias) (Note [Fused batch_norm backward]): grad_x of x's dtype, the others of its opmath.
void batch_norm_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& x0 = c.in(1);
  const int64_t n = x0.sizes()[0], ch = x0.sizes()[1];
  if (ch == 0) return;
  DeviceGuard g(outs[0].device().index);
  cudaStream_t s = current_cuda_stream(outs[0].device().index);
  const DType t = x0.dtype(), cd = outs[1].dtype();
  if (x0.numel() == 0) {  // no values: both sums are zero
    for (int k : {1, 2})
      KILN_CUDA_CHECK(cudaMemsetAsync(ptr(outs[k]), 0, static_cast<size_t>(ch) * itemsize(cd), s), "cudaMemsetAsync");
    return;
  }
  const bool training = c.attrs.b(0);
  const int64_t hw = x0.numel() / (n * ch);
  const Device dev = x0.device();
  const Tensor x = dense_as(x0, t), gy = dense_as(c.in(0), t);
  const Tensor w = c.in(2).defined() ? dense_as(c.in(2), cd) : Tensor();
  const Tensor rm = training ? Tensor() : dense_as(c.in(3), cd), rv = training ? Tensor() : dense_as(c.in(4), cd);
  const int64_t splits = batch_norm_splits(ch, n * hw);
  Tensor part = make_tensor({5 * ch * splits}, cd, dev), coef = make_tensor({4 * ch}, cd, dev);
  launch_batch_norm_backward(t, ptr(gy), ptr(x), ptr(w), ptr(rm), ptr(rv), training, c.attrs.f(1), n, ch, hw, splits,
                             ptr(part), ptr(coef), ptr(outs[0]), ptr(outs[1]), ptr(outs[2]), s);
}
KILN_REGISTER_KERNEL(_batch_norm_backward, CUDA, batch_norm_backward_kernel);

}  // namespace
}  // namespace kiln::cuda
