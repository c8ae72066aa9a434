#include "tests/ops/ref.h"

#include <random>

namespace kiln::test {

int64_t ref_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t x : s) n *= x;
  return n;
}

Ref::Ref(Shape s, double fill) : shape(std::move(s)), v(static_cast<size_t>(ref_numel(shape)), fill) {}

Ref Ref::of(const Tensor& t) {
  Ref r;
  r.shape = t.sizes().vec();
  r.v = t.to_vector<double>();
  return r;
}

Shape unravel(int64_t flat, const Shape& shape) {
  Shape idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = shape[i] ? flat % shape[i] : 0;
    flat = shape[i] ? flat / shape[i] : 0;
  }
  return idx;
}

int64_t ravel(const Shape& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + idx[i];
  return flat;
}

double& Ref::at(const Shape& idx) { return v[ravel(idx, shape)]; }
double Ref::at(const Shape& idx) const { return v[ravel(idx, shape)]; }

Tensor Ref::to(DType t) const { return kiln::tensor<double>(v, shape, kFloat64).to(t); }

Shape ref_broadcast(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}

int64_t broadcast_index(const Shape& out_idx, const Shape& shape) {
  size_t off = out_idx.size() - shape.size();
  int64_t flat = 0;
  for (size_t i = 0; i < shape.size(); ++i) flat = flat * shape[i] + (shape[i] == 1 ? 0 : out_idx[i + off]);
  return flat;
}

Ref ref_map(const Ref& a, const std::function<double(double)>& f) {
  Ref r(a.shape);
  for (int64_t i = 0; i < a.numel(); ++i) r.v[i] = f(a.v[i]);
  return r;
}

Ref ref_map2(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
  Ref r(ref_broadcast(a.shape, b.shape));
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape idx = unravel(i, r.shape);
    r.v[i] = f(a.v[broadcast_index(idx, a.shape)], b.v[broadcast_index(idx, b.shape)]);
  }
  return r;
}

Ref ref_map3(const Ref& a, const Ref& b, const Ref& c, const std::function<double(double, double, double)>& f) {
  Ref r(ref_broadcast(ref_broadcast(a.shape, b.shape), c.shape));
  for (int64_t i = 0; i < r.numel(); ++i) {
    Shape idx = unravel(i, r.shape);
    r.v[i] = f(a.v[broadcast_index(idx, a.shape)], b.v[broadcast_index(idx, b.shape)],
               c.v[broadcast_index(idx, c.shape)]);
  }
  return r;
}

Ref ref_reduce(const Ref& a, std::vector<int64_t> dims, bool keepdim, double init,
               const std::function<double(double, double)>& f) {
  int64_t nd = a.dim();
  std::vector<bool> red(nd, dims.empty());
  for (int64_t d : dims) red[d < 0 ? d + nd : d] = true;
  Shape kept;
  for (int64_t i = 0; i < nd; ++i) kept.push_back(red[i] ? 1 : a.shape[i]);
  Ref acc(kept, init);
  for (int64_t i = 0; i < a.numel(); ++i) {
    Shape idx = unravel(i, a.shape);
    for (int64_t d = 0; d < nd; ++d)
      if (red[d]) idx[d] = 0;
    double& slot = acc.v[ravel(idx, kept)];
    slot = f(slot, a.v[i]);
  }
  if (!keepdim) {
    Shape s;
    for (int64_t i = 0; i < nd; ++i)
      if (!red[i]) s.push_back(a.shape[i]);
    acc.shape = s;
  }
  return acc;
}

Tensor make_input(const Shape& shape, DType dtype, uint64_t seed, double lo, double hi, bool noncontig) {
  std::mt19937_64 rng(seed * 7919 + 17);
  std::uniform_real_distribution<double> u(lo, hi);
  int64_t n = ref_numel(shape);
  std::vector<double> vals(static_cast<size_t>(n));
  for (auto& x : vals) {
    double r = u(rng);
    if (dtype == DType::Bool) x = r > (lo + hi) / 2 ? 1.0 : 0.0;
    else if (!is_floating_point(dtype)) x = std::round(r);
    else x = r;
  }
  if (!noncontig || shape.empty()) return kiln::tensor<double>(vals, shape, kFloat64).to(dtype);
  // Build a buffer whose last dim is doubled and take every other element:
  // same values, non-unit stride.
  Shape big = shape;
  big.back() *= 2;
  std::vector<double> buf(static_cast<size_t>(ref_numel(big)), -777.0);
  for (int64_t i = 0; i < n; ++i) {
    Shape idx = unravel(i, shape);
    idx.back() *= 2;
    buf[ravel(idx, big)] = vals[i];
  }
  Tensor t = kiln::tensor<double>(buf, big, kFloat64).to(dtype);
  return t.slice(-1, 0, std::nullopt, 2);
}

}  // namespace kiln::test
