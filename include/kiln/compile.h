// kiln::compile: the same results as eager, from captured graphs.
//
//   auto fast = kiln::compile(model);            // a module sharing model's parameters
//   auto step = kiln::compile([&](const Tensor& x, const Tensor& y) { ... });
//
// Every call re-runs the code in recording mode (Note [Capture semantics] in
// src/compile/capture/recording.h): ops record graph nodes instead of running,
// each graph is compiled once per distinct structure and run, and the tensors
// the code holds become real. C++ control flow always takes eager's path.
#pragma once
#include <concepts>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kiln/nn/module.h"
#include "kiln/tensor.h"

namespace kiln {

struct CompileOptions {
  std::string mode = "default";  // "default" | "reduce-overhead" | "max-autotune"
  // Symbolic sizes (Note [Dynamic shapes] in src/compile/capture/sym_shapes.h): unset, a dim of an
  // input becomes symbolic once it has taken a second value; true: every dim of every input
  // (not parameters) from the first call; false: never. Sizes 0 and 1 always stay numbers.
  std::optional<bool> dynamic = std::nullopt;
  bool fullgraph = false;             // the first graph break is an error naming the op and call site
  std::string backend = "aot_eager";  // "eager" | "aot_eager" | a registered one ("inductor": not yet)
  int recompile_limit = 8;            // graphs per call site, then eager with one warning; compiles for
                                      // new sizes count too, then they run with "aot_eager" (one warning)
  bool assume_pure = false;           // guards alone pick the graph; the code is not re-run (see PureCall)
  // "inductor": while a graph's generated code compiles, calls run the graph with eager kernels
  // (as "aot_eager"); the code is used from the first call after it is ready (Note [Background
  // compilation]). false: the first call waits for the compiler.
  bool background = true;
  std::map<std::string, std::string> options = {};  // backend options; none are defined yet
};

namespace compiler {
struct Graph;  // src/compile/ir/graph.h

// What a user backend receives: the captured graph, already functionalized
// and decomposed to prims unless the backend asked for table-level ops.
class GraphView {
 public:
  explicit GraphView(const Graph* g) : g_(g) {}
  size_t num_nodes() const;
  std::string op(size_t i) const;  // the op name of node i
  size_t num_inputs() const;
  size_t num_outputs() const;
  std::string str() const;  // one node a line, `%7 = mul(%3, %5) : f32[8, 1024]`
  const Graph& graph() const { return *g_; }

