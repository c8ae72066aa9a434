// Small helpers shared by the zoo's models (not part of kiln's public API).
#pragma once
#include <string>

#include "kiln/tensor.h"

namespace kiln::models::detail {

// "[2, 3, 4]", for error messages.
inline std::string sizes_str(const Tensor& t) {
  std::string out = "[";
  for (int64_t d = 0; d < t.dim(); ++d) out += (d ? ", " : "") + std::to_string(t.sizes()[d]);
  return out + "]";
}

}  // namespace kiln::models::detail
