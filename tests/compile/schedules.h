// The graphs a function lowers to under kiln::compile, scheduled (Note [Loop kernels]): the
// forward, and the backward when the input requires grad. For tests of the emitters.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "compile/lower/schedule.h"
#include "kiln/compile.h"
#include "kiln/kiln.h"

namespace kiln::testing {

struct ScheduledGraph {
  compiler::Graph graph;
  compiler::lower::Schedule schedule;
};

inline std::vector<ScheduledGraph> schedules_of(const std::function<Tensor(const Tensor&)>& fn, const Tensor& x) {
  static std::vector<ScheduledGraph> got;
  got.clear();
  register_backend(
      "schedules_of",
      [](compiler::GraphView gv, compiler::GraphFn eager) {
        got.push_back({gv.graph(), compiler::lower::schedule(gv.graph())});
        return eager;
      },
      true);
  auto f = compile(fn, {.backend = "schedules_of"});
  Tensor y = f(x);
  if (x.requires_grad()) y.sum().backward();
  return got;
}

}  // namespace kiln::testing