 private:
  const Graph* g_;
};

using GraphFn = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
// `run_eager` runs the graph with eager kernels; a backend may return it, wrap it or replace it.
using BackendFn = std::function<GraphFn(const GraphView& graph, GraphFn run_eager)>;

struct GraphBreak {
  int graph;       // the graph the break ended
  std::string op;  // the op or value read that broke it
  std::string reason;
  std::string call_site;  // the first frame outside libkiln, when the symbols say
};

struct CompileStats {
  int calls = 0;                               // calls of the compiled function that recorded
  int graphs_compiled = 0;                     // distinct graphs compiled (all call sites)
  int recompiles = 0;                          // compilations at a call site that already had a graph
  int cache_hits = 0;                          // graphs found compiled
  int trace_replays = 0;                       // of those, graphs whose trace matched the latest call's graph
                                               // node for node, so none was rebuilt (Note [Trace replay])
  int specializations = 0;                     // compiles of a symbolic graph for a new binding of its
                                               // symbols, for backends that take numbers (Note [Dynamic shapes]);
                                               // with the graphs compiled at a call site they count toward
                                               // recompile_limit (Note [Specialization limit])
  int limited_specializations = 0;             // new bindings past recompile_limit, compiled by "aot_eager"
  bool specialization_limit_reached = false;   // some call site reached the limit (warned once)
  int pure_replays = 0;                        // assume_pure calls whose guards selected a graph without re-running
  std::vector<GraphBreak> breaks;              // every break seen (the first 64)
  std::vector<std::string> recompile_reasons;  // why each recompile happened
  std::vector<std::string> graphs;             // each compiled graph, printed (as captured)
  std::vector<size_t> ops_per_graph;           // ops each graph captured
  std::vector<size_t> prim_ops_per_graph;      // ops after decomposition (AOT backends)
  std::vector<size_t> saved_bytes;             // per AOT graph: what the partition saves for backward
  std::vector<size_t> saveall_bytes;           // per AOT graph: saving every forward intermediate
  // Per AOT graph, printed: the functionalized graph, and for a differentiable one the joint,
  // forward and backward graphs of the partition (the first 64).
  std::vector<std::string> aot_graphs;
  std::vector<std::string> guards;  // what the latest graph assumed about its inputs
  bool fell_back_to_eager = false;  // recompile_limit reached
  // The latest call: ops recorded, its whole time and the part spent compiling and running
  // graphs (the rest is recording: re-running the user's code on tracers).
  size_t last_call_ops = 0;
  double last_call_us = 0, last_run_us = 0;
  double last_guard_us = 0;  // the latest assume_pure replay: checking its guards
  double compile_ms = 0;     // every graph's compilation (AOT, partition, backend), all calls
  // Backend "inductor": runs of generated loop kernels, and runs of a kernel's nodes with eager
  // kernels instead because a buffer's layout was not the one compiled for (both counted as the
  // graphs run, backward included).
  int64_t generated_kernel_runs = 0;
  int64_t kernel_fallbacks = 0;
  // Background compilation: graph runs with eager kernels while the generated code compiled, and
  // the compiler's time spent that way (not in compile_ms).
  int64_t background_runs = 0;
  double background_compile_ms = 0;
  // Mode "reduce-overhead" on a GPU: graph runs that were one CUDA graph's replay (Note [CUDA
  // graphs in reduce-overhead]).
  int64_t cuda_graph_replays = 0;
  std::string str() const;
};

// The untyped core of compile(): one per compiled function or module.
class CompiledFunction;
class CompiledState {
 public:
  explicit CompiledState(CompileOptions options);
  ~CompiledState();
  CompiledState(const CompiledState&) = delete;
  CompiledState& operator=(const CompiledState&) = delete;
  // Runs `body` under capture (or plainly, once the recompile limit fell back to eager).
  // `args`: the call's tensor arguments, graph inputs from the start, so that their sizes
  // are symbolic as soon as the code reads them (Note [Dynamic shapes]).
  void run(const std::function<void()>& body, const std::vector<Tensor>& args = {});

  // Note [assume_pure]: with assume_pure the user promises that a call's effect is its returned
  // tensors and its writes into tensors, fixed by the tensor arguments' metadata, the non-tensor
  // arguments' values and the tensors the code reaches (parameters: held by identity). A call
  // whose arguments match a pure entry's guards runs that graph without re-running the code.
  // Calls that break the graph, draw random numbers or return other types always re-record.
  struct PureCall {
    std::vector<Tensor> args;                       // the tensor arguments, in order
    uint64_t key = 0;                               // hash of the non-tensor arguments and the argument layout
    bool supported = true;                          // false: an argument type the guards cannot check
    std::function<std::vector<Tensor>()> returned;  // the result's tensors, after body ran
  };
  // Guard-only replay; true when a pure entry matched (then `outs` holds the result's tensors).
  bool replay(const PureCall& call, std::vector<Tensor>& outs);
  // Records `body` as run() does and remembers a pure entry when the call allows one.
  void run_pure(const std::function<void()>& body, const PureCall& call);
  const CompileStats& stats() const;
  const CompileOptions& options() const;

