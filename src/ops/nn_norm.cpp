// Normalisation ops: batch_norm, layer_norm, group_norm, rms_norm — public
// functions, meta functions and decompositions (VJPs in grad_nn.cpp).
#include <limits>

#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

void check_param(const Tensor& p, IntArrayRef expect, const char* op, const char* what) {
  if (!p.defined()) return;
  KILN_CHECK(is_floating_point(p.dtype()), op, ": expected ", what, " to have a floating dtype, got ", p.dtype());
  KILN_CHECK(p.sizes() == expect, op, ": expected ", what, " of shape ", shape_str(expect), ", got shape ",
             shape_str(p.sizes()));
}

// Result dtype: the input's (torch's fused kernels also take float weights with
// reduced-precision input); rms_norm, a composite in torch, promotes with its weight.
DType norm_dtype(const OpCall& c) {
  DType t = c.in(0).dtype();
  if (c.op == OpId::rms_norm && c.in(1).defined()) t = promote_types(t, c.in(1).dtype());
  return t;
}

// batch norm's input x (N, C, *), floating; returns C.
int64_t batch_norm_channels(const Tensor& x, const char* op) {
  KILN_CHECK(x.dim() >= 2, op, ": expected input of shape (N, C, *) with at least 2 dims, got shape ",
             shape_str(x.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), op, ": expected a floating input, got dtype ", x.dtype());
  return x.sizes()[1];
}

// Training normalises over each channel's values: a channel of one value has no variance.
void check_values_per_channel(const Tensor& x, int64_t C, const char* op) {
  if (x.numel() > 0)
    KILN_CHECK(x.numel() / C > 1, op, ": expected more than 1 value per channel when training, got input of shape ",
               shape_str(x.sizes()));
}

// ---- batch_norm: (x, running_mean?, running_var?, weight?, bias?; training, momentum, eps) ----
std::vector<TensorMeta> meta_batch_norm(const OpCall& c) {
  const Tensor& x = c.in(0);
  const char* op = c.name();
  const int64_t C = batch_norm_channels(x, op);
  Shape cs{C};
  check_param(c.in(1), cs, op, "running_mean");
  check_param(c.in(2), cs, op, "running_var");
  check_param(c.in(3), cs, op, "weight");
  check_param(c.in(4), cs, op, "bias");
  bool training = c.attrs.b(0);
  KILN_CHECK(c.in(1).defined() == c.in(2).defined(), op,
             ": running_mean and running_var must both be given or both be undefined");
  KILN_CHECK(training || c.in(1).defined(), op, ": running_mean and running_var must be defined in evaluation mode");
  if (training) check_values_per_channel(x, C, op);
  return one_output(x.sizes().vec(), norm_dtype(c), x.device());
}
KILN_REGISTER_META(batch_norm, meta_batch_norm);

// Note [Batch norm's training node]
// batch_norm in training is _batch_norm_training (the normalisation, and the batch statistics
// it used) plus the running-stat update written with ops. Its writes into the running statistics
// are why a recording decomposes batch_norm (kernel_writes_inputs, dispatch.cpp); the node below
// writes nothing, so a joint graph keeps it and differentiates it with its own VJP, the fused
// _batch_norm_backward (two passes over x and grad_out), where the derivative of its prims
// took about ten. Lowered for the compiler, its forward becomes prims and fuses with its
// neighbours, and the running update reads the statistics it computed, never a second pass.
// The statistics carry no gradient into batch_norm's output (they feed buffers, under no_grad),
// but a caller of this op may differentiate them: its VJP adds their terms when given.
std::vector<TensorMeta> meta_batch_norm_training(const OpCall& c) {
  const Tensor& x = c.in(0);
  const char* op = c.name();
  const int64_t C = batch_norm_channels(x, op);
  const Shape cs{C};
  check_param(c.in(1), cs, op, "weight");
  check_param(c.in(2), cs, op, "bias");
  check_values_per_channel(x, C, op);
  const DType ct = opmath(x.dtype());
  std::vector<TensorMeta> m = one_output(x.sizes().vec(), x.dtype(), x.device());
  m.push_back(one_output(cs, ct, x.device())[0]);
  m.push_back(one_output(cs, ct, x.device())[0]);
  return m;
}
KILN_REGISTER_META(_batch_norm_training, meta_batch_norm_training);

