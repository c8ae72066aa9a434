// Indexing ops: public functions, meta functions and decompositions of
// gather/scatter, index/index_put, index_select/index_add, masks, one_hot and
// embedding. Sorting is in sort.cpp, VJP rules in grad_indexing.cpp, CPU
// kernels in backend/cpu/indexing*.cpp.
#include "ops/indexing.h"

#include <algorithm>

#include "dispatch/dispatch.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/nn.h"
#include "kiln/ops/pointwise.h"
#include "kiln/ops/shape.h"
#include "ops/meta_util.h"
#include "ops/nn_util.h"

namespace kiln {

void check_index_dtype(const Tensor& index, const char* op, const char* what) {
  KILN_CHECK(index.defined(), op, ": ", what, " is undefined");
  KILN_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, op, ": expected ", what,
             " to be an int64 or int32 tensor, got ", index.dtype(), " with shape ", shape_str(index.sizes()));
}

std::vector<int64_t> index_values(const Tensor& t) {
  std::vector<int64_t> out;
  if (!t.defined() || !t.has_storage() || !t.is_cpu() || current_record_layer() || t.numel() == 0) return out;
  KILN_CHECK(is_integral(t.dtype(), false), "internal: index_values of a ", t.dtype(), " tensor");
  const TensorImpl& impl = *t.unsafe_impl();
  out.reserve(static_cast<size_t>(t.numel()));
  int64_t nd = t.dim();
  std::vector<int64_t> pos(static_cast<size_t>(nd), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += pos[d] * impl.strides[d];
    const char* p = impl.data() + off * static_cast<int64_t>(itemsize(t.dtype()));
    switch (t.dtype()) {
      case DType::UInt8:
        out.push_back(*reinterpret_cast<const uint8_t*>(p));
        break;
      case DType::Int8:
        out.push_back(*reinterpret_cast<const int8_t*>(p));
        break;
      case DType::Int16:
        out.push_back(*reinterpret_cast<const int16_t*>(p));
        break;
      case DType::Int32:
        out.push_back(*reinterpret_cast<const int32_t*>(p));
        break;
      default:
        out.push_back(*reinterpret_cast<const int64_t*>(p));
        break;
    }
    for (int64_t d = nd - 1; d >= 0 && ++pos[d] == impl.sizes[d]; --d) pos[d] = 0;
  }
  return out;
}

std::vector<int64_t> checked_index_values(const Tensor& t) {
  // CPU only, as index_values: eagerly a device's tensor is not read (no sync), so nor is its tracer.
  if (!nn_detail::has_values_to_check(t) || !t.is_cpu()) return {};
  KILN_CHECK(is_integral(t.dtype(), false), "internal: checked_index_values of a ", t.dtype(), " tensor");
  return t.to_vector<int64_t>();  // a tracer's values: a graph break
}

void check_index_range(const Tensor& index, int64_t size, int64_t dim, const char* op) {
  for (int64_t v : index_values(index))
    KILN_CHECK(v >= 0 && v < size, op, ": index ", v, " is out of bounds for dimension ", dim, " with size ", size,
               v < 0 ? " (negative indices are not allowed here, as in torch)" : "");
}

namespace {
// While compiling, the values are not known yet: negative indices (which `index` would wrap)
// are sent out of range instead, so the compiled graph raises where eager does, not wraps.
Tensor no_wrap(const Tensor& index, int64_t size) {
  if (index.has_storage() && !current_record_layer()) return index;
  return where(lt(index, Scalar(int64_t{0})), Scalar(size), index);
}
}  // namespace

