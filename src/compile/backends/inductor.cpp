// Backend "inductor" on the CPU: the AOT pipeline's pure prim graphs, scheduled
// into fused loop kernels (src/compile/lower/), generated as C++/OpenMP
// (src/compile/codegen/), compiled and cached (src/compile/jit/); extern calls
// (matmul, conv, views, indexing, ...) run their eager kernels in between.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>
#include <unordered_map>

#include "compile/backends/autotune.h"
#include "compile/backends/backend.h"
#include "compile/codegen/cpp_codegen.h"
#include "compile/jit/cpp_jit.h"
#include "compile/logs.h"
#include "compile/lower/schedule.h"
#include "core/parallel.h"
#include "core/tensor_impl.h"
#include "kiln/autograd.h"

namespace kiln::compiler {

namespace {

constexpr const char* kPlaceholder = "kiln_kernel_FUNCTION";  // replaced by the function's name

using KernelFn = void (*)(char* const* bufs, const int64_t* params, int threads);

// One lowered graph, scheduled and compiled; runs steps in order.
struct InductorGraph {
  Graph g;
  lower::Schedule schedule;
  std::vector<std::shared_ptr<const jit::Library>> libraries;  // keep the kernels loaded
  std::vector<KernelFn> fns;
  std::vector<std::vector<int64_t>> params;  // per kernel (Note [Kernel parameters])
  size_t unique_functions = 0;               // the distinct functions they call (Note [Shared kernel code])
  std::vector<std::vector<int>> frees;   // per step: values whose last use it is
  std::shared_ptr<KernelCounts> counts;  // CompileStats::generated_kernel_runs, kernel_fallbacks
  // Mode "max-autotune" (Note [Max-autotune]): per kernel, its key and the thread count timed
  // on its first run (0 until then).
  bool autotune = false;
  std::vector<std::string> tune_keys;
  std::unique_ptr<std::atomic<int>[]> tuned_threads;

  InductorGraph(const Graph& lowered, bool max_autotune) : g(lowered), autotune(max_autotune) {
    schedule = lower::schedule(g);
    log(Log::Fusion, schedule.str(g));
    if (!schedule.kernels.empty()) {
      // Note [Shared kernel code]: kernels of one structure (the same blocks of a network at other
      // widths, forward and backward alike) print the same function, named by a hash of its text:
      // each is compiled once, and each kernel calls its function with its own parameters.
      const size_t nk = schedule.kernels.size();
      std::vector<std::string> texts, symbols;
      std::unordered_map<std::string, size_t> unique;
      std::vector<size_t> function_of(nk);
      params.resize(nk);
      for (size_t i = 0; i < nk; ++i) {
        std::string text = codegen::generate_kernel(schedule.kernels[i], kPlaceholder, &params[i]);
        auto [it, fresh] = unique.emplace(text, texts.size());
        if (fresh) {
          char name[32];
          std::snprintf(name, sizeof name, "kiln_k%016llx",
                        static_cast<unsigned long long>(std::hash<std::string>{}(text)));
          symbols.push_back(name);
          text.replace(text.find(kPlaceholder), std::strlen(kPlaceholder), name);
          texts.push_back(std::move(text));
        }
        function_of[i] = it->second;
      }
      // Parts of at least kKernelsPerPart functions, one per core at most, compiled side by side.
      constexpr size_t kKernelsPerPart = 12;
      const size_t nf = texts.size();
      const size_t cores = std::max(1u, std::thread::hardware_concurrency());
      const size_t parts = std::max<size_t>(1, std::min(cores, nf / kKernelsPerPart));
      std::vector<std::string> sources;
      std::vector<size_t> part_of(nf);
      for (size_t p = 0; p < parts; ++p) {
        std::string src = codegen::source_prelude();
        for (size_t f = nf * p / parts; f < nf * (p + 1) / parts; ++f) {
          src += texts[f];
          part_of[f] = p;
        }
        log(Log::Code, src);
        sources.push_back(std::move(src));
      }
      libraries = jit::compile_cpp(sources);
      for (size_t i = 0; i < nk; ++i) {
        const size_t f = function_of[i];
        fns.push_back(reinterpret_cast<KernelFn>(libraries[part_of[f]]->symbol(symbols[f])));
      }
      unique_functions = nf;
      log(Log::Fusion, std::to_string(nk) + " kernels call " + std::to_string(nf) + " distinct functions\n");
      if (autotune) {
        tuned_threads.reset(new std::atomic<int>[nk]);
        for (size_t i = 0; i < nk; ++i) {
          tune_keys.push_back(autotune::kernel_key(symbols[function_of[i]], 0, params[i], get_num_threads()));
          tuned_threads[i].store(0, std::memory_order_relaxed);
        }
      }
    }
    // The step after which each value is dead (graph outputs never are).
    std::vector<int> last(g.values.size(), -1);
    for (size_t s = 0; s < schedule.steps.size(); ++s) {
      const lower::Step& st = schedule.steps[s];
      auto use = [&](int v) {
        if (v >= 0) last[static_cast<size_t>(v)] = static_cast<int>(s);
      };
      if (st.is_kernel) {
        for (const lower::Buffer& b : schedule.kernels[static_cast<size_t>(st.index)].buffers) use(b.value);
      } else {
        const Node& n = g.nodes[static_cast<size_t>(st.index)];
        for (int v : n.inputs) use(v);
        for (int v : n.outputs) use(v);
      }
    }
    for (int v : g.outputs) last[static_cast<size_t>(v)] = -1;
    for (int v : g.inputs) (void)v;
    frees.resize(schedule.steps.size());
    for (size_t v = 0; v < last.size(); ++v)
      if (last[v] >= 0) frees[static_cast<size_t>(last[v])].push_back(static_cast<int>(v));
  }

