#include "ops/meta_util.h"

namespace kiln {

Shape broadcast_shapes(IntArrayRef a, IntArrayRef b, const char* op) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK(x == y || x == 1 || y == 1, op, ": the size of tensor a (", x, ") must match the size of tensor b (",
               y, ") at non-singleton dimension ", i, "; shapes ", shape_str(a), " and ", shape_str(b));
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Shape broadcast_all(std::span<const Tensor> ts, const char* op) {
  Shape out;
  for (const Tensor& t : ts)
    if (t.defined()) out = broadcast_shapes(out, t.sizes(), op);
  return out;
}

namespace {
// Undefined is represented by nullopt.
std::optional<DType> promote_opt(std::optional<DType> a, DType b) { return a ? promote_types(*a, b) : b; }

// PyTorch's combine_categories: a lower-priority group only matters when it
// is of a higher category (bool < integral < floating) than the higher one.
std::optional<DType> combine(std::optional<DType> higher, std::optional<DType> lower) {
  if (!higher) return lower;
  if (!lower) return higher;
  if (is_floating_point(*higher)) return higher;
  if (*higher == DType::Bool || is_floating_point(*lower)) return promote_types(*higher, *lower);
  return higher;
}
}  // namespace

DType result_type(std::span<const Tensor> ts) {
  std::optional<DType> dim_result, zero_result, wrapped_result;
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    DType d = t.dtype();
    if (t.unsafe_impl()->is_wrapped_number) {
      // A wrapped float takes the default float dtype, not float64.
      if (is_floating_point(d)) d = default_dtype();
      wrapped_result = promote_opt(wrapped_result, d);
    } else if (t.dim() == 0) {
      zero_result = promote_opt(zero_result, d);
    } else {
      dim_result = promote_opt(dim_result, d);
    }
  }
  auto r = combine(dim_result, combine(zero_result, wrapped_result));
  return r ? *r : default_dtype();
}

Device output_device(std::span<const Tensor> ts) {
  for (const Tensor& t : ts)
    if (t.defined() && !(t.dim() == 0 && t.is_cpu())) return t.device();
  for (const Tensor& t : ts)
    if (t.defined()) return t.device();
  return kCPU;
}

std::vector<bool> dim_mask(IntArrayRef dims, int64_t ndim, const char* op) {
  std::vector<bool> mask(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, ndim, op);
    if (ndim == 0) continue;
    KILN_CHECK(!mask[w], op, ": dim ", w, " appears multiple times in the list of dims");
    mask[w] = true;
  }
  return mask;
}

Shape reduced_shape(IntArrayRef sizes, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!mask[i]) out.push_back(sizes[i]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

void check_floating(const Tensor& t, const char* op, const char* arg) {
  KILN_CHECK(t.defined(), op, ": ", arg, " is undefined");
  KILN_CHECK(is_floating_point(t.dtype()), op, ": expected ", arg, " to have a floating dtype, got ", t.dtype());
}

}  // namespace kiln
