// Backend "inductor": the AOT pipeline's pure prim graphs, scheduled into fused
// loop kernels (src/compile/lower/), generated as C++/OpenMP for CPU tensors and
// as CUDA for CUDA tensors (src/compile/codegen/), compiled and cached
// (src/compile/jit/); extern calls (matmul, conv, views, indexing, ...) run their
// eager kernels in between.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <optional>
#include <thread>
#include <unordered_map>
#include <sys/resource.h>
#include <unistd.h>

#include "compile/backends/autotune.h"
#include "compile/backends/backend.h"
#include "compile/backends/cuda_graphs.h"
#include "compile/backends/memory_plan.h"
#include "compile/codegen/cpp_codegen.h"
#include "compile/codegen/cuda_codegen.h"
#include "compile/jit/cpp_jit.h"
#include "compile/jit/cuda_jit.h"
#include "compile/logs.h"
#include "compile/lower/epilogue.h"
#include "compile/lower/schedule.h"
#include "compile/lower/split_reduction.h"
#include "core/parallel.h"
#include "dispatch/dispatch.h"
#include "core/tensor_impl.h"
#include "kiln/autograd.h"
#include "kiln/cuda.h"

namespace kiln::compiler {

namespace {

constexpr const char* kPlaceholder = "kiln_kernel_FUNCTION";  // replaced by the function's name

using KernelFn = void (*)(char* const* bufs, const int64_t* params, int threads);

// One lowered graph, scheduled and compiled; runs steps in order.
struct InductorGraph {
  Graph g;
  lower::Schedule schedule;
  std::vector<std::shared_ptr<const jit::Library>> libraries;  // keep the kernels loaded
  std::vector<std::shared_ptr<const jit::CudaModule>> modules;
  // Per kernel, where it runs (Note [Kernel devices]) and its function: fns (CPU) or
  // cuda_fns (a cudaKernel_t).
  enum class Where : uint8_t { Cpu, Cuda, Eager };
  std::vector<Where> where;
  std::vector<std::vector<bool>> by_value;  // CUDA kernels: inputs passed by value (CPU 0-d)
  std::vector<KernelFn> fns;
  std::vector<void*> cuda_fns;
  std::vector<codegen::CudaLaunch> launches;
  std::vector<bool> vector_path;  // CUDA kernels with a vectorized loop
  int cuda_device = -1;
  std::vector<std::vector<int64_t>> params;  // per kernel (Note [Kernel parameters])
  size_t unique_functions = 0;               // the distinct functions they call (Note [Shared kernel code])
  std::vector<std::vector<int>> frees;   // per step: values whose last use it is
  std::shared_ptr<KernelCounts> counts;  // CompileStats::generated_kernel_runs, kernel_fallbacks
  // Mode "max-autotune" (Note [Max-autotune]): per kernel, its key and the thread count timed
  // on its first run (0 until then).
  bool autotune = false;
  std::vector<std::string> tune_keys;
  std::unique_ptr<std::atomic<int>[]> tuned_threads;

  MemoryPlan plan;                       // Note [Memory planning]
  bool debug_plan = false;               // KILN_DEBUG_MEMORY_PLAN=1: checks, and poisons dead regions
  // Mode "reduce-overhead": one arena kept across calls, used by one call at a time (the
  // others, running the graph concurrently, allocate their own).
  bool keep_arena = false;
  mutable std::shared_ptr<Storage> kept_arena;
  mutable std::atomic<bool> kept_arena_busy{false};
  // The steps from the first planned store through the last planned death: a call holds its
  // arena only then, so that the memory the externs allocate around them (the forward's start,
  // the optimizer's end of a training step) is not added to it.
  int arena_first = INT_MAX, arena_last = -1;

  InductorGraph(const Graph& lowered, bool max_autotune, bool reduce_overhead)
      : g(lowered), autotune(max_autotune), keep_arena(reduce_overhead) {
    schedule = lower::schedule(g);
    split_few_long_rows();
    log(Log::Fusion, schedule.str(g));
    place_kernels();
    build_cpu_kernels();
    build_cuda_kernels();
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
    // The plan is made in mode "reduce-overhead", where its arena is kept across calls (no
    // allocation per kernel store), or with KILN_MEMORY_PLAN=1; KILN_MEMORY_PLAN=0 turns it off
    // everywhere. Not by default: one arena held over the planned span raised the peak of
    // steps whose extern kernels peak while few planned values live (mlp's whole step: 66 MB
    // planned, 54 MB not, eager 31 MB; docs/compile.md).
    const char* on = std::getenv("KILN_MEMORY_PLAN");
    // The arena is host memory: graphs with CUDA kernels are not planned (their outputs come
    // from the CUDA caching allocator, which reuses blocks on its own).
    const bool plan_on = cuda_device < 0 && (on && *on ? std::strcmp(on, "0") != 0 : keep_arena);
    if (plan_on) {
      plan = plan_memory(g, schedule);
    } else {
      plan.slot.assign(g.values.size(), -1);
      plan.dies.resize(schedule.steps.size());
    }
    const char* dbg = std::getenv("KILN_DEBUG_MEMORY_PLAN");
    debug_plan = dbg && *dbg && std::strcmp(dbg, "0") != 0;
    if (debug_plan) check_memory_plan(plan);
    for (const PlannedValue& p : plan.values) {
      arena_first = std::min(arena_first, p.first);
      arena_last = std::max(arena_last, p.last);
    }
    log(Log::Fusion, plan.str(g));
    plan_writes_into_inputs();
  }

