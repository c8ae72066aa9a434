// Note [Memory planning]: backend "inductor" knows, at compile time, every step of a graph
// and every value's size, so the buffers its loop kernels store need not be allocated one by
// one on every call: each is given an offset in one arena per graph, by liveness, as
// TorchInductor's and TVM's planners do. A value occupies its region from the step that stores
// it through its last use, extended through the last use of every extern view (a VIEW-flagged
// op) of it, transitively, since a view reads the region. Graph outputs, and values that a
// graph output views, outlive the call: they are allocated as before (they "escape").
// Placement is greedy by size, largest first, each into the smallest gap (best fit) left
// between the regions already placed whose intervals meet its own; that keeps the arena near
// the peak of the live bytes on the graphs the scheduler makes.
//
// The runtime (inductor.cpp) guards what liveness cannot see: an extern (eager) kernel may
// return its input, or a view of it, without being a VIEW op (a cast to the same dtype, a
// reshape that needs no copy); such an output found in the arena is copied out of it, so no
// region is read after its planned last step. KILN_DEBUG_MEMORY_PLAN=1 checks the plan and
// fills each region with 0xFF (NaN for floating types) when its value dies, so any read of a
// freed region shows in the results.
#include "compile/backends/memory_plan.h"

#include <algorithm>
#include <sstream>

#include "kiln/error.h"
#include "ops/registry.h"