std::vector<int64_t> non_channel_dims(int64_t ndim) {
  std::vector<int64_t> d{0};
  for (int64_t i = 2; i < ndim; ++i) d.push_back(i);
  return d;
}

// Note [Shifted batch statistics]: one pass over x gives both statistics. Sums of x and x²
// would lose the variance to cancellation where the mean is large against the spread, so the
// sums are of x - k, k being each channel's first element (a view: an index in the fused
// kernel): var = E[(x-k)²] - E[x-k]², whose cancellation is bounded by how far k lies from the
// mean in standard deviations, not by the mean's size. The generated kernels accumulate float
// sums in double. A second pass (x - mean, then its square) cost a full read of x per batch
// norm; PyTorch's kernels use Welford's update, also one pass. The per-channel values are
// float64 (C of them), x - k is in x's (opmath) dtype.
struct ShiftedStats {
  Tensor k, xk;             // each channel's first element; x - k
  Tensor shift, mean, var;  // E[x - k], the mean, the biased variance: [1, C, 1, ...] float64
};
ShiftedStats shifted_stats(const Tensor& x, const std::vector<int64_t>& dims) {
  ShiftedStats st;
  st.k = x;
  for (int64_t d : dims) st.k = narrow(st.k, d, 0, 1);
  st.xk = x - st.k;
  const double count = static_cast<double>(x.numel() / x.sizes()[1]);
  st.shift = sum(st.xk, dims, true, kFloat64) / count;
  st.mean = st.k.to(kFloat64) + st.shift;
  st.var = clamp_min(sum(st.xk * st.xk, dims, true, kFloat64) / count - st.shift * st.shift, 0.0);
  return st;
}

std::vector<Tensor> decomp_batch_norm_training(const OpCall& c) {
  std::vector<TensorMeta> m = meta_batch_norm_training(c);
  const Tensor& x0 = c.in(0);
  const Tensor &w = c.in(1), &b = c.in(2);
  const int64_t nd = x0.dim(), C = x0.sizes()[1];
  const Shape cs = channel_shape(nd, C);
  const Tensor x = x0.to(opmath(x0.dtype()));
  const std::vector<int64_t> dims = non_channel_dims(nd);
  const ShiftedStats st = shifted_stats(x, dims);
  const Tensor mu = st.mean.to(x.dtype()), &var = st.var;
  Tensor y = (x - mu) * rsqrt(var + c.attrs.f(0)).to(x.dtype());
  if (w.defined()) y = y * reshape(w, cs);
  if (b.defined()) y = y + reshape(b, cs);
  return {y.to(m[0].dtype), reshape(mu, {C}), reshape(var.to(x.dtype()), {C})};
}
KILN_REGISTER_DECOMP(_batch_norm_training, decomp_batch_norm_training);

// Training: normalise with the batch statistics (biased variance) and update
// the running statistics in place with the unbiased variance, as torch.
std::vector<Tensor> decomp_batch_norm(const OpCall& c) {
  std::vector<TensorMeta> m = meta_batch_norm(c);
  const Tensor& x0 = c.in(0);
  Tensor rm = c.in(1), rv = c.in(2), w = c.in(3), b = c.in(4);
  bool training = c.attrs.b(0);
  double momentum = c.attrs.f(1), eps = c.attrs.f(2);
  int64_t nd = x0.dim(), C = x0.sizes()[1];
  if (training) {
    if (x0.numel() == 0) return {x0.to(m[0].dtype, true)};
    std::vector<Tensor> r = call_op(OpId::_batch_norm_training, {x0, w, b}, {eps});
    if (rm.defined()) {
      // The running statistics are buffers, written without bumping their version
      // (as torch's kernel does): the training VJP never reads them, so two
      // training forwards before one backward stay valid.
      NoGradGuard no_grad;
      double n = static_cast<double>(x0.numel() / C);
      Tensor mu_c = r[1].to(rm.dtype());
      Tensor var_c = (r[2] * (n / (n - 1))).to(rv.dtype());
      copy_into(rm, rm * (1.0 - momentum) + mu_c * momentum);
      copy_into(rv, rv * (1.0 - momentum) + var_c * momentum);
    }
    return {r[0].to(m[0].dtype)};
  }
  Shape cs = channel_shape(nd, C);
  DType ct = opmath(x0.dtype());
  Tensor x = x0.to(ct);
  Tensor y = (x - reshape(rm.to(ct), cs)) * rsqrt(reshape(rv.to(ct), cs) + eps);
  if (w.defined()) y = y * reshape(w, cs);
  if (b.defined()) y = y + reshape(b, cs);
  return {y.to(m[0].dtype)};
}
KILN_REGISTER_DECOMP(batch_norm, decomp_batch_norm);