  // Note [Split reductions]: generated CUDA reductions with few, long rows become two kernels.
  // KILN_SPLIT_REDUCTIONS=0 turns it off (for measuring); =1 splits such kernels on every
  // device (the CPU's kernels too, with a row count of its threads: what tests use to run the
  // transform without a GPU).
  void split_few_long_rows() {
    const char* e = std::getenv("KILN_SPLIT_REDUCTIONS");
    const std::string mode = e ? e : "";
    if (mode == "0") return;
    const bool everywhere = mode == "1";
    auto device_of = [&](const lower::LoopKernel& k) {
      for (const lower::Buffer& b : k.buffers)
        if (b.output) return g.values[static_cast<size_t>(b.value)].meta.device;
      return Device(kCPU);
    };
    lower::split_reductions(g, schedule, [&](const lower::LoopKernel& k) {
      const Device d = device_of(k);
      return d.is_cuda() ? cuda_codegen_enabled() : everywhere;
    });
    if (everywhere) {
      // The CPU's policy: fewer rows than threads.
      lower::SplitPolicy cpu{.max_rows = std::max(2, get_num_threads()), .min_extent = 4096, .min_share = 64};
      lower::split_reductions(g, schedule, [&](const lower::LoopKernel& k) { return device_of(k).is_cpu(); }, cpu);
    }
  }

  // Note [Kernel devices]
  // A kernel runs where its outputs live: generated C++ when they are on the CPU, generated
  // CUDA when they are on a GPU. A CUDA kernel reads buffers on its own device and CPU 0-d
  // tensors (a scalar the graph holds on the host: a step count, a learning rate), which
  // are passed by value in the launch; any other mix (buffers on two GPUs) runs the kernel's
  // nodes with eager kernels, as a buffer laid out otherwise than compiled does.
  //
  // Generated CUDA is on by default; KILN_CUDA_CODEGEN=0 turns it off (for measuring), and a
  // CUDA kernel's nodes then run on eager's CUDA kernels and count as fallbacks. Off, a compiled
  // graph runs its decomposed prims one eager kernel each, which is slower than eager itself: on
  // an H100 (2026-12-07) a resnet18 training step took 25.3 ms off and 14.6 ms on (eager 13.8),
  // an mlp step 0.94 and 0.79 ms (eager 0.83), with every op and kernel form checked against
  // eager there (docs/compile.md).
  static bool cuda_codegen_enabled() {
    static const bool on = [] {
      const char* e = std::getenv("KILN_CUDA_CODEGEN");
      return !(e && std::strcmp(e, "0") == 0);
    }();
    return on;
  }

  void place_kernels() {
    const size_t nk = schedule.kernels.size();
    where.assign(nk, Where::Eager);
    by_value.assign(nk, {});
    for (size_t i = 0; i < nk; ++i) {
      const lower::LoopKernel& k = schedule.kernels[i];
      std::optional<Device> dev;
      bool ok = true;
      for (const lower::Buffer& b : k.buffers) {
        if (!b.output) continue;
        const Device d = g.values[static_cast<size_t>(b.value)].meta.device;
        ok = ok && (!dev || *dev == d);
        dev = d;
      }
      if (!ok || !dev) continue;
      std::vector<bool> bv(k.buffers.size(), false);
      for (size_t j = 0; j < k.buffers.size() && ok; ++j) {
        const lower::Buffer& b = k.buffers[j];
        if (b.output) continue;
        const TensorMeta& m = g.values[static_cast<size_t>(b.value)].meta;
        if (m.device == *dev) continue;
        bv[j] = dev->is_cuda() && m.device.is_cpu() && m.sizes.empty();
        ok = bv[j];
      }
      if (!ok) continue;
      if (dev->is_cpu()) {
        where[i] = Where::Cpu;
      } else if (dev->is_cuda() && cuda_codegen_enabled() && (cuda_device < 0 || cuda_device == dev->index)) {
        where[i] = Where::Cuda;
        cuda_device = dev->index;
        by_value[i] = std::move(bv);
      }
    }
  }

