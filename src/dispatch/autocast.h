// Note [Autocast]
// kiln::autocast (include/kiln/autocast.h) is a layer at the top of the op call path, above the
// dispatch modes (so a compiled graph records its casts) and autograd (so a cast is
// differentiable and gradients come back in the inputs' dtype). For an op the table flags
// AUTOCAST_*, on a tensor of a device whose autocast is on, call_op casts the floating inputs
// (float64 ones stay, as torch's) and runs the op with autocast excluded, so the ops of its
// decomposition are not cast again; ops without a flag pass through and their decompositions'
// ops meet autocast themselves. AUTOCAST_FP32_DTYPE is the one policy on attrs: the op computes
// in float32 itself, so autocast sets its `dtype` attr (the result's dtype) to float32 and leaves
// the inputs as they are (cross_entropy: its fused kernel reads bf16 logits without a cast copy).
// In-place ops and backward passes are never autocast: backward runs each op in the dtype its
// forward chose.
#pragma once
#include <vector>

#include "ops/registry.h"

namespace kiln::detail {

// True while some device's autocast is on and not excluded: the one check the fast path pays.
extern thread_local bool tls_autocast_on;

// Casts `inputs` (or sets the dtype attr in `attrs`) for `op` by its table policy; false when
// nothing applies (no policy, or the op's device has autocast off), and then both are untouched.
bool autocast_inputs(OpId op, std::vector<Tensor>& inputs, Attrs& attrs);

// Turns autocast off for a scope (an autocast op's own body, in-place ops, backward).
class AutocastExcludeGuard {
 public:
  AutocastExcludeGuard();
  ~AutocastExcludeGuard();
  AutocastExcludeGuard(const AutocastExcludeGuard&) = delete;
  AutocastExcludeGuard& operator=(const AutocastExcludeGuard&) = delete;
};

}  // namespace kiln::detail