 private:
  std::unique_ptr<CompiledFunction> impl_;
};

// Forgets every compiled graph of every compiled function (they recompile on their next call).
void reset();
// True while code runs under capture (torch.compiler.is_compiling): code that would read
// values on the host each step (an optimizer's step count) computes with tensors instead.
bool is_compiling();
}  // namespace compiler

std::vector<std::string> list_backends();
// `decompose`: the backend receives prims only (false: the table-level ops eager ran).
void register_backend(const std::string& name, compiler::BackendFn fn, bool decompose = true);

namespace compiler::detail {
inline void mix(uint64_t& h, uint64_t v) {
  h = (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))) * 0xbf58476d1ce4e5b9ull;
}
// The tensors among a call's arguments, in order.
template <class A>
void add_tensors(std::vector<Tensor>& v, const A& a) {
  using T = std::decay_t<A>;
  if constexpr (std::is_same_v<T, Tensor>)
    v.push_back(a);
  else if constexpr (std::is_same_v<T, std::vector<Tensor>>)
    v.insert(v.end(), a.begin(), a.end());
}
// Adds one argument to a pure call: tensors by position, numbers by value.
template <class A>
void add_arg(CompiledState::PureCall& c, const A& a) {
  using T = std::decay_t<A>;
  if constexpr (std::is_same_v<T, Tensor>) {
    mix(c.key, 1);
    c.args.push_back(a);
  } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
    mix(c.key, 2 + a.size());
    for (const Tensor& t : a) c.args.push_back(t);
  } else if constexpr (std::is_arithmetic_v<T> || std::is_enum_v<T>) {
    uint64_t bits = 0;
    std::memcpy(&bits, &a, sizeof(T) < sizeof bits ? sizeof(T) : sizeof bits);
    mix(c.key, 3);
    mix(c.key, bits);
  } else {
    c.supported = false;
  }
}
template <class R>
constexpr bool pure_result() {
  if constexpr (std::is_same_v<R, Tensor> || std::is_same_v<R, std::vector<Tensor>>)
    return true;
  else
    return false;
}
template <class R>
std::vector<Tensor> flatten(const R& r) {
  if constexpr (std::is_same_v<R, Tensor>)
    return {r};
  else
    return r;
}
template <class R>
R unflatten(std::vector<Tensor>&& outs) {
  if constexpr (std::is_same_v<R, Tensor>)
    return std::move(outs.at(0));
  else
    return std::move(outs);
}
}  // namespace compiler::detail

// A compiled callable: calls fn with the same arguments and returns its result.
template <class F>
class Compiled {
 public:
  Compiled(F fn, CompileOptions o)
      : fn_(std::make_shared<F>(std::move(fn))), state_(std::make_shared<compiler::CompiledState>(std::move(o))) {}
  template <class... Args>
  std::invoke_result_t<F&, Args&&...> operator()(Args&&... args) const {
    using R = std::invoke_result_t<F&, Args&&...>;
    std::vector<Tensor> tensors;
    (compiler::detail::add_tensors(tensors, args), ...);
    if constexpr (std::is_void_v<R>) {
      state_->run([&] { (*fn_)(std::forward<Args>(args)...); }, tensors);
    } else {
      std::optional<R> r;
      if constexpr (compiler::detail::pure_result<std::decay_t<R>>()) {
        if (state_->options().assume_pure) {
          compiler::CompiledState::PureCall call;
          (compiler::detail::add_arg(call, args), ...);
          std::vector<Tensor> outs;
          if (state_->replay(call, outs)) return compiler::detail::unflatten<std::decay_t<R>>(std::move(outs));
          call.returned = [&] { return compiler::detail::flatten(*r); };
          state_->run_pure([&] { r.emplace((*fn_)(std::forward<Args>(args)...)); }, call);
          return std::move(*r);
        }
      }
      state_->run([&] { r.emplace((*fn_)(std::forward<Args>(args)...)); }, tensors);
      return std::move(*r);
    }
  }
  const compiler::CompileStats& stats() const { return state_->stats(); }

 private:
  std::shared_ptr<F> fn_;
  std::shared_ptr<compiler::CompiledState> state_;
};

