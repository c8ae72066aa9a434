// Elementwise comparisons of compiled and eager results for the compile tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

}  // namespace kiln::testing
