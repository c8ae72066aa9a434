// Linear algebra ops: mm/bmm (prims with GEMM kernels in backend/cpu/linalg.cpp),
// matmul/addmm/baddbmm/linear as decompositions onto them, outer and dot.
// einsum is in einsum.cpp; VJP rules in grad_linalg.cpp.
#include <functional>
#include <limits>

#include "dispatch/dispatch.h"
#include "kiln/linalg.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"

namespace kiln {

namespace {

void check_matmul_dtypes(const char* op, const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dtype() == b.dtype(), op, ": expected both operands to have the same dtype, but got ", a.dtype(),
             " and ", b.dtype());
  KILN_CHECK(a.dtype() != DType::Bool, op, ": not implemented for dtype bool");
}

// ---- mm / bmm ----
std::vector<TensorMeta> meta_mm(const OpCall& c) {
  const Tensor& a = c.in(0);
  const Tensor& b = c.in(1);
  KILN_CHECK(a.dim() == 2, "mm: expected mat1 to be a 2-D matrix, got shape ", shape_str(a.sizes()));
  KILN_CHECK(b.dim() == 2, "mm: expected mat2 to be a 2-D matrix, got shape ", shape_str(b.sizes()));
  KILN_CHECK(a.sizes()[1] == b.sizes()[0], "mm: mat1 and mat2 shapes cannot be multiplied (", a.sizes()[0], "x",
             a.sizes()[1], " and ", b.sizes()[0], "x", b.sizes()[1], ")");
  check_matmul_dtypes("mm", a, b);
  return one_output({a.sizes()[0], b.sizes()[1]}, a.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(mm, meta_mm);

std::vector<TensorMeta> meta_bmm(const OpCall& c) {
  const Tensor& a = c.in(0);
  const Tensor& b = c.in(1);
  KILN_CHECK(a.dim() == 3, "bmm: expected batch1 to be a 3-D tensor, got shape ", shape_str(a.sizes()));
  KILN_CHECK(b.dim() == 3, "bmm: expected batch2 to be a 3-D tensor, got shape ", shape_str(b.sizes()));
  KILN_CHECK(a.sizes()[0] == b.sizes()[0] && a.sizes()[2] == b.sizes()[1],
             "bmm: batch1 and batch2 shapes cannot be multiplied (", shape_str(a.sizes()), " and ",
             shape_str(b.sizes()), "): expected batch2 of shape [", a.sizes()[0], ", ", a.sizes()[2], ", *]");
  check_matmul_dtypes("bmm", a, b);
  return one_output({a.sizes()[0], a.sizes()[1], b.sizes()[2]}, a.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(bmm, meta_bmm);

// ---- matmul ----
Shape matmul_shape(const Tensor& a, const Tensor& b) {
  const int64_t da = a.dim(), db = b.dim();
  KILN_CHECK(da >= 1 && db >= 1, "matmul: both arguments need to be at least 1-D, but they are ", da, "-D and ", db,
             "-D");
  check_matmul_dtypes("matmul", a, b);
  const int64_t ka = a.sizes()[da - 1];
  const int64_t kb = db == 1 ? b.sizes()[0] : b.sizes()[db - 2];
  KILN_CHECK(ka == kb, "matmul: mat1 and mat2 shapes cannot be multiplied (", shape_str(a.sizes()), " and ",
             shape_str(b.sizes()), ")");
  Shape ba = da > 2 ? Shape(a.sizes().begin(), a.sizes().end() - 2) : Shape{};
  Shape bb = db > 2 ? Shape(b.sizes().begin(), b.sizes().end() - 2) : Shape{};
  Shape out = broadcast_shapes(ba, bb, "matmul");
  if (da >= 2) out.push_back(a.sizes()[da - 2]);
  if (db >= 2) out.push_back(b.sizes()[db - 1]);
  return out;
}

std::vector<TensorMeta> meta_matmul(const OpCall& c) {
  return one_output(matmul_shape(c.in(0), c.in(1)), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(matmul, meta_matmul);

// Note [matmul folding]: as torch.matmul, an N-D @ 1-D/2-D product folds the
// batch dims into the rows of one mm; other batched cases expand the batch dims
// (a stride-0 view) and reshape to 3-D, which stays a view unless the expanded
// dims cannot merge; bmm reads stride-0 batches without copying.
Tensor matmul_impl(const Tensor& a, const Tensor& b) {
  Shape out_shape = matmul_shape(a, b);
  const int64_t da = a.dim(), db = b.dim();
  if (da <= 2 && db <= 2) {
    Tensor a2 = da == 1 ? unsqueeze(a, 0) : a;
    Tensor b2 = db == 1 ? unsqueeze(b, 1) : b;
    Tensor r = mm(a2, b2);
    return r.sizes() == IntArrayRef(out_shape) ? r : reshape(r, out_shape);
  }
  const int64_t K = a.sizes()[da - 1];
  if (da >= 3 && db <= 2) {
    int64_t rows = 1;
    for (int64_t d = 0; d < da - 1; ++d) rows *= a.sizes()[d];
    Tensor a2 = reshape(a, std::vector<int64_t>{rows, K});
    Tensor b2 = db == 1 ? unsqueeze(b, 1) : b;
    return reshape(mm(a2, b2), out_shape);
  }
  Tensor a3 = da == 1 ? unsqueeze(a, 0) : a;
  Tensor b3 = db == 1 ? unsqueeze(b, 1) : b;
  const int64_t M = a3.sizes()[a3.dim() - 2], N = b3.sizes()[b3.dim() - 1];
  Shape batch = broadcast_shapes(Shape(a3.sizes().begin(), a3.sizes().end() - 2),
                                 Shape(b3.sizes().begin(), b3.sizes().end() - 2), "matmul");
  int64_t B = 1;
  for (int64_t s : batch) B *= s;
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {M, K});
  eb.insert(eb.end(), {K, N});
  Tensor ax = reshape(expand(a3, ea), std::vector<int64_t>{B, M, K});
  Tensor bx = reshape(expand(b3, eb), std::vector<int64_t>{B, K, N});
  return reshape(bmm(ax, bx), out_shape);
}

std::vector<Tensor> decomp_matmul(const OpCall& c) { return {matmul_impl(c.in(0), c.in(1))}; }
KILN_REGISTER_DECOMP(matmul, decomp_matmul);

// ---- addmm / baddbmm: beta * self + alpha * (a @ b) ----
Shape check_addmm(const OpCall& c, bool batched) {
  const char* op = c.name();
  const Tensor& self = c.in(0);
  Shape prod = batched ? meta_bmm(OpCall{OpId::bmm, c.inputs.subspan(1), c.attrs})[0].sizes
                       : meta_mm(OpCall{OpId::mm, c.inputs.subspan(1), c.attrs})[0].sizes;
  KILN_CHECK(self.dtype() == c.in(1).dtype(), op, ": expected self and the matrices to have the same dtype, but got ",
             self.dtype(), " and ", c.in(1).dtype());
  Shape bs = broadcast_shapes(self.sizes(), prod, op);
  KILN_CHECK(bs == prod, op, ": self of shape ", shape_str(self.sizes()), " cannot be broadcast to the product shape ",
             shape_str(prod));
  const DType t = self.dtype();
  for (size_t k = 0; k < 2; ++k) {
    const Scalar& s = c.attrs.s(k);
    KILN_CHECK(!(s.is_floating_point() && !is_floating_point(t)), op, ": for integral input tensors, argument ",
               k == 0 ? "beta" : "alpha", " must not be a floating point number");
  }
  return prod;
}

std::vector<TensorMeta> meta_addmm(const OpCall& c) {
  return one_output(check_addmm(c, c.op == OpId::baddbmm), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(addmm, meta_addmm);
KILN_REGISTER_META(baddbmm, meta_addmm);

bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

std::vector<Tensor> decomp_addmm(const OpCall& c) {
  const bool batched = c.op == OpId::baddbmm;
  check_addmm(c, batched);
  if (is_half(c.in(0).dtype()) && !c.in(1).is_cuda()) {
    // Float16/BFloat16 on the CPU: accumulate and scale in float32, round once. (On CUDA the
    // GEMM takes half inputs on tensor cores and accumulates in float32 itself; the scaling and
    // the add below round once more, within the dtype's tolerance.)
    const DType t = c.in(0).dtype();
    Tensor r = call_op1(c.op, {to(c.in(0), kFloat32), to(c.in(1), kFloat32), to(c.in(2), kFloat32)}, c.attrs);
    return {to(r, t)};
  }
  const Scalar& beta = c.attrs.s(0);
  const Scalar& alpha = c.attrs.s(1);
  Tensor prod = batched ? bmm(c.in(1), c.in(2)) : mm(c.in(1), c.in(2));
  if (!(alpha == Scalar(1))) prod = mul(prod, alpha);
  // beta == 0 ignores self entirely (NaN in self does not propagate), as in torch.
  if (beta.to_double() == 0.0) return {prod};
  Tensor s = beta == Scalar(1) ? c.in(0) : mul(c.in(0), beta);
  return {add(prod, s)};
}
KILN_REGISTER_DECOMP(addmm, decomp_addmm);
KILN_REGISTER_DECOMP(baddbmm, decomp_addmm);

// ---- linear: x @ weight^T + bias ----
Shape check_linear(const OpCall& c) {
  const Tensor& x = c.in(0);
  const Tensor& w = c.in(1);
  const Tensor& bias = c.in(2);
  KILN_CHECK(w.dim() == 1 || w.dim() == 2, "linear: expected weight to be 1-D or 2-D, got shape ",
             shape_str(w.sizes()));
  KILN_CHECK(x.dim() >= 1, "linear: expected input to be at least 1-D, got a 0-D tensor");
  const int64_t in = w.sizes()[w.dim() - 1];
  KILN_CHECK(x.sizes()[x.dim() - 1] == in, "linear: input and weight shapes cannot be multiplied (input ",
             shape_str(x.sizes()), ", weight ", shape_str(w.sizes()), "): expected input's last dim to be ", in);
  check_matmul_dtypes("linear", x, w);
  Shape out(x.sizes().begin(), x.sizes().end() - 1);
  if (w.dim() == 2) out.push_back(w.sizes()[0]);
  if (bias.defined()) {
    const int64_t n_out = out.empty() ? 1 : out.back();
    KILN_CHECK(bias.dim() == 0 || (bias.dim() == 1 && (bias.sizes()[0] == n_out || bias.sizes()[0] == 1)),
               "linear: expected bias of shape [", n_out, "] (out_features), got shape ", shape_str(bias.sizes()));
    KILN_CHECK(bias.dtype() == x.dtype(), "linear: expected bias to have dtype ", x.dtype(), ", got ", bias.dtype());
    Shape bs = broadcast_shapes(out, bias.sizes(), "linear");
    KILN_CHECK(bs == out, "linear: bias of shape ", shape_str(bias.sizes()), " cannot be broadcast to the output shape ",
               shape_str(out));
  }
  return out;
}

std::vector<TensorMeta> meta_linear(const OpCall& c) {
  return one_output(check_linear(c), c.in(0).dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(linear, meta_linear);

// ---- _addmm_bias: a [m, k] @ b [k, n] + bias [n] ----
// Note [Bias epilogue]
// A linear layer's bias add is a pass over the whole output after the GEMM; cuBLASLt adds it in
// the GEMM's epilogue, while the output tile is still in registers. linear's decomposition
// routes 2-D weights with a bias of out_features to this op on devices that have its kernel
// (CUDA); elsewhere it decomposes back to mm and add. It has a VJP of its own (the bias
// gradient is the column sums of the output's), so eager autograd keeps it one node.
std::vector<TensorMeta> meta_addmm_bias(const OpCall& c) {
  const Tensor &bias = c.in(0), &a = c.in(1), &b = c.in(2);
  KILN_CHECK(a.dim() == 2 && b.dim() == 2 && bias.dim() == 1, "_addmm_bias: expected a [m, k], b [k, n] and bias [n], got shapes ",
             shape_str(a.sizes()), ", ", shape_str(b.sizes()), " and ", shape_str(bias.sizes()));
  KILN_CHECK(a.sizes()[1] == b.sizes()[0] && bias.sizes()[0] == b.sizes()[1],
             "_addmm_bias: expected a [m, k], b [k, n] and bias [n], got shapes ", shape_str(a.sizes()), ", ",
             shape_str(b.sizes()), " and ", shape_str(bias.sizes()));
  check_matmul_dtypes("_addmm_bias", a, b);
  check_matmul_dtypes("_addmm_bias", a, bias);
  KILN_CHECK(is_floating_point(a.dtype()), "_addmm_bias: expected floating operands, got ", a.dtype());
  return one_output({a.sizes()[0], b.sizes()[1]}, a.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(_addmm_bias, meta_addmm_bias);

std::vector<Tensor> decomp_addmm_bias(const OpCall& c) {
  meta_addmm_bias(c);
  return {add(mm(c.in(1), c.in(2)), c.in(0))};
}
KILN_REGISTER_DECOMP(_addmm_bias, decomp_addmm_bias);

// ---- _addmm_epilogue: act(a [m, k] @ b [k, n] + bias [n]) + residual [m, n] ----
// Note [GEMM epilogues]
// A linear layer followed by an activation (and a residual add) is a GEMM that writes its output,
// then a loop that reads it back to add the bias, apply the activation and add the residual.
// Inductor's epilogue pass (compile/lower/epilogue.cpp) rewrites that chain of prims into this one
// extern op, whose CPU kernel runs them in the GEMM's epilogue: oneDNN's matmul post-ops where kiln
// has oneDNN, else the GEMM by row blocks, each block's epilogue run while the block is in cache.
// Not PyTorch's _addmm_activation(self, mat1, mat2, beta, alpha, use_gelu): that one knows only relu
// and tanh-gelu, while kiln's nn.GELU defaults to the erf form and transformer blocks end in a
// residual add. Nothing but the pass records it; its decomposition is the chain it replaces.
const char* const kEpilogueActivations[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};

std::vector<TensorMeta> meta_addmm_epilogue(const OpCall& c) {
  const Tensor &bias = c.in(0), &a = c.in(1), &b = c.in(2), &res = c.in(3);
  const char* op = "_addmm_epilogue";
  KILN_CHECK(a.dim() == 2 && b.dim() == 2 && bias.dim() == 1 && a.sizes()[1] == b.sizes()[0] &&
                 bias.sizes()[0] == b.sizes()[1],
             op, ": expected a [m, k], b [k, n] and bias [n], got shapes ", shape_str(a.sizes()), ", ",
             shape_str(b.sizes()), " and ", shape_str(bias.sizes()));
  check_matmul_dtypes(op, a, b);
  check_matmul_dtypes(op, a, bias);
  KILN_CHECK(is_floating_point(a.dtype()), op, ": expected floating operands, got ", a.dtype());
  const Shape out{a.sizes()[0], b.sizes()[1]};
  if (res.defined()) {
    KILN_CHECK(res.sizes() == IntArrayRef(out), op, ": expected residual of the output's shape ", shape_str(out),
               ", got ", shape_str(res.sizes()));
    check_matmul_dtypes(op, a, res);
  }
  const std::string& act = c.attrs.str(0);
  bool known = false;
  for (const char* k : kEpilogueActivations) known = known || act == k;
  KILN_CHECK(known, op, ": expected activation \"none\", \"relu\", \"gelu\", \"gelu_tanh\" or \"silu\", got \"", act,
             "\"");
  return one_output(out, a.dtype(), output_device(c.inputs));
}
KILN_REGISTER_META(_addmm_epilogue, meta_addmm_epilogue);

std::vector<Tensor> decomp_addmm_epilogue(const OpCall& c) {
  meta_addmm_epilogue(c);
  Tensor r = add(mm(c.in(1), c.in(2)), c.in(0));
  const std::string& act = c.attrs.str(0);
  if (act == "relu") r = call_op1(OpId::relu, {r});
  else if (act == "gelu") r = call_op1(OpId::gelu, {r}, {std::string("none")});
  else if (act == "gelu_tanh") r = call_op1(OpId::gelu, {r}, {std::string("tanh")});
  else if (act == "silu") r = call_op1(OpId::silu, {r});
  return {c.in(3).defined() ? add(r, c.in(3)) : r};
}
KILN_REGISTER_DECOMP(_addmm_epilogue, decomp_addmm_epilogue);

// linear with a 2-D weight and a bias of out_features, on a device with _addmm_bias's kernel.
bool bias_epilogue(const OpCall& c) {
  const Tensor &x = c.in(0), &w = c.in(1), &bias = c.in(2);
  if (!bias.defined() || bias.dim() != 1 || w.dim() != 2 || x.dim() < 2 || bias.sizes()[0] != w.sizes()[0]) return false;
  if (!is_floating_point(x.dtype()) || x.device() != w.device() || x.device() != bias.device()) return false;
  return op_info(OpId::_addmm_bias).kernels[static_cast<int>(x.device().type)] != nullptr;
}

// The weight is used through its transposed view: the mm kernel passes it to
// GEMM with trans_b instead of copying it.
std::vector<Tensor> decomp_linear(const OpCall& c) {
  check_linear(c);
  const Tensor& w = c.in(1);
  if (bias_epilogue(c)) {
    const Tensor& x = c.in(0);
    Shape out(x.sizes().begin(), x.sizes().end() - 1);
    out.push_back(w.sizes()[0]);
    Tensor r = call_op1(OpId::_addmm_bias, {c.in(2), reshape(x, {-1, x.sizes().back()}), transpose(w, 0, 1)});
    return {reshape(r, out)};
  }
  if (is_half(w.dtype()) && c.in(2).defined() && !w.is_cuda()) {
    // Float16/BFloat16 with bias on the CPU: add the bias before rounding, as torch's addmm does.
    // (On CUDA the matmul stays in half precision on tensor cores, accumulating in float32, and
    // the bias add rounds once more: upcasting would run the GEMM at float32 speed.)
    Tensor r = linear(to(c.in(0), kFloat32), to(w, kFloat32), to(c.in(2), kFloat32));
    return {to(r, w.dtype())};
  }
  Tensor r = matmul(c.in(0), w.dim() == 2 ? transpose(w, 0, 1) : w);
  if (c.in(2).defined()) r = add(r, c.in(2));
  return {r};
}
KILN_REGISTER_DECOMP(linear, decomp_linear);

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) { return call_op1(OpId::mm, {a, b}); }
Tensor bmm(const Tensor& a, const Tensor& b) { return call_op1(OpId::bmm, {a, b}); }
Tensor matmul(const Tensor& a, const Tensor& b) { return call_op1(OpId::matmul, {a, b}); }
Tensor addmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return call_op1(OpId::addmm, {self, a, b}, {beta, alpha});
}
Tensor baddbmm(const Tensor& self, const Tensor& a, const Tensor& b, const Scalar& beta, const Scalar& alpha) {
  return call_op1(OpId::baddbmm, {self, a, b}, {beta, alpha});
}
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  return call_op1(OpId::linear, {x, weight, bias});
}

Tensor outer(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, "outer: expected two 1-D vectors, got shapes ", shape_str(a.sizes()),
             " and ", shape_str(b.sizes()));
  return mul(unsqueeze(a, 1), unsqueeze(b, 0));
}

Tensor dot(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, "dot: expected both tensors to be 1-D, but got ", a.dim(), "-D and ",
             b.dim(), "-D tensors");
  KILN_CHECK(a.sizes()[0] == b.sizes()[0], "dot: inconsistent tensor size, expected tensors of the same length, got ",
             a.sizes()[0], " and ", b.sizes()[0], " elements");
  KILN_CHECK(a.dtype() == b.dtype(), "dot: expected both vectors to have the same dtype, but found ", a.dtype(),
             " and ", b.dtype());
  return reshape(mm(unsqueeze(a, 0), unsqueeze(b, 1)), std::vector<int64_t>{});
}

// mv/addmv/addr/vdot: torch's checks, then mm/addmm/dot (the table's ops carry autograd).
Tensor mv(const Tensor& mat, const Tensor& vec) {
  KILN_CHECK(mat.dim() == 2 && vec.dim() == 1, "mv: vector + matrix @ vector expected, got 1, ", mat.dim(), ", ",
             vec.dim());
  KILN_CHECK(mat.sizes()[1] == vec.sizes()[0], "mv: size mismatch, got ", mat.sizes()[0], ", ", mat.sizes()[0], "x",
             mat.sizes()[1], ",", vec.sizes()[0]);
  return squeeze(mm(mat, unsqueeze(vec, 1)), 1);
}
Tensor addmv(const Tensor& self, const Tensor& mat, const Tensor& vec, const Scalar& beta, const Scalar& alpha) {
  KILN_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1, "addmv: vector + matrix @ vector expected, got ",
             self.dim(), ", ", mat.dim(), ", ", vec.dim());
  const int64_t n = mat.sizes()[0];
  KILN_CHECK(mat.sizes()[1] == vec.sizes()[0] && (self.dim() == 0 || self.sizes()[0] == n || self.sizes()[0] == 1),
             "addmv: size mismatch, got ", self.dim() == 0 ? 1 : self.sizes()[0], ", ", n, "x", mat.sizes()[1], ",",
             vec.sizes()[0]);
  Tensor s = self.dim() == 0 ? reshape(self, std::vector<int64_t>{1, 1}) : unsqueeze(self, 1);
  return squeeze(addmm(s, mat, unsqueeze(vec, 1), beta, alpha), 1);
}
Tensor addr(const Tensor& self, const Tensor& vec1, const Tensor& vec2, const Scalar& beta, const Scalar& alpha) {
  KILN_CHECK(vec1.dim() == 1 && vec2.dim() == 1, "addr: expected 1-D vectors, got ", vec1.dim(), "-D and ", vec2.dim(),
             "-D tensors");
  broadcast_shapes(self.sizes(), std::vector<int64_t>{vec1.sizes()[0], vec2.sizes()[0]}, "addr");
  return addmm(self, unsqueeze(vec1, 1), unsqueeze(vec2, 0), beta, alpha);
}
Tensor vdot(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.dim() == 1 && b.dim() == 1, "vdot: 1D tensors expected, but got ", a.dim(), "D and ", b.dim(),
             "D tensors");
  KILN_CHECK(a.sizes()[0] == b.sizes()[0], "vdot: inconsistent tensor size, expected tensor [", a.sizes()[0],
             "] and src [", b.sizes()[0], "] to have the same number of elements, but got ", a.sizes()[0], " and ",
             b.sizes()[0], " elements respectively");
  return dot(a, b);  // real dtypes only: vdot's conjugation is the identity
}

Tensor Tensor::matmul(const Tensor& o) const { return kiln::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return kiln::mm(*this, o); }


// ---- addbmm, chain_matmul, matrix_power, inverse ----
namespace {
std::vector<TensorMeta> meta_addbmm(const OpCall& c) {
  const Tensor &self = c.in(0), &b1 = c.in(1), &b2 = c.in(2);
  KILN_CHECK(self.defined() && b1.defined() && b2.defined(), "addbmm: expected defined tensors");
  KILN_CHECK(b1.dim() == 3, "addbmm: batch1 must be a 3D tensor, got shape ", shape_str(b1.sizes()));
  KILN_CHECK(b2.dim() == 3, "addbmm: batch2 must be a 3D tensor, got shape ", shape_str(b2.sizes()));
  KILN_CHECK(b1.sizes()[0] == b2.sizes()[0], "addbmm: batch1 and batch2 must have same number of batches, got ",
             shape_str(b1.sizes()), " and ", shape_str(b2.sizes()));
  KILN_CHECK(b1.sizes()[2] == b2.sizes()[1], "addbmm: Incompatible matrix sizes for bmm (", b1.sizes()[1], "x",
             b1.sizes()[2], " and ", b2.sizes()[1], "x", b2.sizes()[2], ")");
  KILN_CHECK(self.dtype() == b1.dtype() && b1.dtype() == b2.dtype(),
             "addbmm: expected self and the batches to have the same dtype, but got ", self.dtype(), ", ", b1.dtype(),
             " and ", b2.dtype());
  const Shape prod{b1.sizes()[1], b2.sizes()[2]};
  KILN_CHECK(broadcast_shapes(self.sizes(), prod, "addbmm") == prod, "addbmm: self of shape ", shape_str(self.sizes()),
             " cannot be broadcast to the product shape ", shape_str(prod));
  for (size_t k = 0; k < 2; ++k)
    KILN_CHECK(!(c.attrs.s(k).is_floating_point() && !is_floating_point(self.dtype())),
               "addbmm: for integral input tensors, argument ", k == 0 ? "beta" : "alpha",
               " must not be a floating point number");
  return one_output(prod, self.dtype(), output_device(c.inputs));
}
// The batch folds into the contraction: [n, B*k] @ [B*k, p] is the sum of the B products, as one
// addmm (which also gives torch's beta = 0 rule: self is then ignored, NaNs included).
std::vector<Tensor> decomp_addbmm(const OpCall& c) {
  meta_addbmm(c);
  const Tensor &b1 = c.in(1), &b2 = c.in(2);
  const int64_t B = b1.sizes()[0], n = b1.sizes()[1], k = b1.sizes()[2], p = b2.sizes()[2];
  Tensor a = reshape(permute(b1, {1, 0, 2}), std::vector<int64_t>{n, B * k});
  Tensor b = reshape(b2, std::vector<int64_t>{B * k, p});
  return {call_op1(OpId::addmm, {c.in(0), a, b}, {c.attrs.s(0), c.attrs.s(1)})};
}

std::vector<TensorMeta> meta_chain_matmul(const OpCall& c) {
  KILN_CHECK(!c.inputs.empty(), "chain_matmul: Expected one or more matrices");
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Tensor& m = c.in(i);
    KILN_CHECK(m.defined() && m.dim() == 2, "chain_matmul: expected 2-D matrices, but matrix ", i, " has shape ",
               m.defined() ? shape_str(m.sizes()) : std::string("(undefined)"));
    KILN_CHECK(m.dtype() == c.in(0).dtype(), "chain_matmul: all matrices must have the same dtype, but matrix 0 is ",
               c.in(0).dtype(), " and matrix ", i, " is ", m.dtype());
    if (i > 0)
      KILN_CHECK(c.in(i - 1).sizes()[1] == m.sizes()[0], "chain_matmul: matrices ", i - 1, " and ", i,
                 " with shapes ", shape_str(c.in(i - 1).sizes()), " and ", shape_str(m.sizes()),
                 " cannot be multiplied");
  }
  return one_output({c.in(0).sizes()[0], c.inputs.back().sizes()[1]}, c.in(0).dtype(), output_device(c.inputs));
}
// The matrix-chain order of least multiply-adds (torch's multi_dot), by dynamic programming.
std::vector<Tensor> decomp_chain_matmul(const OpCall& c) {
  meta_chain_matmul(c);
  const size_t n = c.inputs.size();
  // One matrix: a contiguous copy, as torch's clone(at::MemoryFormat::Contiguous).
  if (n == 1) return {c.in(0).is_contiguous() ? clone(c.in(0)) : contiguous(c.in(0))};
  std::vector<int64_t> dims{c.in(0).sizes()[0]};
  for (size_t i = 0; i < n; ++i) dims.push_back(c.in(i).sizes()[1]);
  std::vector<std::vector<int64_t>> cost(n, std::vector<int64_t>(n, 0));
  std::vector<std::vector<size_t>> split(n, std::vector<size_t>(n, 0));
  for (size_t len = 1; len < n; ++len)
    for (size_t i = 0; i + len < n; ++i) {
      const size_t j = i + len;
      cost[i][j] = std::numeric_limits<int64_t>::max();
      for (size_t k = i; k < j; ++k) {
        const int64_t q = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1];
        if (q < cost[i][j]) {
          cost[i][j] = q;
          split[i][j] = k;
        }
      }
    }
  std::function<Tensor(size_t, size_t)> product = [&](size_t i, size_t j) -> Tensor {
    if (i == j) return c.in(i);
    return mm(product(i, split[i][j]), product(split[i][j] + 1, j));
  };
  return {product(0, n - 1)};
}
KILN_REGISTER_META(addbmm, meta_addbmm);
KILN_REGISTER_META(chain_matmul, meta_chain_matmul);
KILN_REGISTER_DECOMP(addbmm, decomp_addbmm);
KILN_REGISTER_DECOMP(chain_matmul, decomp_chain_matmul);
}  // namespace

Tensor addbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, const Scalar& beta,
              const Scalar& alpha) {
  return call_op1(OpId::addbmm, {self, batch1, batch2}, {beta, alpha});
}
Tensor chain_matmul(const std::vector<Tensor>& matrices) { return call_op1(OpId::chain_matmul, matrices); }
Tensor inverse(const Tensor& A) { return linalg::inv(A); }
// torch.linalg.matrix_power (torch.matrix_power is its alias): not in the op table, since n < 0
// runs linalg::inv, which is LAPACK outside the op table; n >= 0 is matmuls by repeated squaring.
Tensor matrix_power(const Tensor& A, int64_t n) {
  KILN_CHECK(A.defined() && A.dim() >= 2, "linalg.matrix_power: The input tensor A must have at least 2 dimensions",
             A.defined() ? ", got shape " + shape_str(A.sizes()) : std::string());
  const int64_t m = A.sizes()[A.dim() - 2];
  KILN_CHECK(m == A.sizes()[A.dim() - 1], "linalg.matrix_power: A must be batches of square matrices, but they are ",
             m, " by ", A.sizes()[A.dim() - 1], " matrices");
  if (n == 0) return eye(m, m, TensorOptions(A.dtype()).device(A.device())).expand(A.sizes().vec()).contiguous();
  Tensor a = n < 0 ? linalg::inv(A) : A;
  uint64_t k = n < 0 ? static_cast<uint64_t>(-(n + 1)) + 1 : static_cast<uint64_t>(n);
  if (k == 1) return n < 0 ? a : a.clone();
  Tensor z, result;
  for (; k > 0; k /= 2) {
    z = z.defined() ? matmul(z, z) : a;
    if (k % 2 == 1) result = result.defined() ? matmul(result, z) : z;
  }
  return result;
}
Tensor Tensor::inverse() const { return linalg::inv(*this); }
Tensor Tensor::matrix_power(int64_t n) const { return kiln::matrix_power(*this, n); }

}  // namespace kiln