// ---- _batch_norm_backward: (grad_out, x, weight?, running_mean?, running_var?; training, eps)
// -> (grad_x, grad_weight, grad_bias) (Note [Fused batch_norm backward], grad_nn.cpp) ----
std::vector<TensorMeta> meta_batch_norm_backward(const OpCall& c) {
  const Tensor &g = c.in(0), &x = c.in(1);
  const char* op = c.name();
  const int64_t C = batch_norm_channels(x, op);
  KILN_CHECK(g.sizes() == x.sizes(), op, ": expected grad_out of shape ", shape_str(x.sizes()), ", got ",
             shape_str(g.sizes()));
  KILN_CHECK(g.dtype() == x.dtype(), op, ": expected grad_out of dtype ", x.dtype(), ", got ", g.dtype());
  const Shape cs{C};
  check_param(c.in(2), cs, op, "weight");
  check_param(c.in(3), cs, op, "running_mean");
  check_param(c.in(4), cs, op, "running_var");
  const bool training = c.attrs.b(0);
  KILN_CHECK(training || (c.in(3).defined() && c.in(4).defined()), op,
             ": running_mean and running_var must be defined in evaluation mode");
  const Device d = output_device(c.inputs);
  const DType ct = opmath(x.dtype());
  std::vector<TensorMeta> out(3);
  out[0].sizes = x.sizes().vec();
  out[1].sizes = out[2].sizes = cs;
  out[0].dtype = x.dtype();
  out[1].dtype = out[2].dtype = ct;
  for (auto& m : out) m.device = d;
  return out;
}
KILN_REGISTER_META(_batch_norm_backward, meta_batch_norm_backward);

// Note [Batch norm backward decomposed]
// What a compiled CUDA graph runs in place of the fused kernel (the CPU keeps its kernel: Note
// [Kernels worth keeping] in dispatch.cpp): one pass of four per-channel sums
// over x and grad_out (the statistics shifted as in Note [Shifted batch statistics], and the
// sums of g and g·(x - k)), then grad_x in one pointwise pass. Lowered, both passes fuse with
// their neighbours (the ReLU's backward that makes grad_out, the residual add that takes
// grad_x), where the kernel was an extern call between generated loops that wrote and re-read
// grad_out. Per-channel arithmetic in double, per-element in opmath, as the kernels.
std::vector<Tensor> decomp_batch_norm_backward(const OpCall& c) {
  std::vector<TensorMeta> m = meta_batch_norm_backward(c);
  const Tensor &x0 = c.in(1), &w = c.in(2);
  const bool training = c.attrs.b(0);
  const double eps = c.attrs.f(1);
  const int64_t nd = x0.dim(), C = x0.sizes()[1];
  const TensorOptions copt = TensorOptions(m[1].dtype).device(x0.device());
  if (x0.numel() == 0) return {zeros(m[0].sizes, TensorOptions(m[0].dtype).device(x0.device())), zeros({C}, copt),
                               zeros({C}, copt)};
  const Shape cs = channel_shape(nd, C);
  const DType ct = opmath(x0.dtype());
  const Tensor x = x0.to(ct), g = c.in(0).to(ct);
  const std::vector<int64_t> dims = non_channel_dims(nd);
  const double count = static_cast<double>(x0.numel() / C);
  const Tensor w64 = w.defined() ? reshape(w, cs).to(kFloat64) : Tensor();
  Tensor sg, sgxhat, gx;
  if (training) {
    const ShiftedStats st = shifted_stats(x, dims);
    const Tensor& shift = st.shift;
    sg = sum(g, dims, true, kFloat64);
    const Tensor sgx = sum(g * st.xk, dims, true, kFloat64);
    const Tensor rstd = rsqrt(st.var + eps);
    sgxhat = (sgx - sg * shift) * rstd;  // Σ g · x̂
    const Tensor a = w64.defined() ? w64 * rstd : rstd;
    // grad_x = a · (g - Σg/M - x̂ · Σ(g·x̂)/M), x̂ = (x - mean) · rstd
    const Tensor mean = st.mean.to(ct);
    const Tensor b = (a * rstd * sgxhat / -count).to(ct), d0 = (a * sg / -count).to(ct);
    gx = g * a.to(ct) + (x - mean) * b + d0;
  } else {
    const Tensor rstd = rsqrt(reshape(c.in(4), cs).to(kFloat64) + eps);
    sg = sum(g, dims, true, kFloat64);
    sgxhat = sum(g * (x - reshape(c.in(3), cs).to(ct)), dims, true, kFloat64) * rstd;
    gx = g * (w64.defined() ? w64 * rstd : rstd).to(ct);
  }
  return {gx.to(m[0].dtype), reshape(sgxhat, {C}).to(m[1].dtype), reshape(sg, {C}).to(m[2].dtype)};
}
KILN_REGISTER_DECOMP(_batch_norm_backward, decomp_batch_norm_backward);