  // Note [Shared kernel code]: kernels of one structure (the same blocks of a network at other
  // widths, forward and backward alike) print the same function, named by a hash of its text:
  // each is compiled once, and each kernel calls its function with its own parameters. Returns
  // per kernel of `which` its function's index in *texts and *symbols.
  std::vector<size_t> unique_functions_of(const std::vector<size_t>& which,
                                          const std::function<std::string(size_t, std::vector<int64_t>*)>& generate,
                                          std::vector<std::string>* texts, std::vector<std::string>* symbols) {
    std::unordered_map<std::string, size_t> unique;
    std::vector<size_t> function_of;
    for (size_t i : which) {
      std::string text = generate(i, &params[i]);
      auto [it, fresh] = unique.emplace(text, texts->size());
      if (fresh) {
        char name[32];
        std::snprintf(name, sizeof name, "kiln_k%016llx",
                      static_cast<unsigned long long>(std::hash<std::string>{}(text)));
        symbols->push_back(name);
        text.replace(text.find(kPlaceholder), std::strlen(kPlaceholder), name);
        texts->push_back(std::move(text));
      }
      function_of.push_back(it->second);
    }
    unique_functions += texts->size();
    return function_of;
  }

  // The functions in parts of at least kKernelsPerPart, one part per core at most, compiled
  // side by side; returns each function's part.
  static std::vector<std::string> parts_of(const std::vector<std::string>& texts, const std::string& prelude,
                                           std::vector<size_t>* part_of) {
    constexpr size_t kKernelsPerPart = 12;
    const size_t nf = texts.size();
    const size_t cores = std::max(1u, std::thread::hardware_concurrency());
    const size_t parts = std::max<size_t>(1, std::min(cores, nf / kKernelsPerPart));
    std::vector<std::string> sources;
    part_of->resize(nf);
    for (size_t p = 0; p < parts; ++p) {
      std::string src = prelude;
      for (size_t f = nf * p / parts; f < nf * (p + 1) / parts; ++f) {
        src += texts[f];
        (*part_of)[f] = p;
      }
      log(Log::Code, src);
      sources.push_back(std::move(src));
    }
    return sources;
  }

  std::vector<size_t> kernels_at(Where w) const {
    std::vector<size_t> r;
    for (size_t i = 0; i < where.size(); ++i)
      if (where[i] == w) r.push_back(i);
    return r;
  }

  void build_cpu_kernels() {
    const size_t nk = schedule.kernels.size();
    params.resize(nk);
    fns.assign(nk, nullptr);
    const std::vector<size_t> cpu = kernels_at(Where::Cpu);
    if (cpu.empty()) return;
    std::vector<std::string> texts, symbols;
    const std::vector<size_t> function_of = unique_functions_of(
        cpu,
        [&](size_t i, std::vector<int64_t>* p) {
          return codegen::generate_kernel(schedule.kernels[i], kPlaceholder, p);
        },
        &texts, &symbols);
    std::vector<size_t> part_of;
    libraries = jit::compile_cpp(parts_of(texts, codegen::source_prelude(), &part_of));
    for (size_t j = 0; j < cpu.size(); ++j) {
      const size_t f = function_of[j];
      fns[cpu[j]] = reinterpret_cast<KernelFn>(libraries[part_of[f]]->symbol(symbols[f]));
    }
    log(Log::Fusion, std::to_string(cpu.size()) + " CPU kernels call " + std::to_string(texts.size()) +
                         " distinct functions\n");
    if (autotune) {
      tuned_threads.reset(new std::atomic<int>[nk]);
      tune_keys.resize(nk);
      for (size_t j = 0; j < cpu.size(); ++j) {
        const size_t i = cpu[j];
        tune_keys[i] = autotune::kernel_key(symbols[function_of[j]], 0, params[i], get_num_threads());
        tuned_threads[i].store(0, std::memory_order_relaxed);
      }
    }
  }

  void build_cuda_kernels() {
    const size_t nk = schedule.kernels.size();
    cuda_fns.assign(nk, nullptr);
    launches.assign(nk, {});
    vector_path.assign(nk, false);
    const std::vector<size_t> gpu = kernels_at(Where::Cuda);
    if (gpu.empty()) return;
    std::vector<std::string> texts, symbols;
    const std::vector<size_t> function_of = unique_functions_of(
        gpu,
        [&](size_t i, std::vector<int64_t>* p) {
          return codegen::generate_cuda_kernel(schedule.kernels[i], kPlaceholder, by_value[i], p);
        },
        &texts, &symbols);
    std::vector<size_t> part_of;
    modules = jit::compile_cuda(parts_of(texts, codegen::cuda_source_prelude(), &part_of), cuda_device);
    const int sms = jit::cuda_device_info(cuda_device).multiprocessors;
    for (size_t j = 0; j < gpu.size(); ++j) {
      const size_t f = function_of[j];
      cuda_fns[gpu[j]] = modules[part_of[f]]->kernel(symbols[f]);
      launches[gpu[j]] = codegen::cuda_launch(schedule.kernels[gpu[j]], sms);
      vector_path[gpu[j]] = codegen::cuda_vectorizable(schedule.kernels[gpu[j]]);
    }
    log(Log::Fusion, std::to_string(gpu.size()) + " CUDA kernels call " + std::to_string(texts.size()) +
                         " distinct functions\n");
  }

