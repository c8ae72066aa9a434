// Pieces of the activation ops shared by their meta functions, decompositions, VJPs and kernels.
#pragma once
#include <utility>

#include "ops/attrs.h"

namespace kiln {

// hardtanh's bounds for an input of dtype t: for integer inputs they are truncated to integers,
// so they never promote the result (torch's hardtanh_out: "boundaries not causing type promotion").
inline std::pair<Scalar, Scalar> hardtanh_bounds(DType t, const Attrs& attrs) {
  const Scalar &lo = attrs.s(0), &hi = attrs.s(1);
  if (is_floating_point(t)) return {lo, hi};
  return {Scalar(lo.to_long()), Scalar(hi.to_long())};
}

}  // namespace kiln
