// Shared pieces of the reduction op samples (samples_reduction*.cpp): fp64
// slice references over Ref (naive loops), the dim-list cases, sample builders.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/ops/op_samples.h"

namespace kiln::test::reduction {
using Ints = std::vector<int64_t>;

inline const std::vector<DType> kAll = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8,
                                        kInt16,   kInt32,   kInt64,   kUInt8,    kBool};
inline const std::vector<DType> kFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};

// Gathers the slices of `a` over `dims` (empty: all): one vector of values per
// output element, in the row-major order of the slice.
struct Slices {
  Shape out_shape;
  std::vector<std::vector<double>> vals;
};
inline Slices ref_slices(const Ref& a, Ints dims, bool keepdim) {
  int64_t nd = a.dim();
  std::vector<bool> red(nd, dims.empty());
  if (nd > 0)
    for (int64_t d : dims) red[d < 0 ? d + nd : d] = true;
  Shape kept;
  for (int64_t i = 0; i < nd; ++i) kept.push_back(red[i] ? 1 : a.shape[i]);
  Slices s;
  s.vals.resize(ref_numel(kept));
  for (int64_t i = 0; i < a.numel(); ++i) {
    Shape idx = unravel(i, a.shape);
    for (int64_t d = 0; d < nd; ++d)
      if (red[d]) idx[d] = 0;
    s.vals[ravel(idx, kept)].push_back(a.v[i]);
  }
  for (int64_t i = 0; i < nd; ++i)
    if (!red[i] || keepdim) s.out_shape.push_back(red[i] ? 1 : a.shape[i]);
  return s;
}
inline Ref ref_apply(const Ref& a, const Ints& dims, bool keepdim,
                     const std::function<double(const std::vector<double>&)>& f) {
  Slices s = ref_slices(a, dims, keepdim);
  Ref r(s.out_shape);
  for (size_t i = 0; i < s.vals.size(); ++i) r.v[i] = f(s.vals[i]);
  return r;
}

inline double r_sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
inline double r_prod(const std::vector<double>& v) {
  double s = 1;
  for (double x : v) s *= x;
  return s;
}
template <bool IsMax>
double r_ext(const std::vector<double>& v) {
  double b = IsMax ? -kInf : kInf;
  for (double x : v) {
    if (std::isnan(x)) return x;
    b = IsMax ? std::max(b, x) : std::min(b, x);
  }
  return b;
}
template <bool IsMax>
double r_arg(const std::vector<double>& v) {
  int64_t bi = 0;
  for (size_t i = 1; i < v.size(); ++i) {
    if (std::isnan(v[bi])) break;
    if (std::isnan(v[i]) || (IsMax ? v[i] > v[bi] : v[i] < v[bi])) bi = static_cast<int64_t>(i);
  }
  return static_cast<double>(bi);
}
inline double r_var(const std::vector<double>& v, double corr) {
  double m = r_sum(v) / static_cast<double>(v.size()), ss = 0;
  for (double x : v) ss += (x - m) * (x - m);
  return ss / std::max(0.0, static_cast<double>(v.size()) - corr);
}

struct Case {
  Shape shape;
  Ints dims;
  bool keepdim;
  int layout;  // 0 contiguous, 1 strided last dim, 2 transposed (dims 0 and 1 swapped)
  std::string tag;
};
inline std::vector<Case> dim_cases() {
  return {
      {{3, 4, 5}, {}, false, 0, "all"},
      {{3, 4, 5}, {1}, false, 0, "dim 1"},
      {{3, 4, 5}, {-1}, true, 0, "dim -1 keepdim"},
      {{3, 4, 5}, {0, 2}, false, 0, "dims 0,2"},
      {{3, 4, 5}, {0}, true, 0, "dim 0 keepdim"},
      {{3, 4, 5}, {2, -3}, true, 1, "dims 2,-3 strided keepdim"},
      {{4, 6}, {1}, false, 1, "dim 1 strided"},
      {{5, 6}, {0}, false, 2, "dim 0 transposed"},
      {{5, 6}, {1}, false, 2, "dim 1 transposed"},
      {{}, {}, false, 0, "0-d"},
      {{}, {0}, true, 0, "0-d dim 0"},
      {{2, 0, 3}, {1}, false, 0, "empty reduced dim"},
      {{0, 3}, {1}, true, 0, "empty kept dim"},
  };
}
// Larger inputs that reach the vectorized, row-accumulating and split loops.
inline std::vector<Case> big_cases() {
  return {
      {{3000}, {}, false, 0, "big full"},           {{7, 1000}, {1}, false, 0, "big inner"},
      {{1000, 67}, {0}, false, 0, "big outer"},     {{20000, 3}, {0}, false, 0, "big outer narrow (split)"},
      {{40, 30, 20}, {0, 2}, true, 0, "big mixed"}, {{300, 40}, {0}, false, 2, "big transposed"},
  };
}