namespace kiln::compiler {

namespace {
constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
bool meet(const PlannedValue& a, const PlannedValue& b) { return a.first <= b.last && b.first <= a.last; }
}  // namespace

size_t assign_offsets(std::vector<PlannedValue>& values) {
  // Largest first (ties: earlier first, so the order is deterministic).
  std::stable_sort(values.begin(), values.end(), [](const PlannedValue& a, const PlannedValue& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.first < b.first;
  });
  size_t arena = 0;
  std::vector<std::pair<size_t, size_t>> taken;  // [begin, end) of placed regions live with this one
  for (size_t i = 0; i < values.size(); ++i) {
    PlannedValue& v = values[i];
    const size_t need = align_up(v.bytes);
    taken.clear();
    for (size_t j = 0; j < i; ++j)
      if (meet(values[j], v)) taken.emplace_back(values[j].offset, values[j].offset + align_up(values[j].bytes));
    std::sort(taken.begin(), taken.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, at = 0;
    for (const auto& [b, e] : taken) {
      if (b > at && b - at >= need && b - at < best_gap) {
        best = at;
        best_gap = b - at;
      }
      at = std::max(at, e);
    }
    v.offset = best != SIZE_MAX ? best : at;  // the smallest gap that fits, else above them all
    arena = std::max(arena, v.offset + need);
  }
  return arena;
}

MemoryPlan plan_memory(const Graph& g, const lower::Schedule& schedule) {
  const size_t nv = g.values.size(), ns = schedule.steps.size();
  MemoryPlan plan;
  plan.slot.assign(nv, -1);
  plan.dies.resize(ns);
  // Each value's last use and, for kernel stores, the step that stores it.
  std::vector<int> last(nv, -1), def(nv, -1);
  for (size_t s = 0; s < ns; ++s) {
    const lower::Step& st = schedule.steps[s];
    auto use = [&](int v) {
      if (v >= 0) last[static_cast<size_t>(v)] = static_cast<int>(s);
    };
    if (st.is_kernel) {
      for (const lower::Buffer& b : schedule.kernels[static_cast<size_t>(st.index)].buffers) {
        use(b.value);
        if (b.output) def[static_cast<size_t>(b.value)] = static_cast<int>(s);
      }
    } else {
      const Node& n = g.nodes[static_cast<size_t>(st.index)];
      for (int v : n.inputs) use(v);
      for (int v : n.outputs) use(v);
    }
  }
  std::vector<char> is_output(nv, 0);
  for (int v : g.outputs) is_output[static_cast<size_t>(v)] = 1;
  // The candidates, and per value the candidates whose storage it may alias (itself, or the
  // ones its extern view chain starts from).
  std::vector<char> escapes(nv, 0);
  std::vector<int> ext_last(last);
  std::vector<std::vector<int>> roots(nv);
  for (size_t v = 0; v < nv; ++v)
    if (def[v] >= 0) roots[v] = {static_cast<int>(v)};
  for (size_t s = 0; s < ns; ++s) {
    const lower::Step& st = schedule.steps[s];
    if (st.is_kernel) continue;
    const Node& n = g.nodes[static_cast<size_t>(st.index)];
    if (!op_info(n.op).has(VIEW)) continue;
    std::vector<int> rs;
    for (int in : n.inputs)
      if (in >= 0) rs.insert(rs.end(), roots[static_cast<size_t>(in)].begin(), roots[static_cast<size_t>(in)].end());
    std::sort(rs.begin(), rs.end());
    rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
    for (int o : n.outputs) {
      roots[static_cast<size_t>(o)] = rs;
      for (int r : rs) {
        ext_last[static_cast<size_t>(r)] = std::max(ext_last[static_cast<size_t>(r)], last[static_cast<size_t>(o)]);
        if (is_output[static_cast<size_t>(o)]) escapes[static_cast<size_t>(r)] = 1;
      }
    }
  }
  for (size_t v = 0; v < nv; ++v) {
    if (def[v] < 0 || is_output[v] || escapes[v]) continue;
    const TensorMeta& m = g.values[v].meta;
    if (!m.device.is_cpu()) continue;
    int64_t numel = 1;
    for (int64_t d : m.sizes) numel *= d;
    if (numel <= 0) continue;
    const size_t bytes = static_cast<size_t>(numel) * itemsize(m.dtype);
    plan.values.push_back({static_cast<int>(v), bytes, def[v], std::max(def[v], ext_last[v]), 0});
    plan.planned_bytes += bytes;
  }
  plan.arena_bytes = assign_offsets(plan.values);
  for (size_t i = 0; i < plan.values.size(); ++i) {
    const PlannedValue& p = plan.values[i];
    plan.slot[static_cast<size_t>(p.value)] = static_cast<int>(i);
    plan.dies[static_cast<size_t>(p.last)].push_back(static_cast<int>(i));
  }
  return plan;
}

void check_memory_plan(const MemoryPlan& plan) {
  for (size_t i = 0; i < plan.values.size(); ++i) {
    const PlannedValue& a = plan.values[i];
    KILN_CHECK(a.first <= a.last && a.offset % kAlign == 0 && a.offset + a.bytes <= plan.arena_bytes,
               "internal: memory plan: %", a.value, " (", a.bytes, " bytes at ", a.offset, ", steps ", a.first, "..",
               a.last, ") does not fit an arena of ", plan.arena_bytes, " bytes");
    for (size_t j = i + 1; j < plan.values.size(); ++j) {
      const PlannedValue& b = plan.values[j];
      const bool bytes_meet = a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
      KILN_CHECK(!(meet(a, b) && bytes_meet), "internal: memory plan: %", a.value, " (bytes ", a.offset, "..",
                 a.offset + a.bytes, ", steps ", a.first, "..", a.last, ") and %", b.value, " (bytes ", b.offset, "..",
                 b.offset + b.bytes, ", steps ", b.first, "..", b.last, ") are live together in the same bytes");
    }
  }
}

std::string MemoryPlan::str(const Graph& g) const {
  std::ostringstream os;
  os << "memory plan: " << values.size() << " kernel buffers, " << planned_bytes << " bytes one by one, arena "
     << arena_bytes << " bytes (" << g.values.size() << " values)\n";
  for (const PlannedValue& p : values)
    os << "  %" << p.value << ": " << p.bytes << " bytes at " << p.offset << ", steps " << p.first << ".." << p.last
       << "\n";
  return os.str();
}

}  // namespace kiln::compiler
