// Memory planning for backend "inductor" (Note [Memory planning]): the buffers that loop
// kernels store, placed by liveness in one arena per graph.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "compile/ir/graph.h"
#include "compile/lower/schedule.h"

namespace kiln::compiler {

// One value placed in the arena: it occupies [offset, offset + bytes) from the step that
// defines it through step `last` (inclusive), the last use of it or of any view of it.
struct PlannedValue {
  int value = -1;
  size_t bytes = 0;
  int first = 0;
  int last = 0;
  size_t offset = 0;
};

struct MemoryPlan {
  std::vector<PlannedValue> values;    // in placement order
  std::vector<int> slot;               // per graph value: its index in `values`, or -1 (allocated as before)
  std::vector<std::vector<int>> dies;  // per step: indices in `values` whose region is free after it
  size_t arena_bytes = 0;              // the arena's size
  size_t planned_bytes = 0;            // what the planned values take allocated one by one
  std::string str(const Graph& g) const;
};

// Offsets for `values` (their bytes, first and last set) such that two whose [first, last]
// intervals meet never overlap in bytes; each offset a multiple of 64 (the CPU allocator's
// alignment). Greedy by size, best fit (Note [Memory planning]). Returns the arena's size.
size_t assign_offsets(std::vector<PlannedValue>& values);

// The plan for g run in the schedule's order: every value a kernel stores that is not a graph
// output, nor viewed by one, nor empty.
MemoryPlan plan_memory(const Graph& g, const lower::Schedule& schedule);

// Throws a kiln::Error naming two values that are live at the same step and overlap in bytes,
// or one that leaves the arena.
void check_memory_plan(const MemoryPlan& plan);

}  // namespace kiln::compiler