inline std::string dname(DType t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

inline Tensor input_for(const Case& c, DType t, uint64_t seed, double lo = -2, double hi = 2) {
  if (c.layout == 2) {
    Shape s = c.shape;
    std::swap(s[0], s[1]);
    return make_input(s, t, seed, lo, hi).transpose(0, 1);
  }
  return make_input(c.shape, t, seed, lo, hi, c.layout == 1);
}

inline bool is_small_float(DType t) { return t == kFloat16 || t == kBFloat16; }
inline DType sum_type(DType t) { return is_floating_point(t) ? t : kInt64; }

// Samples of a dim-list reduction: fn(x, dims, keepdim), a slice reference and its output dtype.
using DimFn = std::function<Tensor(const Tensor&, const Ints&, bool)>;
inline std::vector<OpSample> dim_samples(const std::vector<DType>& dtypes, const DimFn& fn,
                                         const std::function<double(const std::vector<double>&)>& ref,
                                         const std::function<DType(DType)>& out_type, bool skip_empty, double lo = -2,
                                         double hi = 2, bool big = true) {
  std::vector<OpSample> out;
  uint64_t seed = 1;
  for (DType t : dtypes) {
    auto cases = dim_cases();
    if (big && (t == kFloat32 || t == kInt32)) {
      auto b = big_cases();
      cases.insert(cases.end(), b.begin(), b.end());
    }
    for (const Case& c : cases) {
      if (skip_empty && ref_numel(c.shape) == 0) continue;
      OpSample s;
      s.name = c.tag + " " + dname(t);
      s.inputs = {input_for(c, t, seed++, lo, hi)};
      Ints dims = c.dims;
      bool keepdim = c.keepdim;
      s.fn = [fn, dims, keepdim](const TensorList& in) { return TensorList{fn(in[0], dims, keepdim)}; };
      DType ot = out_type(t);
      s.reference = [ref, dims, keepdim, ot](const TensorList& in) {
        return TensorList{ref_apply(Ref::of(in[0]), dims, keepdim, ref).to(ot)};
      };
      if (is_small_float(t)) s.atol = 2e-2;
      if (t == kFloat32 && ref_numel(c.shape) > 200) s.atol = 1e-4;
      s.check_grad = t == kFloat32 && ref_numel(c.shape) <= 60;
      out.push_back(std::move(s));
    }
  }
  return out;
}

inline OpSample simple(std::string name, TensorList in, OpFn fn, OpFn ref, bool grad = true) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = std::move(in);
  s.fn = std::move(fn);
  s.reference = std::move(ref);
  s.check_grad = grad;
  return s;
}

inline Tensor vals(const std::vector<double>& v, Shape shape, DType t = kFloat32) {
  return kiln::tensor<double>(v, shape, kFloat64).to(t);
}

inline ErrorSample err(std::string name, std::function<void()> call, std::string expect) {
  return {std::move(name), std::move(call), std::move(expect)};
}
inline std::vector<ErrorSample> dim_errors(const std::function<void(const Tensor&, const Ints&)>& f, const char* op) {
  Tensor x = make_input({2, 3}, kFloat32, 1);
  return {err(
              "dim out of range", [=] { f(x, {2}); }, "out of range"),
          err(
              "negative dim out of range", [=] { f(x, {-3}); }, op),
          err(
              "repeated dim",
              [=] {
                f(x, {1, -1});
              },
              "multiple times")};
}

}  // namespace kiln::test::reduction
