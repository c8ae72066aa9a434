// Element conversion, shared by eager CPU kernels and generated code (the
// compiler's C++ preamble includes this header), so a cast computes alike in both.
#pragma once
#include <type_traits>

#include "core/half.h"

namespace kiln {

// Converts between element types the way a C cast (and torch's copy_) does,
// going through float for Half/BFloat16 and mapping non-zero to true for bool.
template <class To, class From>
inline To convert(From v) {
  constexpr bool from16 = std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>;
  constexpr bool to16 = std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>;
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (from16) return static_cast<float>(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (from16) return static_cast<To>(static_cast<float>(v));
  else if constexpr (to16) return To(static_cast<float>(v));
  else return static_cast<To>(v);
}

}  // namespace kiln