  // Note [Writing into inputs]
  // A kernel that stores an output the caller writes back into a graph input (a compiled
  // training step's parameters and optimizer moments) stores it into that input's own buffer
  // when nothing can read the input's old value afterwards: no later step reads the input or a
  // view of it, the kernel itself reads it only at the element it writes, and neither it nor a
  // view of it is a graph output, and the kernel makes one pass. The write-back then finds the value in place (aot.cpp) and
  // copies nothing: one pass over each parameter instead of a pass, a copy and a new buffer. At
  // run time the input must also be contiguous as the kernel writes it and share its storage
  // with no other input; otherwise the value gets a buffer of its own as before.
  std::vector<int> inplace_input;  // per value: the graph-input position its store goes to, or -1
  bool any_in_place = false;

  void plan_writes_into_inputs() {
    inplace_input.assign(g.values.size(), -1);
    if (g.write_targets.empty()) return;
    const int nsteps = static_cast<int>(schedule.steps.size());
    std::vector<int> last_read(g.values.size(), -1), kernel_step(schedule.kernels.size(), -1);
    for (int s = 0; s < nsteps; ++s) {
      const lower::Step& st = schedule.steps[static_cast<size_t>(s)];
      if (st.is_kernel) {
        kernel_step[static_cast<size_t>(st.index)] = s;
        for (const lower::Buffer& b : schedule.kernels[static_cast<size_t>(st.index)].buffers)
          if (!b.output) last_read[static_cast<size_t>(b.value)] = s;
      } else {
        for (int v : g.nodes[static_cast<size_t>(st.index)].inputs)
          if (v >= 0) last_read[static_cast<size_t>(v)] = s;
      }
    }
    for (int v : g.outputs) last_read[static_cast<size_t>(v)] = nsteps;  // read by the caller
    // Each value's graph input, where it is one or a view of one (transitively).
    std::vector<int> root(g.values.size(), -1);
    for (size_t i = 0; i < g.inputs.size(); ++i) root[static_cast<size_t>(g.inputs[i])] = static_cast<int>(i);
    for (const Node& n : g.nodes)
      if (op_info(n.op).has(VIEW) && !n.inputs.empty() && n.inputs[0] >= 0 && root[static_cast<size_t>(n.inputs[0])] >= 0)
        for (int o : n.outputs) root[static_cast<size_t>(o)] = root[static_cast<size_t>(n.inputs[0])];
    std::vector<int> family_last(g.inputs.size(), -1), targeted(g.inputs.size(), 0), output_count(g.values.size(), 0);
    for (size_t v = 0; v < g.values.size(); ++v)
      if (root[v] >= 0) family_last[static_cast<size_t>(root[v])] = std::max(family_last[static_cast<size_t>(root[v])], last_read[v]);
    for (int t : g.write_targets)
      if (t >= 0) ++targeted[static_cast<size_t>(t)];
    for (int v : g.outputs) ++output_count[static_cast<size_t>(v)];
    for (size_t o = 0; o < g.write_targets.size() && o < g.outputs.size(); ++o) {
      const int j = g.write_targets[o], v = g.outputs[o];
      if (j < 0 || targeted[static_cast<size_t>(j)] != 1 || output_count[static_cast<size_t>(v)] != 1) continue;
      // The kernel storing v, and the index it stores at.
      for (size_t ki = 0; ki < schedule.kernels.size(); ++ki) {
        const lower::LoopKernel& k = schedule.kernels[ki];
        const lower::Store* store = nullptr;
        for (const lower::Store& st : k.stores)
          if (k.buffers[static_cast<size_t>(st.buffer)].value == v) store = &st;
        if (!store) continue;
        // One pass: a kernel of several passes (Note [Reduction phases]) may read the input again
        // in a pass after the one that stores (var_mean of x, then a write into x).
        bool ok = family_last[static_cast<size_t>(j)] <= kernel_step[ki] && k.num_phases() == 1;
        for (size_t b = 0; b < k.buffers.size() && ok; ++b) {
          if (k.buffers[b].output || root[static_cast<size_t>(k.buffers[b].value)] != j) continue;
          ok = k.buffers[b].value == g.inputs[static_cast<size_t>(j)];  // not through a view of it
          for (const lower::Expr& e : k.exprs)
            if (e.kind == lower::ExprKind::Load && e.buffer == static_cast<int>(b)) ok = ok && e.index == store->index;
        }
        if (ok) inplace_input[static_cast<size_t>(v)] = j;
        break;
      }
    }
    int targets = 0, in_place = 0;
    for (size_t o = 0; o < g.write_targets.size(); ++o) {
      targets += g.write_targets[o] >= 0;
      in_place += o < g.outputs.size() && inplace_input[static_cast<size_t>(g.outputs[o])] >= 0;
    }
    any_in_place = in_place > 0;
    log(Log::Fusion, "writes into inputs: " + std::to_string(in_place) + " of " + std::to_string(targets) +
                         " write-backs stored in place (Note [Writing into inputs])\n");
  }

