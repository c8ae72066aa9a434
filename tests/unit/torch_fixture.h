// Reading the PyTorch fixtures that tests/fixtures/fixture_writer.py writes: tensors
// "<case>.state.<key>", "<case>.in<i>", "<case>.out[<k>]", metadata "<case>.keys".
#pragma once
#include <algorithm>
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

}  // namespace kiln::testing
