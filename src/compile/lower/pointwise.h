// Which pointwise prims a loop kernel computes, and how: each as the shared
// scalar functor its eager CPU kernel calls (core/scalar_math.h), in the same
// compute dtype, so generated and eager values agree on every device.
#pragma once
#include <string_view>

#include "compile/ir/graph.h"
#include "compile/lower/loop_ir.h"

namespace kiln::compiler::lower {

// The dtype a functor runs in, as the op's CPU kernel picks it (src/backend/cpu/pointwise*.cpp).
enum class Compute { Input0, Output, Promoted };

struct PointwiseRule {
  const char* functor;  // math::<functor>{}; empty for the ops an emitter spells out (attrs, casts)
  Compute compute;
};

// The rule of op `name`, or nullptr where it has none (the op then runs as an extern call).
const PointwiseRule* pointwise_rule(std::string_view name);

// Whether node n of g can be computed inside a loop kernel (else it runs as an extern call
// with its eager kernel).
bool is_loop_pointwise(const Graph& g, const Node& n);

// The Pointwise expression of node n (op, attrs, dtypes); its args are left to the caller.
Expr pointwise_expr(const Graph& g, const Node& n);

}  // namespace kiln::compiler::lower