IndexPlan plan_index(IntArrayRef x_sizes, std::span<const Tensor> indices, const char* op) {
  int64_t nd = static_cast<int64_t>(x_sizes.size());
  KILN_CHECK(static_cast<int64_t>(indices.size()) <= nd, op, ": too many indices for tensor of dimension ", nd,
             " (got ", indices.size(), ")");
  IndexPlan p;
  for (size_t k = 0; k < indices.size(); ++k) {
    const Tensor& t = indices[k];
    if (!t.defined()) continue;
    KILN_CHECK(t.dtype() != kBool && t.dtype() != kUInt8, op,
               ": boolean mask indices must be turned into integer indices first (kiln::index does this)");
    check_index_dtype(t, op, "indices");
    p.bshape = broadcast_shapes(p.bshape, t.sizes(), op);
    p.dims.push_back(static_cast<int64_t>(k));
    p.indices.push_back(t);
  }
  bool adjacent = true;
  for (size_t k = 1; k < p.dims.size(); ++k) adjacent = adjacent && p.dims[k] == p.dims[k - 1] + 1;
  for (int64_t d = 0; d < nd; ++d) {
    if (std::find(p.dims.begin(), p.dims.end(), d) != p.dims.end()) continue;
    bool before = adjacent && (p.dims.empty() || d < p.dims[0]);
    (before ? p.pre : p.post).push_back(d);
  }
  for (int64_t d : p.pre) p.result.push_back(x_sizes[d]);
  p.result.insert(p.result.end(), p.bshape.begin(), p.bshape.end());
  for (int64_t d : p.post) p.result.push_back(x_sizes[d]);
  return p;
}