  // Whether input tensor `dst` can receive value v in place: v's dtype and sizes, contiguous, and
  // no other graph input on its storage (`shared`, from shared_inputs: a whole step of a model
  // with hundreds of parameters stores hundreds of write-backs, each of which compared its
  // storage with every input).
  static bool can_store_into(const Tensor& dst, const Value& v, bool shared) {
    if (shared || !dst.defined() || !dst.has_storage() || dst.numel() == 0 || dst.dtype() != v.meta.dtype) return false;
    return dst.sizes() == IntArrayRef(v.meta.sizes) && dst.is_contiguous();
  }
  // Per graph input: whether another input shares its storage. Empty where nothing is stored in place.
  std::vector<bool> shared_inputs(const std::vector<Tensor>& inputs) const {
    if (!any_in_place) return {};
    std::vector<std::pair<const Storage*, size_t>> by_storage;
    by_storage.reserve(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && inputs[i].has_storage()) by_storage.emplace_back(inputs[i].unsafe_impl()->storage.get(), i);
    std::sort(by_storage.begin(), by_storage.end());
    std::vector<bool> shared(inputs.size(), false);
    for (size_t k = 1; k < by_storage.size(); ++k)
      if (by_storage[k].first == by_storage[k - 1].first) shared[by_storage[k].second] = shared[by_storage[k - 1].second] = true;
    return shared;
  }

  // The storage a call's planned values live in: the kept one when this call may take it.
  struct Arena {
    std::shared_ptr<Storage> storage;
    const InductorGraph* owner = nullptr;  // set while holding the kept arena
    Arena() = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    ~Arena() {
      if (owner) owner->kept_arena_busy.store(false, std::memory_order_release);
    }
    char* base() const { return static_cast<char*>(storage->data); }
    // After the last planned death nothing is placed in it any more: a fresh arena is freed
    // once the tensors in it are (the kept one stays with its graph).
    void release() {
      if (!owner) storage.reset();
    }
  };
  void acquire(Arena& a) const {
    if (plan.arena_bytes == 0) return;
    if (keep_arena && !kept_arena_busy.exchange(true, std::memory_order_acquire)) {
      a.owner = this;
      // A tensor of an earlier call still in it (none should be: outputs never are) would
      // see its values overwritten; such an arena is left to that tensor.
      if (!kept_arena || kept_arena.use_count() != 1)
        kept_arena = get_allocator(DeviceType::CPU)->allocate(plan.arena_bytes, kCPU);
      a.storage = kept_arena;
    } else {
      a.storage = get_allocator(DeviceType::CPU)->allocate(plan.arena_bytes, kCPU);
    }
    if (debug_plan) std::memset(a.base(), 0xFF, plan.arena_bytes);
  }

  // Planned value `v` as a contiguous tensor over its region of the arena.
  Tensor planned_tensor(const Arena& a, int v) const {
    const PlannedValue& p = plan.values[static_cast<size_t>(plan.slot[static_cast<size_t>(v)])];
    const TensorMeta& m = g.values[static_cast<size_t>(v)].meta;
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = a.storage;
    impl->sizes = m.sizes;
    impl->strides = contiguous_strides(m.sizes);
    impl->storage_offset = static_cast<int64_t>(p.offset / itemsize(m.dtype));
    impl->dtype = m.dtype;
    impl->device = kCPU;
    impl->refresh_metadata();
    return Tensor(std::move(impl));
  }

  // An extern kernel's output that aliases the arena without being a planned view of it
  // (Note [Memory planning]): a copy, so the region can be reused on schedule.
  static Tensor copy_out(const Tensor& t) {
    Tensor c = make_tensor_strided(t.sizes(), t.strides(), t.dtype(), t.device());
    copy_into(c, t);
    return c;
  }
  static bool in_arena(const Arena& a, const Tensor& t) {
    return a.storage && t.defined() && t.has_storage() && t.unsafe_impl()->storage == a.storage;
  }

