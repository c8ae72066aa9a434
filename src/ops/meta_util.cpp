#include "ops/meta_util.h"

#include <cmath>
#include <limits>

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

namespace kiln {

// c10's checked_convert: a float fits a floating dtype when it is inf, NaN or
// within [lowest, max]; an integral dtype takes no inf or NaN, and an unsigned
// one takes a negative integer that wraps (uint8 -1 = 255, as PyTorch) but not
// a negative float. Bool takes anything.
bool scalar_fits(const Scalar& s, DType t) {
  if (t == DType::Bool) return true;
  if (is_floating_point(t)) {
    double d = s.to_double();
    if (std::isnan(d) || std::isinf(d)) return true;
    double max = t == DType::Float16    ? 65504.0
                 : t == DType::BFloat16 ? 3.3895313892515355e38
                 : t == DType::Float32  ? static_cast<double>(std::numeric_limits<float>::max())
                                        : std::numeric_limits<double>::max();
    return d >= -max && d <= max;
  }
  int64_t lo = 0, hi = 0;
  switch (t) {
    case DType::UInt8:
      lo = 0, hi = 255;
      break;
    case DType::Int8:
      lo = -128, hi = 127;
      break;
    case DType::Int16:
      lo = -32768, hi = 32767;
      break;
    case DType::Int32:
      lo = std::numeric_limits<int32_t>::min(), hi = std::numeric_limits<int32_t>::max();
      break;
    default:
      lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
      break;
  }
  if (s.is_floating_point()) {
    double d = s.to_double();
    if (std::isnan(d) || std::isinf(d)) return false;
    // 2^63 is the first double past int64's range ((double)INT64_MAX rounds up to it).
    if (t == DType::Int64) return d >= -9223372036854775808.0 && d < 9223372036854775808.0;
    return d >= static_cast<double>(lo) && d <= static_cast<double>(hi);
  }
  int64_t i = s.to_long();
  if (t == DType::UInt8) return i <= hi && i >= -hi;
  return i >= lo && i <= hi;
}

void check_scalar_fits(const Scalar& s, DType t, const char* op) {
  KILN_CHECK(scalar_fits(s, t), op, ": value ", s, " cannot be converted to type ", t, " without overflow");
}
void check_scalar_bound(const Scalar& s, DType t, const char* op) {
  const DType bound_type = t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t;
  KILN_CHECK(scalar_fits(s, bound_type), op, ": value ", s, " cannot be converted to type ", bound_type,
             " without overflow");
}

}  // namespace kiln