namespace {

int64_t nonempty_dim(const Tensor& t) { return std::max<int64_t>(t.dim(), 1); }
int64_t nonempty_size(const Tensor& t, int64_t d) { return t.dim() == 0 ? 1 : t.sizes()[d]; }

// torch's gather/scatter shape rules: same number of dims (0-d counts as 1-d),
// index no larger than self outside `dim` and no larger than src anywhere.
void check_scatter_gather(const Tensor& x, const Tensor& index, const Tensor& src, int64_t dim, const char* op) {
  check_index_dtype(index, op);
  if (src.defined() && index.numel() == 0) return;
  KILN_CHECK(nonempty_dim(x) == nonempty_dim(index), op,
             ": index tensor must have the same number of dimensions as the input tensor, got index ",
             shape_str(index.sizes()), " and input ", shape_str(x.sizes()));
  if (src.defined())
    KILN_CHECK(nonempty_dim(src) == nonempty_dim(index), op,
               ": index tensor must have the same number of dimensions as the src tensor, got index ",
               shape_str(index.sizes()), " and src ", shape_str(src.sizes()));
  for (int64_t d = 0; d < nonempty_dim(x); ++d) {
    int64_t n = nonempty_size(index, d);
    KILN_CHECK(d == dim || n <= nonempty_size(x, d), op, ": expected index ", shape_str(index.sizes()),
               " to be no larger than input ", shape_str(x.sizes()), " apart from dimension ", dim);
    if (src.defined())
      KILN_CHECK(n <= nonempty_size(src, d), op, ": expected index ", shape_str(index.sizes()),
                 " to be no larger than src ", shape_str(src.sizes()));
  }
}

// ---- meta ----
std::vector<TensorMeta> meta_gather(const OpCall& c) {
  const Tensor &x = c.in(0), &index = c.in(1);
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  check_scatter_gather(x, index, Tensor(), dim, c.name());
  return one_output(index.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(gather, meta_gather);

std::vector<TensorMeta> meta_scatter(const OpCall& c) {
  const Tensor &x = c.in(0), &index = c.in(1), &src = c.in(2);
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  KILN_CHECK(src.dtype() == x.dtype(), c.name(), ": expected self and src to have the same dtype, got ", x.dtype(),
             " and ", src.dtype());
  check_scatter_gather(x, index, src, dim, c.name());
  if (c.op == OpId::scatter_reduce) {
    const std::string& r = c.attrs.str(1);
    KILN_CHECK(r == "sum" || r == "prod" || r == "mean" || r == "amax" || r == "amin", c.name(),
               ": reduce argument must be one of sum, prod, mean, amax, amin, got '", r, "'");
    KILN_CHECK(r != "mean" || x.dtype() != kBool, c.name(), ": reduce 'mean' is not supported for dtype bool");
  }
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(scatter, meta_scatter);
KILN_REGISTER_META(scatter_add, meta_scatter);
KILN_REGISTER_META(scatter_reduce, meta_scatter);

void check_vector_index(const Tensor& index, const char* op) {
  check_index_dtype(index, op);
  KILN_CHECK(index.dim() <= 1, op, ": index is supposed to be a vector, got shape ", shape_str(index.sizes()));
}

std::vector<TensorMeta> meta_index_add(const OpCall& c) {
  const Tensor &x = c.in(0), &index = c.in(1), &src = c.in(2);
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  check_vector_index(index, c.name());
  KILN_CHECK(x.dtype() == src.dtype(), c.name(), ": self (", x.dtype(), ") and source (", src.dtype(),
             ") must have the same dtype");
  int64_t n = src.dim() == 0 ? 1 : src.sizes()[std::min<int64_t>(dim, src.dim() - 1)];
  KILN_CHECK(index.numel() == n, c.name(), ": number of indices (", index.numel(),
             ") should be equal to source.size(dim) (", n, ")");
  Shape xs = x.sizes().vec(), ss = src.sizes().vec();
  if (x.dim() > 0 && src.dim() > 0) {
    xs.erase(xs.begin() + dim);
    if (dim < src.dim()) ss.erase(ss.begin() + dim);
  }
  KILN_CHECK(xs == ss, c.name(), ": source shape must match self shape except at dimension ", dim, ", got self ",
             shape_str(x.sizes()), " and source ", shape_str(src.sizes()));
  const Scalar& alpha = c.attrs.s(1);
  KILN_CHECK(!(alpha.is_floating_point() && !is_floating_point(x.dtype())), c.name(),
             ": for integral input tensors, argument alpha must not be a floating point number");
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(index_add, meta_index_add);

std::vector<TensorMeta> meta_index(const OpCall& c) {
  const Tensor& x = c.in(0);
  IndexPlan p = plan_index(x.sizes(), c.inputs.subspan(1), c.name());
  return one_output(p.result, x.dtype(), x.device());
}
KILN_REGISTER_META(index, meta_index);

std::vector<TensorMeta> meta_index_put(const OpCall& c) {
  const Tensor &x = c.in(0), &values = c.in(1);
  IndexPlan p = plan_index(x.sizes(), c.inputs.subspan(2), c.name());
  KILN_CHECK(values.dtype() == x.dtype(), c.name(), ": index_put requires the source and destination dtypes to match, got ",
             x.dtype(), " for the destination and ", values.dtype(), " for the source");
  int64_t off = static_cast<int64_t>(p.result.size()) - values.dim();
  bool fits = off >= 0;
  for (int64_t d = 0; fits && d < values.dim(); ++d)
    fits = values.sizes()[d] == 1 || values.sizes()[d] == p.result[d + off];
  KILN_CHECK(fits, c.name(), ": shape mismatch: values of shape ", shape_str(values.sizes()),
             " cannot be broadcast to indexing result of shape ", shape_str(p.result));
  return one_output(x.sizes().vec(), x.dtype(), x.device());
}
KILN_REGISTER_META(index_put, meta_index_put);

std::vector<TensorMeta> meta_index_select(const OpCall& c) {
  const Tensor &x = c.in(0), &index = c.in(1);
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  check_vector_index(index, c.name());
  Shape s = x.sizes().vec();
  if (x.dim() == 0)
    KILN_CHECK(index.numel() == 1, c.name(), ": index_select() on a 0-d tensor needs exactly one index, got ",
               index.numel());
  else
    s[dim] = index.numel();
  return one_output(s, x.dtype(), x.device());
}
KILN_REGISTER_META(index_select, meta_index_select);

std::vector<TensorMeta> meta_masked_fill(const OpCall& c) {
  const Tensor &x = c.in(0), &mask = c.in(1), &value = c.in(2);
  KILN_CHECK(mask.dtype() == kBool, c.name(), ": only boolean masks are supported, got mask with dtype ", mask.dtype());
  KILN_CHECK(value.dim() == 0, c.name(), ": only a 0-dimensional value tensor is supported, got one of shape ",
             shape_str(value.sizes()));
  return one_output(broadcast_shapes(x.sizes(), mask.sizes(), c.name()), x.dtype(), x.device());
}
KILN_REGISTER_META(masked_fill, meta_masked_fill);

std::vector<TensorMeta> meta_one_hot(const OpCall& c) {
  const Tensor& x = c.in(0);
  KILN_CHECK(x.dtype() == kInt64, c.name(), ": expected an int64 index tensor, got ", x.dtype());
  int64_t n = c.attrs.i(0);
  KILN_CHECK(n >= 0, c.name(), ": num_classes must be non-negative (or -1 to infer it), got ", n);
  Shape s = x.sizes().vec();
  s.push_back(n);
  return one_output(s, kInt64, x.device());
}
KILN_REGISTER_META(one_hot, meta_one_hot);

std::vector<TensorMeta> meta_embedding(const OpCall& c) {
  const Tensor &w = c.in(0), &idx = c.in(1);
  KILN_CHECK(w.dim() == 2, c.name(), ": expected weight to be 2-D [num_embeddings, embedding_dim], got shape ",
             shape_str(w.sizes()));
  check_index_dtype(idx, c.name(), "indices");
  int64_t p = c.attrs.i(0);
  KILN_CHECK(p < w.sizes()[0], c.name(), ": padding_idx (", p, ") must be within num_embeddings (", w.sizes()[0], ")");
  Shape s = idx.sizes().vec();
  s.push_back(w.sizes()[1]);
  return one_output(s, w.dtype(), w.device());
}
KILN_REGISTER_META(embedding, meta_embedding);

// ---- decompositions ----
std::vector<Tensor> decomp_index_select(const OpCall& c) {
  meta_index_select(c);
  const Tensor &x = c.in(0), &index = c.in(1);
  int64_t dim = wrap_dim(c.attrs.i(0), x.dim(), c.name());
  check_index_range(index, x.dim() == 0 ? 1 : x.sizes()[dim], dim, c.name());  // no wrapping, unlike x[idx]
  Tensor idx = no_wrap(index.dim() == 0 ? index.unsqueeze(0) : index, x.dim() == 0 ? 1 : x.sizes()[dim]);
  if (x.dim() == 0) return {kiln::index(x.unsqueeze(0), {idx}).squeeze(0)};
  std::vector<Tensor> in{x};
  in.resize(static_cast<size_t>(wrap_dim(c.attrs.i(0), x.dim(), c.name())) + 1);  // ':' before dim
  in.push_back(idx);
  return {call_op1(OpId::index, std::move(in))};
}
KILN_REGISTER_DECOMP(index_select, decomp_index_select);

std::vector<Tensor> decomp_masked_fill(const OpCall& c) {
  meta_masked_fill(c);
  const Tensor &x = c.in(0), &mask = c.in(1), &value = c.in(2);
  return {where(mask, value.to(x.dtype()), x)};
}
KILN_REGISTER_DECOMP(masked_fill, decomp_masked_fill);

// The kernel's class range check, for a device without the kernel (Note [Value checks]): the
// comparison with arange below would give a row of zeros for a class outside [0, num_classes).
std::vector<Tensor> decomp_one_hot(const OpCall& c) {
  meta_one_hot(c);
  if (nn_detail::has_values_to_check(c.in(0))) {
    const int64_t nc = c.attrs.i(0);
    for (int64_t v : c.in(0).to_vector<int64_t>()) {
      KILN_CHECK(v >= 0, c.name(), ": class values must be non-negative, got ", v);
      KILN_CHECK(v < nc, c.name(), ": class values must be smaller than num_classes (", nc, "), got ", v);
    }
  }
  Tensor classes = arange(c.attrs.i(0), TensorOptions(kInt64).device(c.in(0).device()));
  return {eq(c.in(0).unsqueeze(-1), classes).to(kInt64)};
}
KILN_REGISTER_DECOMP(one_hot, decomp_one_hot);

std::vector<Tensor> decomp_embedding(const OpCall& c) {
  meta_embedding(c);
  check_index_range(c.in(1), c.in(0).sizes()[0], 0, c.name());  // no wrapping, unlike x[idx]
  return {call_op1(OpId::index, {c.in(0), no_wrap(c.in(1), c.in(0).sizes()[0])})};
}
KILN_REGISTER_DECOMP(embedding, decomp_embedding);

// Turns boolean masks into the integer index tensors of their true elements
// (as torch does before indexing): a k-d mask becomes k index tensors.
std::vector<Tensor> expand_masks(const Tensor& x, const std::vector<Tensor>& indices, const char* op) {
  std::vector<Tensor> out;
  int64_t d = 0;
  for (const Tensor& t : indices) {
    if (!t.defined() || (t.dtype() != kBool && t.dtype() != kUInt8)) {
      out.push_back(t);
      ++d;
      continue;
    }
    KILN_CHECK(t.dim() > 0, op, ": not supported yet: a 0-d boolean index");
    KILN_CHECK(d + t.dim() <= x.dim(), op, ": too many indices for tensor of dimension ", x.dim());
    for (int64_t j = 0; j < t.dim(); ++j)
      KILN_CHECK(t.sizes()[j] == x.sizes()[d + j], op, ": the shape of the mask ", shape_str(t.sizes()), " at index ",
                 j, " does not match the shape of the indexed tensor ", shape_str(x.sizes()), " at index ", d + j);
    Tensor nz = nonzero(t);
    for (int64_t j = 0; j < t.dim(); ++j) out.push_back(nz.select(1, j));
    d += t.dim();
  }
  return out;
}

std::vector<Tensor> cat_inputs(std::vector<Tensor> head, const std::vector<Tensor>& tail) {
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}
}  // namespace

// ---- public functions ----
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  return call_op1(OpId::index_select, {x, index}, {dim});
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) { return call_op1(OpId::gather, {x, index}, {dim}); }
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op1(OpId::scatter, {x, index, src}, {dim});
}
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Scalar& value) {
  return call_op1(OpId::scatter, {x, index, full(index.sizes(), value, TensorOptions(x.dtype()).device(x.device()))},
                  {dim});
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op1(OpId::scatter_add, {x, index, src}, {dim});
}
Tensor scatter_reduce(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                      bool include_self) {
  return call_op1(OpId::scatter_reduce, {x, index, src}, {dim, reduce, include_self});
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  return call_op1(OpId::index_add, {x, index, source}, {dim, alpha});
}
Tensor index(const Tensor& x, const std::vector<Tensor>& indices) {
  return call_op1(OpId::index, cat_inputs({x}, expand_masks(x, indices, "index")));
}
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  return call_op1(OpId::index_put, cat_inputs({x, values}, expand_masks(x, indices, "index_put")), {accumulate});
}
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  return call_op_inplace(x, OpId::index_put, cat_inputs({x, values}, expand_masks(x, indices, "index_put_")),
                         {accumulate});
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Scalar& value) {
  if (x.defined()) check_scalar_fits(value, x.dtype(), "masked_fill");
  return call_op1(OpId::masked_fill, {x, mask, wrap_scalar(value)});
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  return call_op1(OpId::masked_fill, {x, mask, value});
}
Tensor masked_select(const Tensor& x, const Tensor& mask) { return call_op1(OpId::masked_select, {x, mask}); }
Tensor nonzero(const Tensor& x) { return call_op1(OpId::nonzero, {x}); }
std::vector<Tensor> where(const Tensor& cond) {
  // A 0-d condition behaves as a one-element 1-d one (torch.nonzero(as_tuple=True)).
  Tensor nz = nonzero(cond.dim() == 0 ? cond.unsqueeze(0) : cond);
  std::vector<Tensor> r;
  for (int64_t d = 0; d < nz.sizes()[1]; ++d) r.push_back(nz.select(1, d));
  return r;
}
Tensor one_hot(const Tensor& x, int64_t num_classes) {
  KILN_CHECK(x.dtype() == kInt64, "one_hot: expected an int64 index tensor, got ", x.dtype());
  if (num_classes == -1) {
    // Data-dependent: the class count is read from the values (a graph break when tracing).
    KILN_CHECK(x.numel() > 0, "one_hot: can not infer the total number of classes from an empty tensor");
    auto v = x.to_vector<int64_t>();
    num_classes = *std::max_element(v.begin(), v.end()) + 1;
  }
  return call_op1(OpId::one_hot, {x}, {num_classes});
}
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  return call_op1(OpId::embedding, {weight, indices}, {padding_idx});
}