  // Note [Channels-last graphs]: a value that is not a view has eager's contiguous layout
  // unless its meta gives strides, which the graph's layout pass chose.
  static bool laid_out(const TensorMeta& m) {
    return m.strides.size() == m.sizes.size() && !m.sizes.empty() && !compute_contiguous(m.sizes, m.strides);
  }
  static Tensor fresh_output(const TensorMeta& m) {
    return laid_out(m) ? make_tensor_strided(m.sizes, m.strides, m.dtype, m.device) : make_tensor(m.sizes, m.dtype, m.device);
  }
  // An extern node's outputs in the layouts the graph chose: CUDA convolutions write them
  // directly (Note [Channels-last convolutions]); other kernels' outputs are copied into them.
  bool extern_into_layout(const Node& n, std::span<const Tensor> ins, std::vector<Tensor>& outs) const {
    if (op_info(n.op).has(VIEW)) return false;
    bool any = false;
    for (int o : n.outputs) any = any || laid_out(g.values[static_cast<size_t>(o)].meta);
    if (!any || (n.op != OpId::convolution && n.op != OpId::convolution_backward)) return false;
    const Device d = g.values[static_cast<size_t>(n.outputs[0])].meta.device;
    if (!d.is_cuda()) return false;
    outs.clear();
    for (int o : n.outputs) outs.push_back(fresh_output(g.values[static_cast<size_t>(o)].meta));
    return kernel_into(n.op, d, ins, n.attrs, outs);
  }
  void to_layouts(const Node& n, std::vector<Tensor>& outs) const {
    if (op_info(n.op).has(VIEW)) return;
    for (size_t k = 0; k < outs.size() && k < n.outputs.size(); ++k) {
      const TensorMeta& m = g.values[static_cast<size_t>(n.outputs[k])].meta;
      if (!laid_out(m) || !outs[k].defined() || matches(outs[k], m)) continue;
      Tensor t = fresh_output(m);
      copy_into(t, outs[k]);
      outs[k] = std::move(t);
    }
  }

  // Whether t is the buffer kernel k was compiled for (dtype, device, sizes, strides).
  static bool matches(const Tensor& t, const TensorMeta& m) {
    if (!t.defined() || !t.has_storage()) return false;
    const TensorImpl* i = t.unsafe_impl();
    if (i->dtype != m.dtype || i->device != m.device) return false;
    if (i->sizes.size() != m.sizes.size()) return false;
    for (size_t d = 0; d < m.sizes.size(); ++d) {
      if (i->sizes[d] != m.sizes[d]) return false;
      if (m.sizes[d] != 1 && i->strides[d] != m.strides[d]) return false;
    }
    return true;
  }

  void run_kernel(size_t ki, std::vector<Tensor>& vals, const std::vector<int64_t>* random_state, size_t& random_index,
                  const Arena& arena, const std::vector<bool>& shared_input) const {
    const lower::LoopKernel& k = schedule.kernels[ki];
    bool ok = where[ki] != Where::Eager;
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
        to_layouts(node, outs);
        for (size_t o = 0; o < outs.size(); ++o) vals[static_cast<size_t>(node.outputs[o])] = std::move(outs[o]);
      }
      // A member that returned its (planned) input may leave a stored value aliasing another's region.
      for (const lower::Buffer& b : k.buffers) {
        Tensor& t = vals[static_cast<size_t>(b.value)];
        if (b.output && in_arena(arena, t)) t = copy_out(t);
      }
      return;
    }
    std::vector<char*> bufs;
    bufs.reserve(k.buffers.size());
    bool in_place = false;  // a store into an input (Note [Writing into inputs]): the kernel runs once
    for (const lower::Buffer& b : k.buffers) {
      if (!b.output) {
        bufs.push_back(vals[static_cast<size_t>(b.value)].unsafe_impl()->data());
        continue;
      }
      const Value& v = g.values[static_cast<size_t>(b.value)];
      if (const int j = inplace_input[static_cast<size_t>(b.value)]; j >= 0) {
        const Tensor& dst = vals[static_cast<size_t>(g.inputs[static_cast<size_t>(j)])];
        if (can_store_into(dst, v, shared_input[static_cast<size_t>(j)])) {
          bufs.push_back(dst.unsafe_impl()->data());
          vals[static_cast<size_t>(b.value)] = dst;
          in_place = true;
          continue;
        }
      }
      Tensor t = arena.storage && plan.slot[static_cast<size_t>(b.value)] >= 0 ? planned_tensor(arena, b.value)
                                                                               : fresh_output(v.meta);
      bufs.push_back(t.numel() ? t.unsafe_impl()->data() : nullptr);
      vals[static_cast<size_t>(b.value)] = std::move(t);
    }
    if (where[ki] == Where::Cuda) {
      launch_cuda_kernel(ki, bufs, vals);
      return;
    }
    int threads = k.numel() >= codegen::kParallelGrain ? get_num_threads() : 1;
    if (autotune && get_num_threads() > 1 && !in_place) {
      threads = tuned_threads[ki].load(std::memory_order_relaxed);
      if (threads == 0) {
        threads = autotune::pick_threads(tune_keys[ki], {1, get_num_threads()},
                                         [&](int t) { fns[ki](bufs.data(), params[ki].data(), t); });
        tuned_threads[ki].store(threads, std::memory_order_relaxed);
      }
    }
    fns[ki](bufs.data(), params[ki].data(), threads);
  }

