// The backend registry: "eager", "aot_eager", "inductor" (backends/inductor.cpp) and user backends.
#include <mutex>

#include "compile/backends/backend.h"
#include "compile/ir/passes.h"

namespace kiln::compiler {

Runnable compile_inductor(const Graph& g, CompileContext& ctx);  // backends/inductor.cpp

namespace {
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::vector<BackendEntry>& registry();

// "eager": the captured graph as it is, with eager's kernels in eager's order (a symbolic
// graph's attrs evaluated per call by the interpreter).
Runnable compile_eager(const Graph& captured, CompileContext&) {
  auto g = std::make_shared<Graph>(captured);
  dead_code_elimination(*g);
  return [g](const std::vector<Tensor>& inputs, const std::vector<int64_t>& random_state) {
    return GraphResult{run_interpreted(*g, inputs, &random_state), nullptr, {}, {}, {}};
  };
}

// "aot_eager": functionalized, joint graph and partition, eager kernels. The graphs run the
// table-level ops eager runs (composites keep their fused kernels); options {"decompose": "true"}
// runs the prims instead, as a code-generating backend receives them. Either way the
// decomposition is counted in the stats.
Runnable compile_aot_eager(const Graph& g, CompileContext& ctx) {
  auto it = ctx.options.options.find("decompose");
  bool decompose = it != ctx.options.options.end() && it->second == "true";
  // Unfused eager kernels gain nothing from recomputing in the backward, and pay a kernel pass
  // for each recomputed value: by default save what the backward reads ({"recompute": "true"}
  // runs the min-cut's memory-saving split, as a fusing backend does).
  auto rc = ctx.options.options.find("recompute");
  ctx.recompute = rc != ctx.options.options.end() && rc->second == "true";
  return aot_compile(g, ctx, decompose, [](const Graph& lowered) -> GraphFn {
    auto g = std::make_shared<const Graph>(lowered);
    return [g](const std::vector<Tensor>& inputs) { return run_interpreted(*g, inputs, current_random_state()); };
  });
}

std::vector<BackendEntry>& registry() {
  static std::vector<BackendEntry> r = {
      {"eager", false, false, &compile_eager, /*symbolic=*/true},
      {"aot_eager", true, true, &compile_aot_eager},
      {"inductor", true, true, &compile_inductor},
  };
  return r;
}
}  // namespace

void add_backend(BackendEntry entry) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (BackendEntry& e : registry())
    if (e.name == entry.name) {
      KILN_CHECK(e.name != "eager" && e.name != "aot_eager" && e.name != "inductor", "register_backend: \"", e.name,
                 "\" is a built-in backend and cannot be replaced");
      e = std::move(entry);
      return;
    }
  registry().push_back(std::move(entry));
}

const BackendEntry* find_backend(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const BackendEntry& e : registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::string> backend_names() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  std::vector<std::string> names;
  for (const BackendEntry& e : registry()) names.push_back(e.name);
  return names;
}

}  // namespace kiln::compiler

namespace kiln {

std::vector<std::string> list_backends() { return compiler::backend_names(); }

void register_backend(const std::string& name, compiler::BackendFn fn, bool decompose) {
  KILN_CHECK(!name.empty(), "register_backend: the name is empty");
  KILN_CHECK(fn != nullptr, "register_backend: \"", name, "\" has no function");
  compiler::BackendEntry e;
  e.name = name;
  e.aot = true;
  e.decompose = decompose;
  e.compile = [fn, decompose](const compiler::Graph& g, compiler::CompileContext& ctx) {
    return compiler::aot_compile(g, ctx, decompose, [fn](const compiler::Graph& lowered) -> compiler::GraphFn {
      // The view the backend keeps points at this copy, which lives as long as the function.
      auto keep = std::make_shared<compiler::Graph>(lowered);
      compiler::GraphFn run_eager = [keep](const std::vector<Tensor>& inputs) {
        return compiler::run_interpreted(*keep, inputs, compiler::current_random_state());
      };
      compiler::GraphFn f = fn(compiler::GraphView(keep.get()), run_eager);
      KILN_CHECK(f != nullptr, "compile: the backend returned no function for a graph");
      return [f, keep](const std::vector<Tensor>& inputs) { return f(inputs); };
    });
  };
  compiler::add_backend(std::move(e));
}

}  // namespace kiln