// ---- Tensor methods ----
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const { return kiln::index_select(*this, dim, index); }
Tensor Tensor::gather(int64_t dim, const Tensor& index) const { return kiln::gather(*this, dim, index); }
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Scalar& value) const {
  return kiln::scatter(*this, dim, index, value);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return kiln::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) const {
  return kiln::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::masked_fill(const Tensor& mask, const Scalar& value) const { return kiln::masked_fill(*this, mask, value); }
Tensor Tensor::masked_fill(const Tensor& mask, const Tensor& value) const { return kiln::masked_fill(*this, mask, value); }
Tensor& Tensor::masked_fill_(const Tensor& mask, const Scalar& value) {
  if (defined()) check_scalar_fits(value, dtype(), "masked_fill_");
  return call_op_inplace(*this, OpId::masked_fill, {*this, mask, wrap_scalar(value)});
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op_inplace(*this, OpId::scatter, {*this, index, src}, {dim});
}
Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Scalar& value) {
  if (defined()) check_scalar_fits(value, dtype(), "scatter_");
  return call_op_inplace(*this, OpId::scatter, {*this, index, full(index.sizes(), value, TensorOptions(dtype()).device(device()))},
                         {dim});
}
Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) {
  return call_op_inplace(*this, OpId::scatter_add, {*this, index, src}, {dim});
}
Tensor& Tensor::scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                                bool include_self) {
  return call_op_inplace(*this, OpId::scatter_reduce, {*this, index, src}, {dim, reduce, include_self});
}
Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& source, const Scalar& alpha) {
  return call_op_inplace(*this, OpId::index_add, {*this, index, source}, {dim, alpha});
}
Tensor Tensor::masked_select(const Tensor& mask) const { return kiln::masked_select(*this, mask); }
Tensor Tensor::nonzero() const { return kiln::nonzero(*this); }

}  // namespace kiln