// ---- layer_norm: (x, weight?, bias?; normalized_shape, eps) ----
void check_normalized_shape(const Tensor& x, IntArrayRef ns, const char* op) {
  KILN_CHECK(!ns.empty(), op, ": normalized_shape must have at least one dim");
  int64_t k = static_cast<int64_t>(ns.size());
  bool ok = x.dim() >= k;
  for (int64_t i = 0; ok && i < k; ++i) ok = x.sizes()[x.dim() - k + i] == ns[i];
  KILN_CHECK(ok, op, ": given normalized_shape=", shape_str(ns), ", expected input with shape [*, ",
             shape_str(ns).substr(1), ", but got input of shape ", shape_str(x.sizes()));
}

std::vector<TensorMeta> meta_layer_norm(const OpCall& c) {
  const Tensor& x = c.in(0);
  const auto& ns = c.attrs.ints(0);
  KILN_CHECK(is_floating_point(x.dtype()), c.name(), ": expected a floating input, got dtype ", x.dtype());
  check_normalized_shape(x, ns, c.name());
  check_param(c.in(1), ns, c.name(), "weight");
  if (c.op == OpId::layer_norm) check_param(c.in(2), ns, c.name(), "bias");
  return one_output(x.sizes().vec(), norm_dtype(c), x.device());
}
KILN_REGISTER_META(layer_norm, meta_layer_norm);

// ---- _layer_norm_backward: (grad_out, x, weight?; normalized_shape, eps) -> (grad_x,
// grad_weight, grad_bias) (Note [Fused norm and activation backward], grad_nn.cpp) ----
std::vector<TensorMeta> meta_layer_norm_backward(const OpCall& c) {
  const Tensor &g = c.in(0), &x = c.in(1);
  const auto& ns = c.attrs.ints(0);
  const char* op = c.name();
  KILN_CHECK(g.defined() && x.defined(), op, ": expected defined grad_out and x");
  KILN_CHECK(is_floating_point(x.dtype()), op, ": expected a floating input, got dtype ", x.dtype());
  check_normalized_shape(x, ns, op);
  KILN_CHECK(g.sizes() == x.sizes(), op, ": expected grad_out of shape ", shape_str(x.sizes()), ", got ",
             shape_str(g.sizes()));
  KILN_CHECK(g.dtype() == x.dtype(), op, ": expected grad_out of dtype ", x.dtype(), ", got ", g.dtype());
  check_param(c.in(2), ns, op, "weight");
  const Device d = output_device(c.inputs);
  const DType ct = opmath(x.dtype());
  std::vector<TensorMeta> out(3);
  out[0].sizes = x.sizes().vec();
  out[1].sizes = out[2].sizes = Shape(ns.begin(), ns.end());
  out[0].dtype = x.dtype();
  out[1].dtype = out[2].dtype = ct;
  for (auto& m : out) m.device = d;
  return out;
}
KILN_REGISTER_META(_layer_norm_backward, meta_layer_norm_backward);

