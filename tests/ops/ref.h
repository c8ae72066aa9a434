// Independent float64 references for the op tests: a tiny dense array type
// with naive loops, sharing no code with kiln's kernels.
#pragma once
#include <cmath>
#include <functional>
#include <limits>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::test {

using Shape = std::vector<int64_t>;

struct Ref {
  Shape shape;
  std::vector<double> v;  // row-major

  Ref() = default;
  Ref(Shape s, double fill = 0.0);
  static Ref of(const Tensor& t);  // values converted to double (reads through kiln only to fetch data)
  int64_t numel() const { return static_cast<int64_t>(v.size()); }
  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  double& at(const Shape& idx);
  double at(const Shape& idx) const;
  // To a kiln tensor of dtype t (for comparing with kiln's output).
  Tensor to(DType t) const;
};

int64_t ref_numel(const Shape& s);
Shape unravel(int64_t flat, const Shape& shape);
int64_t ravel(const Shape& idx, const Shape& shape);
Shape ref_broadcast(const Shape& a, const Shape& b);
// Index into `shape` (broadcast to `out_shape`) from an index of `out_shape`.
int64_t broadcast_index(const Shape& out_idx, const Shape& shape);

Ref ref_map(const Ref& a, const std::function<double(double)>& f);
Ref ref_map2(const Ref& a, const Ref& b, const std::function<double(double, double)>& f);
Ref ref_map3(const Ref& a, const Ref& b, const Ref& c, const std::function<double(double, double, double)>& f);
// Reduces over `dims` (empty = all) with f(acc, x) starting from init.
Ref ref_reduce(const Ref& a, std::vector<int64_t> dims, bool keepdim, double init,
               const std::function<double(double, double)>& f);

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A 1-d tensor of n copies of v (built without the op under test).
inline Tensor filled(int64_t n, double v, DType t) {
  return kiln::tensor<double>(std::vector<double>(n, v), {n}, kFloat64).to(t);
}

// Deterministic test inputs. Values uniform in [lo, hi) (rounded for integer
// dtypes; bool: random true/false). With noncontig, the result is a strided
// view (a transposed or sliced buffer) holding the same values.
Tensor make_input(const Shape& shape, DType dtype, uint64_t seed, double lo = -2.0, double hi = 2.0,
                  bool noncontig = false);

}  // namespace kiln::test
