// VJP rules of mm and bmm (matmul, addmm, baddbmm, linear and einsum are
// differentiated through their decompositions onto these).
#include "kiln/ops/nn.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "ops/grad_util.h"
#include "ops/save_rule.h"

namespace kiln {
namespace {

// d(a @ b): grad @ b^T and a^T @ grad. The transposes are views, which the
// GEMM kernel reads with transposition flags instead of copying.
// Note [Gradient in the operand's layout]
// A linear layer's weight enters mm transposed (a column-major [in, out] view of the [out, in]
// parameter). Its gradient a^T g is row-major [in, out]; as the weight's gradient (its transpose)
// that is a transposed view, which AccumulateGrad must copy to the parameter's layout, pass after
// pass. Computed as (g^T a)^T instead, as PyTorch's mm_mat2_backward does, the gradient has b's
// layout, and the weight's is contiguous: no copy, and AccumulateGrad can take the buffer. b's
// layout is the saved b's where it is saved (when a needs a gradient), else the strides its
// node recorded for a non-contiguous input (the first layer, whose input needs no gradient).
bool column_major(const VjpCall& v, size_t i) {
  const bool saved = v.inputs[i].defined();
  const TensorMeta& m = v.input_meta[i];
  const IntArrayRef sizes = saved ? v.inputs[i].sizes() : IntArrayRef(m.sizes);
  const IntArrayRef strides = saved ? v.inputs[i].strides() : IntArrayRef(m.strides);
  return sizes.size() == 2 && strides.size() == 2 && sizes[0] > 1 && sizes[1] > 1 && strides[0] == 1 &&
         strides[1] == sizes[0];
}

std::vector<Tensor> vjp_mm(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, mm(g, transpose(v.inputs[1], 0, 1)));
  if (v.needs(1)) {
    const Tensor& a = v.inputs[0];
    r[1] = column_major(v, 1) ? transpose(mm(transpose(g, 0, 1), a), 0, 1) : mm(transpose(a, 0, 1), g);
    r[1] = reduce_grad(v, 1, r[1]);
  }
  return r;
}
KILN_REGISTER_VJP(mm, vjp_mm);
// Note [Saving what the VJP reads]: each operand only for the other's gradient.
SaveSet save_other_factor(uint64_t needs, const Attrs&) {
  const uint64_t one = 1;
  return {((needs & (one << 1)) ? one : 0) | ((needs & one) ? one << 1 : 0), 0};
}
KILN_REGISTER_SAVE_RULE(mm, save_other_factor);

// _addmm_bias (Note [Bias epilogue]): the bias's gradient is the column sums of g.
std::vector<Tensor> vjp_addmm_bias(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(3);
  if (v.needs(0)) r[0] = sum(g, {0});
  if (v.needs(1)) r[1] = mm(g, transpose(v.inputs[2], 0, 1));
  if (v.needs(2)) {  // Note [Gradient in the operand's layout]
    const Tensor& a = v.inputs[1];
    r[2] = column_major(v, 2) ? transpose(mm(transpose(g, 0, 1), a), 0, 1) : mm(transpose(a, 0, 1), g);
  }
  return r;
}
KILN_REGISTER_VJP(_addmm_bias, vjp_addmm_bias);
// Each factor only for the other's gradient; the bias is never read.
SaveSet save_addmm_bias(uint64_t needs, const Attrs&) {
  const uint64_t one = 1;
  return {((needs & (one << 1)) ? one << 2 : 0) | ((needs & (one << 2)) ? one << 1 : 0), 0};
}
KILN_REGISTER_SAVE_RULE(_addmm_bias, save_addmm_bias);

std::vector<Tensor> vjp_bmm(const VjpCall& v) {
  const Tensor& g = v.grads[0];
  std::vector<Tensor> r(2);
  if (v.needs(0)) r[0] = reduce_grad(v, 0, bmm(g, transpose(v.inputs[1], 1, 2)));
  if (v.needs(1)) r[1] = reduce_grad(v, 1, bmm(transpose(v.inputs[0], 1, 2), g));
  return r;
}
KILN_REGISTER_VJP(bmm, vjp_bmm);
KILN_REGISTER_SAVE_RULE(bmm, save_other_factor);

}  // namespace
}  // namespace kiln