  // Kernel ki on the current stream of its device: its buffers' addresses, and the bytes of
  // the CPU 0-d inputs it takes by value (Note [Kernel devices]).
  void launch_cuda_kernel(size_t ki, const std::vector<char*>& bufs, const std::vector<Tensor>& vals) const {
    const lower::LoopKernel& k = schedule.kernels[ki];
    const codegen::CudaLaunch& l = launches[ki];
    if (l.grid == 0) return;
    std::vector<uint64_t> slots(bufs.size(), 0);
    for (size_t b = 0; b < bufs.size(); ++b) {
      if (by_value[ki][b]) {
        const Tensor& t = vals[static_cast<size_t>(k.buffers[b].value)];
        std::memcpy(&slots[b], t.unsafe_impl()->data(), itemsize(t.dtype()));
      } else {
        slots[b] = reinterpret_cast<uint64_t>(bufs[b]);
      }
    }
    // Note [Vectorized CUDA kernels]: the vector path where this launch's buffers allow it.
    int group = l.group;
    int64_t grid = l.grid;
    if (vector_path[ki] && codegen::cuda_vector_aligned(k, slots)) {
      group = 4;
      grid = std::max<int64_t>(1, (grid + 3) / 4);
    }
    const std::vector<uint64_t> args = codegen::cuda_args(slots, params[ki], group);
    // Under kiln::cuda::profiler_start, each generated kernel is a row named by its ops.
    KernelTimer* timer = kernel_timer();
    if (timer && timer->device() != DeviceType::CUDA) timer = nullptr;
    if (timer) timer->begin(OpId{});
    jit::launch_cuda(cuda_fns[ki], grid, l.block, args.data(), cuda::current_stream(cuda_device).handle());
    if (timer) timer->end_labelled(profile_label(ki));
  }

