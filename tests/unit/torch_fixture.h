// Reading the PyTorch fixtures that tests/fixtures/fixture_writer.py writes: tensors
// "<case>.state.<key>", "<case>.in<i>", "<case>.out[<k>]", metadata "<case>.keys".
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kiln/kiln.h"

namespace kiln::testing {

// The case's state_dict keys in PyTorch's order (safetensors keeps keys sorted).
inline std::vector<std::string> torch_fixture_keys(const safetensors::SafeTensorsFile& file, const std::string& name) {
  std::vector<std::string> keys;
  std::string list = file.metadata().at(name + ".keys");
  for (size_t start = 0; start <= list.size();) {
    size_t comma = std::min(list.find(',', start), list.size());
    keys.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return keys;
}

// The case's state_dict, its keys without the "<case>.state." prefix.
inline StateDict torch_fixture_state(const StateDict& fixture, const std::string& name) {
  StateDict out;
  std::string prefix = name + ".state.";
  for (const auto& [k, t] : fixture)
    if (k.rfind(prefix, 0) == 0) out.insert(k.substr(prefix.size()), t);
  return out;
}

// kiln's answer against PyTorch's: same shape and dtype, equal values (NaN where NaN), floats
// within 1e-5 relative.
inline void expect_same_as_torch(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what << " shape";
  ASSERT_EQ(got.dtype(), want.dtype()) << what << " dtype";
  auto g = got.to_vector<double>(), w = want.to_vector<double>();
  bool fl = is_floating_point(want.dtype());
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
              (fl && std::abs(g[i] - w[i]) <= 1e-5 * (1 + std::abs(w[i])));
    EXPECT_TRUE(ok) << what << " element " << i << ": kiln " << g[i] << ", torch " << w[i];
  }
}

}  // namespace kiln::testing