  // Whether t is the buffer kernel k was compiled for (dtype, device, sizes, strides).
  static bool matches(const Tensor& t, const TensorMeta& m) {
    if (!t.defined() || !t.has_storage()) return false;
    const TensorImpl* i = t.unsafe_impl();
    if (i->dtype != m.dtype || i->device.type != DeviceType::CPU) return false;
    if (i->sizes.size() != m.sizes.size()) return false;
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      if (i->sizes[d] != m.sizes[d]) return false;
      if (m.sizes[d] != 1 && i->strides[d] != m.strides[d]) return false;
    }
    return true;
  }

  void run_kernel(size_t ki, std::vector<Tensor>& vals, const std::vector<int64_t>* random_state,
                  size_t& random_index) const {
    const lower::LoopKernel& k = schedule.kernels[ki];
    bool ok = true;
    for (size_t l = 0; l < k.input_metas.size() && ok; ++l)
      ok = matches(vals[static_cast<size_t>(k.buffers[l].value)], k.input_metas[l]);
    if (counts) (ok ? counts->generated : counts->fallbacks).fetch_add(1, std::memory_order_relaxed);
    if (!ok) {
      // A buffer laid out otherwise than at compile time: the members with eager kernels.
      std::vector<Tensor> ins;
      for (int n : k.nodes) {
        const Node& node = g.nodes[static_cast<size_t>(n)];
        ins.clear();
        for (int v : node.inputs) ins.push_back(vals[static_cast<size_t>(v)]);
        std::vector<Tensor> outs = run_node(g, node, ins, random_state, random_index, {});
        for (size_t o = 0; o < outs.size(); ++o) vals[static_cast<size_t>(node.outputs[o])] = std::move(outs[o]);
      }
      return;
    }
    std::vector<char*> bufs;
    bufs.reserve(k.buffers.size());
    for (const lower::Buffer& b : k.buffers) {
      if (!b.output) {
        bufs.push_back(vals[static_cast<size_t>(b.value)].unsafe_impl()->data());
        continue;
      }
      const Value& v = g.values[static_cast<size_t>(b.value)];
      Tensor t = make_tensor(v.meta.sizes, v.meta.dtype, v.meta.device);
      bufs.push_back(t.numel() ? t.unsafe_impl()->data() : nullptr);
      vals[static_cast<size_t>(b.value)] = std::move(t);
    }
    int threads = k.numel() >= codegen::kParallelGrain ? get_num_threads() : 1;
    if (autotune && get_num_threads() > 1) {
      threads = tuned_threads[ki].load(std::memory_order_relaxed);
      if (threads == 0) {
        threads = autotune::pick_threads(tune_keys[ki], {1, get_num_threads()},
                                         [&](int t) { fns[ki](bufs.data(), params[ki].data(), t); });
        tuned_threads[ki].store(threads, std::memory_order_relaxed);
      }
    }
    fns[ki](bufs.data(), params[ki].data(), threads);
  }

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const {
    KILN_CHECK(inputs.size() == g.inputs.size(), "internal: graph takes ", g.inputs.size(), " inputs, got ",
               inputs.size());
    PauseRecording pause;
    NoGradGuard no_grad;
    const std::vector<int64_t>* random_state = current_random_state();
    std::vector<Tensor> vals(g.values.size());
    for (size_t i = 0; i < inputs.size(); ++i) vals[static_cast<size_t>(g.inputs[i])] = inputs[i];
    size_t random_index = 0;
    std::vector<Tensor> ins;
    for (size_t s = 0; s < schedule.steps.size(); ++s) {
      const lower::Step& st = schedule.steps[s];
      if (st.is_kernel) {
        run_kernel(static_cast<size_t>(st.index), vals, random_state, random_index);
      } else {
        const Node& n = g.nodes[static_cast<size_t>(st.index)];
        ins.clear();
        for (int v : n.inputs) ins.push_back(v < 0 ? Tensor() : vals[static_cast<size_t>(v)]);
        std::vector<Tensor> outs = run_node(g, n, ins, random_state, random_index, {});
        KILN_CHECK(outs.size() == n.outputs.size(), "internal: ", op_info(n.op).name, " returned ", outs.size(),
                   " outputs, the graph has ", n.outputs.size());
        for (size_t k = 0; k < outs.size(); ++k) vals[static_cast<size_t>(n.outputs[k])] = std::move(outs[k]);
      }
      for (int v : frees[s]) vals[static_cast<size_t>(v)] = Tensor();
    }
    std::vector<Tensor> out;
    out.reserve(g.outputs.size());
    std::unordered_map<int, int> seen;
    for (int v : g.outputs) {
      bool dup = !seen.emplace(v, 1).second;  // each output its own buffer, as in eager
      out.push_back(dup ? vals[static_cast<size_t>(v)].clone() : vals[static_cast<size_t>(v)]);
    }
    return out;
  }
};

// Note [Background compilation]
// With CompileOptions::background, a graph's kernels are built (scheduled, generated, compiled
// or loaded from the cache) on a thread of their own while calls run the lowered graph with
// eager kernels, as "aot_eager" would: the first step costs what aot_eager's does, not the C++
// compiler's seconds. The first call after the build finished uses the kernels. A build that
// fails raises its error on the next call, as a synchronous compile would have. The thread is
// joined when the last holder of the graph function goes (a pending build never outlives it).
struct BackgroundBuild {
  std::shared_ptr<const Graph> g;
  std::shared_ptr<InductorGraph> ig;  // set by the builder before `done`
  std::exception_ptr error;
  std::atomic<bool> done{false};
};

struct BuildThread {
  std::shared_ptr<BackgroundBuild> build;
  std::thread thread;
  ~BuildThread() {
    if (thread.joinable()) thread.join();
  }
};

}  // namespace