  // "gen " and the kernel's ops (the first few, in order, each once) and its points.
  std::string profile_label(size_t ki) const {
    const lower::LoopKernel& k = schedule.kernels[ki];
    std::vector<std::string> names;
    for (int n : k.nodes) {
      std::string name(op_info(g.nodes[static_cast<size_t>(n)].op).name);
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(std::move(name));
    }
    std::string label = k.nodes.empty() ? "gen partials (Note [Split reductions])" : "gen";
    for (size_t i = 0; i < names.size() && i < 4; ++i) label += (i ? "," : " ") + names[i];
    if (names.size() > 4) label += ",+" + std::to_string(names.size() - 4);
    return label + " n=" + std::to_string(k.numel());
  }

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const {
    KILN_CHECK(inputs.size() == g.inputs.size(), "internal: graph takes ", g.inputs.size(), " inputs, got ",
               inputs.size());
    PauseRecording pause;
    NoGradGuard no_grad;
    const std::vector<int64_t>* random_state = current_random_state();
    Arena arena;  // declared before vals: released after every tensor in it
    std::vector<Tensor> vals(g.values.size());
    const std::vector<bool> shared_input = shared_inputs(inputs);  // before donated inputs move
    // Donated inputs (a backward's saved tensors) are freed after their last use, as `frees` says.
    const bool donated = take_donated_inputs(inputs);
    for (size_t i = 0; i < inputs.size(); ++i)
      vals[static_cast<size_t>(g.inputs[i])] = donated ? std::move(const_cast<Tensor&>(inputs[i])) : inputs[i];
    size_t random_index = 0;
    std::vector<Tensor> ins;
    for (size_t s = 0; s < schedule.steps.size(); ++s) {
      const lower::Step& st = schedule.steps[s];
      if (static_cast<int>(s) == arena_first) acquire(arena);
      if (st.is_kernel) {
        run_kernel(static_cast<size_t>(st.index), vals, random_state, random_index, arena, shared_input);
      } else {
        const Node& n = g.nodes[static_cast<size_t>(st.index)];
        ins.clear();
        for (int v : n.inputs) ins.push_back(v < 0 ? Tensor() : vals[static_cast<size_t>(v)]);
        std::vector<Tensor> outs;
        if (writes_into_input0(n) && !in_arena(arena, ins[0]) &&
            std::find(frees[s].begin(), frees[s].end(), n.inputs[0]) != frees[s].end())
          vals[static_cast<size_t>(n.inputs[0])] = Tensor();  // Note [Externs into dead inputs]
        if (!run_into_dead_input(g, n, ins, outs) && !extern_into_layout(n, ins, outs))
          outs = run_node(g, n, ins, random_state, random_index, {});
        KILN_CHECK(outs.size() == n.outputs.size(), "internal: ", op_info(n.op).name, " returned ", outs.size(),
                   " outputs, the graph has ", n.outputs.size());
        to_layouts(n, outs);
        // A VIEW op's outputs alias the arena by plan (their roots live as long as they do);
        // another op's output that does (it returned its input) is copied out.
        const bool view = op_info(n.op).has(VIEW);
        for (size_t k = 0; k < outs.size(); ++k) {
          if (!view && in_arena(arena, outs[k])) outs[k] = copy_out(outs[k]);
          vals[static_cast<size_t>(n.outputs[k])] = std::move(outs[k]);
        }
      }
      for (int v : frees[s]) vals[static_cast<size_t>(v)] = Tensor();
      if (debug_plan && arena.storage)
        for (int i : plan.dies[s]) {
          const PlannedValue& p = plan.values[static_cast<size_t>(i)];
          std::memset(arena.base() + p.offset, 0xFF, p.bytes);
        }
      if (static_cast<int>(s) == arena_last) arena.release();
    }
    std::vector<Tensor> out;
    out.reserve(g.outputs.size());
    std::unordered_map<int, int> seen;
    for (int v : g.outputs) {
      bool dup = !seen.emplace(v, 1).second;  // each output its own buffer, as in eager
      const Tensor& t = vals[static_cast<size_t>(v)];
      // Outputs are never planned; one in the arena anyway would be overwritten by the next call.
      out.push_back(in_arena(arena, t) ? copy_out(t) : dup ? t.clone() : t);
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
  GraphFn run;  // the built graph's runner, set by the builder before `done`
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
  const bool reduce_overhead = ctx.options.mode == "reduce-overhead";
  return aot_compile(g, ctx, /*decompose=*/true,
                     [counts, background, max_autotune, reduce_overhead](const Graph& lowered) -> GraphFn {
    KILN_CHECK(!lowered.is_symbolic(), "internal: inductor received a symbolic graph");
    // Note [GEMM epilogues]: bias, activation and residual adds into the GEMM's extern call
    // (KILN_GEMM_EPILOGUES=0 turns the pass off, for measuring).
    static const bool epilogues_on = [] {
      const char* e = std::getenv("KILN_GEMM_EPILOGUES");
      return !(e && std::strcmp(e, "0") == 0);
    }();
    Graph fused = lowered;
    std::string report;
    if (const int n = epilogues_on ? lower::fuse_gemm_epilogues(fused, &report) : 0) {
      log(Log::Fusion, "GEMM epilogues: " + std::to_string(n) + " fused\n" + report);
    }
    // Mode "reduce-overhead" on a GPU: the compiled graph's runs are replayed as a CUDA graph
    // (Note [CUDA graphs in reduce-overhead]).
    auto runner = [reduce_overhead, counts](const Graph& graph, std::shared_ptr<InductorGraph> ig) {
      GraphFn f = [ig](const std::vector<Tensor>& inputs) { return (*ig)(inputs); };
      return reduce_overhead ? with_cuda_graphs(graph, std::move(f), counts) : f;
    };
    if (!background) {
      auto ig = std::make_shared<InductorGraph>(fused, max_autotune, reduce_overhead);
      ig->counts = counts;
      return runner(fused, std::move(ig));
    }
    auto holder = std::make_shared<BuildThread>();
    auto build = holder->build = std::make_shared<BackgroundBuild>();
    build->g = std::make_shared<const Graph>(std::move(fused));
    holder->thread = std::thread([build, counts, max_autotune, reduce_overhead, runner] {
      // Note [Background compilation]: the build runs at a lower priority (nice +10 for this
      // thread, inherited by the compiler processes it starts), so on a machine with few cores
      // the steps running beside it keep their cores (OpenMP regions wait for their slowest
      // thread). Failure to lower it changes nothing but the timing.
      (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 10);
      const auto t0 = std::chrono::steady_clock::now();
      try {
        auto ig = std::make_shared<InductorGraph>(*build->g, max_autotune, reduce_overhead);
        ig->counts = counts;
        build->run = runner(*build->g, std::move(ig));
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
        return b.run(inputs);
      }
      if (counts) counts->background_runs.fetch_add(1, std::memory_order_relaxed);
      return run_interpreted(*b.g, inputs, current_random_state());
    };
  });
}

}  // namespace kiln::compiler
