// softmax, log_softmax and dropout: public functions, meta functions and
// decompositions. VJPs are in grad_nn.cpp, CPU kernels in backend/cpu/nn.cpp.
#include "core/philox.h"
#include "ops/nn_util.h"

namespace kiln {

using namespace nn_detail;

namespace {

// ---- softmax / log_softmax: (x; dim, dtype?) ----
DType softmax_out_dtype(const OpCall& c) {
  DType t = c.attrs.opt_dtype(1).value_or(c.in(0).dtype());
  KILN_CHECK(is_floating_point(t), c.name(), ": expected a floating dtype, got input of dtype ", t,
             " (pass dtype= to compute in floating point)");
  return t;
}

std::vector<TensorMeta> meta_softmax(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.defined(), c.name(), ": input is undefined");
  wrap_dim(c.attrs.i(0), x.dim(), c.name());
  return one_output(x.sizes().vec(), softmax_out_dtype(c), x.device());
}
KILN_REGISTER_META(softmax, meta_softmax);
KILN_REGISTER_META(log_softmax, meta_softmax);

// Numerically stable: shifts by the row max before exponentiating; computes
// Half/BFloat16 in float32 and rounds once at the end.
std::vector<Tensor> decomp_softmax(const OpCall& c) {
  const Tensor& x0 = c.in(0);
  DType out = softmax_out_dtype(c);
  int64_t d = wrap_dim(c.attrs.i(0), x0.dim(), c.name());
  Tensor x = x0.to(opmath(out));
  if (x.numel() == 0) return {x.to(out, true)};
  bool zero_d = x.dim() == 0;
  if (zero_d) x = reshape(x, {1});
  Tensor shifted = x - amax(x, {d}, true);
  Tensor r;
  if (c.op == OpId::softmax) {
    Tensor e = exp(shifted);
    r = e / sum(e, {d}, true);
  } else {
    r = shifted - log(sum(exp(shifted), {d}, true));
  }
  if (zero_d) r = reshape(r, {});
  return {r.to(out)};
}
KILN_REGISTER_DECOMP(softmax, decomp_softmax);
KILN_REGISTER_DECOMP(log_softmax, decomp_softmax);

// ---- _softmax_backward_data: (grad_out, output; dim, log) (Note [Fused norm and activation
// backward], grad_nn.cpp): grad_out and the forward's output of one floating dtype and shape ----
std::vector<TensorMeta> meta_softmax_backward_data(const OpCall& c) {
  const Tensor &g = c.in(0), &y = c.in(1);
  const char* op = c.name();
  KILN_CHECK(g.defined() && y.defined(), op, ": expected defined grad_out and output");
  KILN_CHECK(is_floating_point(y.dtype()), op, ": expected a floating output, got dtype ", y.dtype());
  KILN_CHECK(g.dtype() == y.dtype(), op, ": expected grad_out of dtype ", y.dtype(), " (output's), got ", g.dtype());
  KILN_CHECK(g.sizes() == y.sizes(), op, ": expected grad_out of shape ", shape_str(y.sizes()), " (output's), got ",
             shape_str(g.sizes()));
  wrap_dim(c.attrs.i(0), y.dim(), op);
  return one_output(y.sizes().vec(), y.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(_softmax_backward_data, meta_softmax_backward_data);

// ---- dropout: (x; p, train, seed, offset) ----
std::vector<TensorMeta> meta_dropout(const OpCall& c) {
  const Tensor& x = c.in(0);
  double p = c.attrs.f(0);
  KILN_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  KILN_CHECK(!c.attrs.b(1) || p == 0 || is_floating_point(x.dtype()),
             "dropout: expected a floating input in training mode, got dtype ", x.dtype());
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(dropout, meta_dropout);

// Note [Dropout mask]: element i is kept when the i-th float32 uniform of the
// Philox stream at (seed, offset) is < 1 - p (Note [Philox stream]); kept
// elements are scaled by 1 / (1 - p), as torch's bernoulli_(1 - p).div_(1 - p).
std::vector<Tensor> decomp_dropout(const OpCall& c) {
  const Tensor& x = c.in(0);
  meta_dropout(c);
  double p = c.attrs.f(0);
  if (!c.attrs.b(1) || p == 0 || x.numel() == 0) return {x.clone()};
  if (p == 1) return {x * zeros({}, TensorOptions(x.dtype()).device(x.device()))};
  Tensor u = call_op1(OpId::uniform, {},
                      {x.sizes().vec(), 0.0, 1.0, kFloat32, x.device(), c.attrs[2], c.attrs[3]});
  Tensor keep = lt(u, 1.0 - p).to(x.dtype());
  return {x * (keep / (1.0 - p))};
}
KILN_REGISTER_DECOMP(dropout, decomp_dropout);

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(OpId::softmax, {x}, {dim, opt_attr(dtype)});
}
Tensor log_softmax(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  return call_op1(OpId::log_softmax, {x}, {dim, opt_attr(dtype)});
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  KILN_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  // As torch: no randomness is consumed (and the input is returned) when nothing is dropped.
  if (!training || p == 0 || x.numel() == 0) return x;
  uint64_t seed = 0, offset = 0;
  if (p < 1) {
    Generator& g = gen ? *gen : default_generator(x.device());
    std::tie(seed, offset) = g.reserve(philox_blocks<float>(static_cast<uint64_t>(x.numel())));
  }
  return call_op1(OpId::dropout, {x}, {p, training, as_attr(seed), as_attr(offset)});
}

Tensor Tensor::softmax(int64_t dim) const { return kiln::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return kiln::log_softmax(*this, dim); }

}  // namespace kiln