// A compiled module (torch's OptimizedModule): holds the original as child
// `_orig_mod`, so it shares its parameters and buffers; train()/eval()/to()
// reach the original; forward keeps the original's signatures.
template <class M>
class CompiledModule : public nn::Module {
 public:
  CompiledModule(std::shared_ptr<M> m, CompileOptions o)
      : nn::Module("OptimizedModule"), mod_(m), state_(std::make_shared<compiler::CompiledState>(std::move(o))) {
    register_module("_orig_mod", std::move(m));
  }
  // Modules whose forward(x) returns something else (a tuple: LSTM, MultiheadAttention) get the
  // template below; the virtual one then is the base's (an error naming the module).
  static constexpr bool kTensorForward = requires(M & m, const Tensor& x) {
    { m.forward(x) } -> std::convertible_to<Tensor>;
  };
  Tensor forward(const Tensor& x) override {
    if constexpr (!kTensorForward) {
      return nn::Module::forward(x);
    } else {
      Tensor r;
      if (state_->options().assume_pure) {
        compiler::CompiledState::PureCall call;
        call.args = {x};
        // Every module's train/eval flag (a child set back to train() runs its training graph) and
        // its tensors by identity (replacing a parameter, not updating it, re-records); walked
        // without building the name lists, as this runs every call.
        mod_->for_each_module([&call](const nn::Module& m) {
          compiler::detail::mix(call.key, m.is_training());
          m.for_each_own_tensor([&call](const Tensor& t) {
            compiler::detail::mix(call.key, reinterpret_cast<uintptr_t>(t.unsafe_impl()));
          });
        });
        std::vector<Tensor> outs;
        if (state_->replay(call, outs)) return outs.at(0);
        call.returned = [&] { return std::vector<Tensor>{r}; };
        state_->run_pure([&] { r = mod_->forward(x); }, call);
        return r;
      }
      state_->run([&] { r = mod_->forward(x); }, {x});
      return r;
    }
  }
  template <class... Args>
  requires(sizeof...(Args) != 1 || !kTensorForward) auto forward(Args&&... args) {
    using R = decltype(std::declval<M&>().forward(std::forward<Args>(args)...));
    std::optional<R> r;
    std::vector<Tensor> tensors;
    (compiler::detail::add_tensors(tensors, args), ...);
    state_->run([&] { r.emplace(mod_->forward(std::forward<Args>(args)...)); }, tensors);
    return std::move(*r);
  }
  M& module() const { return *mod_; }
  const compiler::CompileStats& stats() const { return state_->stats(); }

 private:
  std::shared_ptr<M> mod_;
  std::shared_ptr<compiler::CompiledState> state_;
};

template <class M>
requires std::derived_from<M, nn::Module> std::shared_ptr<CompiledModule<M>> compile(std::shared_ptr<M> module,
                                                                                     CompileOptions options = {}) {
  return std::make_shared<CompiledModule<M>>(std::move(module), std::move(options));
}

template <class T>
struct is_shared_ptr : std::false_type {};
template <class T>
struct is_shared_ptr<std::shared_ptr<T>> : std::true_type {};

template <class F>
requires(!is_shared_ptr<std::decay_t<F>>::value) Compiled<std::decay_t<F>> compile(F&& fn,
                                                                                   CompileOptions options = {}) {
  return Compiled<std::decay_t<F>>(std::forward<F>(fn), std::move(options));
}

// Runs fn(args...) once under capture with the "eager" backend and reports
// what happened: graphs, ops per graph, breaks with reasons, guards.
struct ExplainOutput {
  compiler::CompileStats stats;
  std::string str() const { return stats.str(); }
};
template <class F, class... Args>
ExplainOutput explain(F&& fn, Args&&... args) {
  CompileOptions o;
  o.backend = "eager";
  compiler::CompiledState state(std::move(o));
  state.run([&] { (void)fn(std::forward<Args>(args)...); });
  return ExplainOutput{state.stats()};
}

}  // namespace kiln
