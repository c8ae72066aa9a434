// Shared pieces of the nn op samples: fp64 row helpers over Ref (naive loops).
#pragma once
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "tests/ops/op_samples.h"

namespace kiln::test::nn {

inline const std::vector<DType> kFloatTypes = {kFloat32, kFloat64, DType::Float16, DType::BFloat16};

inline bool in_reduced(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

inline std::string dname(DType t) { return std::string(dtype_name(t)); }

// A unary op's sample against an elementwise fp64 reference; gradchecked when `grad`.
using UnaryFn = std::function<Tensor(const Tensor&)>;
using RefFn = std::function<double(double)>;
inline OpSample unary(std::string name, Tensor x, UnaryFn fn, RefFn ref, DType out, bool grad = true) {
  OpSample s;
  s.name = std::move(name);
  s.inputs = {std::move(x)};
  s.fn = [fn](const TensorList& in) { return TensorList{fn(in[0])}; };
  s.reference = [ref, out](const TensorList& in) { return TensorList{ref_map(Ref::of(in[0]), ref).to(out)}; };
  s.check_grad = grad;
  if (in_reduced(out)) s.atol = 2e-3;
  return s;
}

// Calls f(row) for every 1-D slice of `a` along dim d; f may rewrite the row in place.
template <class F>
void for_rows(Ref& a, int64_t d, const F& f) {
  if (a.dim() == 0) {
    std::vector<double> row{a.v[0]};
    f(row);
    a.v[0] = row[0];
    return;
  }
  int64_t n = a.shape[d], inner = 1, outer = 1;
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (i < d) outer *= a.shape[i];
    if (i > d) inner *= a.shape[i];
  }
  std::vector<double> row(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      for (int64_t i = 0; i < n; ++i) row[i] = a.v[(o * n + i) * inner + j];
      f(row);
      for (int64_t i = 0; i < n; ++i) a.v[(o * n + i) * inner + j] = row[i];
    }
}

inline void softmax_row(std::vector<double>& r, bool log) {
  double mx = -std::numeric_limits<double>::infinity();
  for (double v : r) mx = std::max(mx, v);
  double s = 0;
  for (double v : r) s += std::exp(v - mx);
  for (double& v : r) v = log ? v - mx - std::log(s) : std::exp(v - mx) / s;
}

inline Tensor scalar_f64(double v) { return Ref({}, v).to(kFloat64); }

}  // namespace kiln::test::nn