std::vector<Tensor> decomp_layer_norm(const OpCall& c) {
  std::vector<TensorMeta> m = meta_layer_norm(c);
  const Tensor& x0 = c.in(0);
  const Tensor &w = c.in(1), &b = c.in(2);
  int64_t k = static_cast<int64_t>(c.attrs.ints(0).size());
  Tensor x = x0.to(opmath(x0.dtype()));
  if (x.numel() == 0) return {x.to(m[0].dtype, true)};
  std::vector<int64_t> dims = last_dims(x.dim(), k);
  Tensor d = x - mean(x, dims, true);
  Tensor y = d * rsqrt(mean(d * d, dims, true) + c.attrs.f(1));
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return {y.to(m[0].dtype)};
}
KILN_REGISTER_DECOMP(layer_norm, decomp_layer_norm);

// ---- group_norm: (x, weight?, bias?; num_groups, eps) ----
std::vector<TensorMeta> meta_group_norm(const OpCall& c) {
  const Tensor& x = c.in(0);
  const char* op = c.name();
  KILN_CHECK(x.dim() >= 2, op, ": expected input of shape (N, C, *) with at least 2 dims, got shape ",
             shape_str(x.sizes()));
  KILN_CHECK(is_floating_point(x.dtype()), op, ": expected a floating input, got dtype ", x.dtype());
  int64_t C = x.sizes()[1], G = c.attrs.i(0);
  KILN_CHECK(G > 0 && C % G == 0, op, ": expected number of channels in input to be divisible by num_groups, but "
             "got input of shape ", shape_str(x.sizes()), " and num_groups=", G);
  check_param(c.in(1), Shape{C}, op, "weight");
  check_param(c.in(2), Shape{C}, op, "bias");
  return one_output(x.sizes().vec(), norm_dtype(c), x.device());
}
KILN_REGISTER_META(group_norm, meta_group_norm);

std::vector<Tensor> decomp_group_norm(const OpCall& c) {
  std::vector<TensorMeta> m = meta_group_norm(c);
  const Tensor& x0 = c.in(0);
  const Tensor &w = c.in(1), &b = c.in(2);
  int64_t N = x0.sizes()[0], C = x0.sizes()[1], G = c.attrs.i(0);
  Tensor x = x0.to(opmath(x0.dtype()));
  if (x.numel() == 0) return {x.to(m[0].dtype, true)};
  Tensor g = reshape(x, {N, G, x.numel() / (N * G)});
  Tensor d = g - mean(g, {2}, true);
  Tensor y = reshape(d * rsqrt(mean(d * d, {2}, true) + c.attrs.f(1)), x.sizes().vec());
  Shape cs = channel_shape(x.dim(), C);
  if (w.defined()) y = y * reshape(w, cs);
  if (b.defined()) y = y + reshape(b, cs);
  return {y.to(m[0].dtype)};
}
KILN_REGISTER_DECOMP(group_norm, decomp_group_norm);

// ---- rms_norm: (x, weight?; normalized_shape, eps?) ----
KILN_REGISTER_META(rms_norm, meta_layer_norm);

// As torch: computed in the opmath type; eps defaults to that type's machine epsilon.
std::vector<Tensor> decomp_rms_norm(const OpCall& c) {
  std::vector<TensorMeta> m = meta_layer_norm(c);
  const Tensor& x0 = c.in(0);
  const Tensor& w = c.in(1);
  int64_t k = static_cast<int64_t>(c.attrs.ints(0).size());
  DType ct = opmath(x0.dtype());
  double eps = c.attrs.opt_f(1).value_or(ct == kFloat64 ? std::numeric_limits<double>::epsilon()
                                                        : double(std::numeric_limits<float>::epsilon()));
  Tensor x = x0.to(ct);
  if (x.numel() == 0) return {x.to(m[0].dtype, true)};
  Tensor y = (x * rsqrt(mean(x * x, last_dims(x.dim(), k), true) + eps)).to(x0.dtype());
  if (w.defined()) y = y * w;
  return {y.to(m[0].dtype)};
}
KILN_REGISTER_DECOMP(rms_norm, decomp_rms_norm);

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  return call_op1(OpId::batch_norm, {x, running_mean, running_var, weight, bias}, {training, momentum, eps});
}
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  return call_op1(OpId::layer_norm, {x, weight, bias}, {normalized_shape.vec(), eps});
}
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias, double eps) {
  return call_op1(OpId::group_norm, {x, weight, bias}, {num_groups, eps});
}
Tensor rms_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight, std::optional<double> eps) {
  return call_op1(OpId::rms_norm, {x, weight}, {normalized_shape.vec(), opt_attr(eps)});
}

}  // namespace kiln
