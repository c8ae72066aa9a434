// Elementwise comparisons of compiled and eager results for the compile tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/tensor.h"

namespace kiln::testing {

// The largest |a - b| over all elements (shapes must agree).
inline double max_abs(const Tensor& a, const Tensor& b) {
  auto x = a.to_vector<double>(), y = b.to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}

// The accuracy rule's forward check (BENCHMARKS.md: fp32 1e-4, absolute and relative): no
// element of `got` is off.
inline void expect_forward_close(const Tensor& got, const Tensor& want, const std::string& what = "") {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) bad += !(std::abs(g[i] - w[i]) <= 1e-4 * (1 + std::abs(w[i])));
  EXPECT_EQ(bad, 0) << what;
}

// The accuracy rule's gradient check (BENCHMARKS.md: 1e-3 absolute and relative) over two lists
// of parameters, compiled and eager: both have a gradient or neither, and no element is off.
inline void expect_grads_close(const std::vector<Tensor>& compiled, const std::vector<Tensor>& eager,
                               const std::string& what = "") {
  ASSERT_EQ(compiled.size(), eager.size());
  for (size_t i = 0; i < compiled.size(); ++i) {
    ASSERT_EQ(compiled[i].grad().defined(), eager[i].grad().defined()) << "parameter " << i << what;
    if (!compiled[i].grad().defined()) continue;
    auto x = compiled[i].grad().to_vector<double>(), y = eager[i].grad().to_vector<double>();
    int bad = 0;
    for (size_t k = 0; k < x.size(); ++k) bad += !(std::abs(x[k] - y[k]) <= 1e-3 + 1e-3 * std::abs(y[k]));
    EXPECT_EQ(bad, 0) << "parameter " << i << what;
  }
}

}  // namespace kiln::testing