// ---- take, masked_scatter ----
namespace kiln {
namespace {
std::vector<TensorMeta> meta_take(const OpCall& c) {
  const Tensor &x = c.in(0), &index = c.in(1);
  KILN_CHECK(x.defined() && index.defined(), "take: expected defined input and index tensors");
  KILN_CHECK(index.dtype() == kInt64, "take: Expected a long tensor for index, but got ", index.dtype(),
             " (index shape ", shape_str(index.sizes()), ")");
  KILN_CHECK(x.numel() > 0 || index.numel() == 0, "take: tried to take from an empty tensor ",
             shape_str(x.sizes()), " with a non-empty index ", shape_str(index.sizes()));
  return one_output(index.sizes().vec(), x.dtype(), x.device());
}
// index_select of the flattened input at the indices wrapped into [0, numel); eagerly each index is
// checked against [-numel, numel) first, with take's name.
std::vector<Tensor> decomp_take(const OpCall& c) {
  meta_take(c);
  const Tensor &x = c.in(0), &index = c.in(1);
  const int64_t n = x.numel();
  for (int64_t v : index_values(index))
    KILN_CHECK(v >= -n && v < n, "take: out of range: tried to access index ", v, " on a tensor of ", n,
               " elements (shape ", shape_str(x.sizes()), ")");
  Tensor flat_index = reshape(index, {-1});
  flat_index = where(lt(flat_index, Scalar(int64_t{0})), flat_index + Scalar(n), flat_index);
  return {index_select(reshape(x, {-1}), 0, flat_index).reshape(index.sizes().vec())};
}

std::vector<TensorMeta> meta_masked_scatter(const OpCall& c) {
  const Tensor &x = c.in(0), &mask = c.in(1), &source = c.in(2);
  KILN_CHECK(x.defined() && mask.defined() && source.defined(), "masked_scatter: expected defined tensors");
  // PyTorch 2.x takes bool masks only (1.13 also took uint8 ones, deprecated).
  KILN_CHECK(mask.dtype() == kBool, "masked_scatter: expected a bool mask, got ", mask.dtype(), " (mask shape ",
             shape_str(mask.sizes()), ")");
  KILN_CHECK(source.dtype() == x.dtype(), "masked_scatter: expected self and source to have same dtypes but got ",
             x.dtype(), " and ", source.dtype());
  return one_output(broadcast_shapes(x.sizes(), mask.sizes(), "masked_scatter"), x.dtype(), x.device());
}
// Position k of the flattened mask takes source[cumsum(mask)[k] - 1] where it is true: a gather,
// so autograd sends source's gradient back to the elements used. Eagerly the number of true
// values is checked against source's size first.
std::vector<Tensor> decomp_masked_scatter(const OpCall& c) {
  const Shape shape = meta_masked_scatter(c)[0].sizes;
  const Tensor &x = c.in(0), &mask = c.in(1), &source = c.in(2);
  Tensor xb = x.sizes().vec() == shape ? x : x.expand(shape);
  Tensor mb = mask.sizes().vec() == shape ? mask : mask.expand(shape);
  if (mask.has_storage() && mask.is_cpu() && !current_record_layer() && mask.numel() > 0) {
    const int64_t ones = sum(mask).item<int64_t>();
    KILN_CHECK(ones <= source.numel(), "masked_scatter: expected source to have at least as many elements as ones in "
               "mask, got source ", shape_str(source.sizes()), " with ", source.numel(), " elements and ", ones,
               " ones in mask ", shape_str(mask.sizes()));
  }
  if (source.numel() == 0) return {where(mb, xb, xb)};  // then no element of mask may be true
  Tensor m = reshape(mb, {-1});
  Tensor pos = cumsum(m, 0, kInt64) - Scalar(int64_t{1});
  Tensor taken = index_select(reshape(source, {-1}), 0, where(m, pos, Scalar(int64_t{0})));
  return {where(mb, taken.reshape(shape), xb)};
}
KILN_REGISTER_META(take, meta_take);
KILN_REGISTER_META(masked_scatter, meta_masked_scatter);
KILN_REGISTER_DECOMP(take, decomp_take);
KILN_REGISTER_DECOMP(masked_scatter, decomp_masked_scatter);
}  // namespace

Tensor take(const Tensor& x, const Tensor& index) { return call_op1(OpId::take, {x, index}); }
Tensor masked_scatter(const Tensor& x, const Tensor& mask, const Tensor& source) {
  return call_op1(OpId::masked_scatter, {x, mask, source});
}
Tensor& Tensor::masked_scatter_(const Tensor& mask, const Tensor& source) {
  return call_op_inplace(*this, OpId::masked_scatter, {*this, mask, source});
}
}  // namespace kiln