Runnable compile_inductor(const Graph& g, CompileContext& ctx) {
  std::shared_ptr<KernelCounts> counts = ctx.kernel_counts;
  const bool background = ctx.options.background;
  const bool max_autotune = ctx.options.mode == "max-autotune";
  return aot_compile(g, ctx, /*decompose=*/true, [counts, background, max_autotune](const Graph& lowered) -> GraphFn {
    KILN_CHECK(!lowered.is_symbolic(), "internal: inductor received a symbolic graph");
    // Inductor emits CPU code only: a graph with values on another device (CUDA) runs its prims
    // on that device's eager kernels, as aot_eager would, and every run counts as a fallback.
    const bool cpu_only = std::all_of(lowered.values.begin(), lowered.values.end(),
                                      [](const Value& v) { return v.meta.device.is_cpu(); });
    if (!cpu_only) {
      auto g = std::make_shared<const Graph>(lowered);
      return [g, counts](const std::vector<Tensor>& inputs) {
        if (counts) counts->fallbacks.fetch_add(1, std::memory_order_relaxed);
        return run_interpreted(*g, inputs, current_random_state());
      };
    }
    if (!background) {
      auto ig = std::make_shared<InductorGraph>(lowered, max_autotune);
      ig->counts = counts;
      return [ig](const std::vector<Tensor>& inputs) { return (*ig)(inputs); };
    }
    auto holder = std::make_shared<BuildThread>();
    auto build = holder->build = std::make_shared<BackgroundBuild>();
    build->g = std::make_shared<const Graph>(lowered);
    holder->thread = std::thread([build, counts, max_autotune] {
      const auto t0 = std::chrono::steady_clock::now();
      try {
        auto ig = std::make_shared<InductorGraph>(*build->g, max_autotune);
        ig->counts = counts;
        build->ig = std::move(ig);
      } catch (...) {
        build->error = std::current_exception();
      }
      if (counts)
        counts->background_us.fetch_add(
            std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count(),
            std::memory_order_relaxed);
      build->done.store(true, std::memory_order_release);
    });
    return [holder, counts](const std::vector<Tensor>& inputs) {
      const BackgroundBuild& b = *holder->build;
      if (b.done.load(std::memory_order_acquire)) {
        if (b.error) std::rethrow_exception(b.error);
        return (*b.ig)(inputs);
      }
      if (counts) counts->background_runs.fetch_add(1, std::memory_order_relaxed);
      return run_interpreted(*b.g, inputs, current_random_state());
    };
  });
}

}  // namespace kiln::compiler
