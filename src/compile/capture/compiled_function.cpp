#include "compile/capture/compiled_function.h"
#include "compile/jit/cpp_jit.h"
#include "compile/jit/cuda_jit.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <execinfo.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <sstream>

#include "autograd/autograd_meta.h"
#include "compile/logs.h"
#include "kiln/autograd.h"

namespace kiln::compiler {

namespace {
// Every live compiled function, for compiler::reset().
std::mutex& all_mutex() {
  static std::mutex m;
  return m;
}
std::vector<CompiledFunction*>& all_functions() {
  static std::vector<CompiledFunction*> v;
  return v;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string guard_str(size_t i, const TensorMeta& m, bool requires_grad, const Shape& sym,
                      const std::vector<SymNode>& nodes) {
  std::ostringstream os;
  os << "input " << i << ": " << meta_str(m, sym, nodes);
  if (sym.empty()) os << " strides " << shape_str(m.strides);
  os << (m.storage_offset ? " offset " + std::to_string(m.storage_offset) : "")
     << (requires_grad ? " requires_grad" : "");
  return os.str();
}
}  // namespace

std::vector<int> input_alias_pattern(const std::vector<Tensor>& inputs) {
  // Sorted by storage (then index), so each storage's first input heads its run: n log n, as a
  // replayed call checks this for every graph input.
  std::vector<std::pair<const void*, int>> keyed;
  keyed.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    // An empty tensor holds no element another input could see, whatever storage it points to.
    const TensorImpl* t = inputs[i].unsafe_impl();
    const bool holds = t && t->storage && inputs[i].numel() > 0;
    keyed.emplace_back(holds ? static_cast<const void*>(t->storage.get()) : nullptr, static_cast<int>(i));
  }
  std::sort(keyed.begin(), keyed.end());
  std::vector<int> alias(inputs.size());
  for (size_t k = 0; k < keyed.size(); ++k) {
    const bool first = k == 0 || !keyed[k].first || keyed[k].first != keyed[k - 1].first;
    alias[static_cast<size_t>(keyed[k].second)] =
        first ? keyed[k].second : alias[static_cast<size_t>(keyed[k - 1].second)];
  }
  return alias;
}

std::string user_call_site() {
  void* frames[48];
  int n = backtrace(frames, 48);
  Dl_info self{};
  dladdr(reinterpret_cast<void*>(&user_call_site), &self);
  for (int i = 1; i < n; ++i) {
    Dl_info info{};
    if (!dladdr(frames[i], &info) || info.dli_fbase == self.dli_fbase) continue;
    std::string where = info.dli_fname ? info.dli_fname : "?";
    if (info.dli_sname) {
      int status = 0;
      char* d = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status);
      std::string name = status == 0 && d ? d : info.dli_sname;
      std::free(d);
      // Frames of compile.h's templates are kiln's, even though they live in the user's binary.
      if (name.find("kiln::Compiled") != std::string::npos || name.find("kiln::compiler::") != std::string::npos ||
          name.find("std::") == 0)
        continue;
      return name + " (" + where + ")";
    }
    std::ostringstream os;
    os << where << "+0x" << std::hex
       << (reinterpret_cast<uintptr_t>(frames[i]) - reinterpret_cast<uintptr_t>(info.dli_fbase));
    return os.str();
  }
  return "?";
}

CompiledFunction::CompiledFunction(CompileOptions options) : options_(std::move(options)) {
  const std::vector<std::string> modes = {"default", "reduce-overhead", "max-autotune"};
  KILN_CHECK(std::find(modes.begin(), modes.end(), options_.mode) != modes.end(), "compile: unknown mode \"",
             options_.mode, "\"; valid modes: ", join(modes));
  backend_ = find_backend(options_.backend);
  KILN_CHECK(backend_, "compile: unknown backend \"", options_.backend, "\"; valid backends: ", join(backend_names()));
  for (const auto& [k, v] : options_.options) {
    KILN_CHECK(k == "decompose" || k == "recompute", "compile: unknown option \"", k,
               "\"; valid options: decompose, recompute");
    KILN_CHECK(v == "true" || v == "false", "compile: option ", k, " must be \"true\" or \"false\", got \"", v, "\"");
  }
  KILN_CHECK(options_.recompile_limit >= 1, "compile: recompile_limit must be at least 1, got ",
             options_.recompile_limit);
  std::lock_guard<std::mutex> lock(all_mutex());
  all_functions().push_back(this);
}

CompiledFunction::~CompiledFunction() {
  std::lock_guard<std::mutex> lock(all_mutex());
  auto& v = all_functions();
  v.erase(std::remove(v.begin(), v.end(), this), v.end());
}

// Note [Compile threads]
// One compiled function runs one call at a time: mu_ is held across the user's code, so two
// threads calling it serialize, each getting eager's answer (the recording, the caches and the
// stats are per function). compiler::reset() never waits for mu_: a call in progress (its own
// body included, where waiting would deadlock) clears the caches when it ends.
void CompiledFunction::clear_cache() {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) {
    clear_pending_ = true;
    return;
  }
  clear_locked();
}

void CompiledFunction::clear_locked() {
  clear_pending_ = false;
  cache_.clear();
  latest_.clear();
  seen_.clear();
  pure_.clear();  // assume_pure entries hold compiled graphs too
  backend_compiles_.clear();
  last_ = LastGraph{};
  fallback_ = false;
}

void CompiledFunction::run(const std::function<void()>& body, const std::vector<Tensor>& args) {
  run_impl(body, nullptr, args);
}

void CompiledFunction::run_pure(const std::function<void()>& body, const CompiledState::PureCall& call) {
  run_impl(body, call.supported ? &call : nullptr, call.args);
}

void CompiledFunction::run_impl(const std::function<void()>& body, const CompiledState::PureCall* pure,
                                const std::vector<Tensor>& args) {
  // Inside another compiled function's recording, this one is part of that graph.
  if (active_recording() || current_record_layer()) {
    body();
    return;
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (clear_pending_) clear_locked();
  if (fallback_) {
    lock.unlock();
    body();
    return;
  }
  ++stats_.calls;
  stats_.last_call_ops = 0;
  stats_.last_run_us = 0;
  const int breaks_before = breaks_total_;
  auto t0 = std::chrono::steady_clock::now();
  {
    Recording rec(this);
    std::vector<std::pair<const TensorImpl*, int64_t>> returned;  // impl, and its value when a tracer
    std::vector<bool> returned_grad;                              // each requires grad after the call
    try {
      if (!(options_.dynamic.has_value() && !*options_.dynamic)) rec.declare_inputs(args);
      body();
      if (pure)
        for (const Tensor& t : pure->returned())
          returned.emplace_back(t.unsafe_impl(),
                                t.defined() && t.unsafe_impl()->is_tracer() ? t.unsafe_impl()->tracer_value : -1);
    } catch (...) {
      // Eager would have run every op before the failing one: run them, then report the failure.
      try {
        rec.flush();
      } catch (...) {
      }
      throw;
    }
    last_ = LastGraph{};
    rec.flush();
    if (pure)
      for (const Tensor& t : pure->returned()) returned_grad.push_back(t.defined() && t.requires_grad());
    if (pure && rec.graphs_run() == 1 && breaks_total_ == breaks_before && !last_.random && last_.run &&
        !rec.eager_autograd_kept())
      remember_pure(*pure, returned, returned_grad);
  }
  if (clear_pending_) clear_locked();  // Note [Compile threads]
  stats_.last_call_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

namespace {
// Note [Confirmed hits]
// The 64-bit hash only proposes an entry; a graph built this call is compared with the
// entry's captured graph node for node (op, inputs, outputs, attrs but the Philox state),
// input for input (metadata, symbols, requires_grad, wrapped numbers) and by its live outputs,
// so a collision compiles a new graph instead of running another. A replayed trace matched the
// expected graph node for node already: its entry must be the one whose graph that is.
// A raw SymInt carries its table's generation: symbols compare by their expression.
int64_t sym_key(int64_t raw, const Graph& g) {
  if (!SymInt::raw_is_symbolic(raw)) return raw;
  const size_t i = static_cast<size_t>(SymTable::index_of(raw));
  return i < g.sym_nodes.size() ? static_cast<int64_t>(g.sym_nodes[i].hash | (1ull << 63)) : raw;
}
bool same_ints(IntArrayRef x, const Graph& ga, IntArrayRef y, const Graph& gb) {
  if (x.size() != y.size()) return false;
  for (size_t k = 0; k < x.size(); ++k)
    if (sym_key(x[k], ga) != sym_key(y[k], gb)) return false;
  return true;
}
bool same_attr(const AttrValue& x, const Graph& ga, const AttrValue& y, const Graph& gb) {
  if (ga.sym_nodes.empty() && gb.sym_nodes.empty()) return attr_equal(x, y);
  if (const auto* p = std::get_if<int64_t>(&x)) {
    const auto* q = std::get_if<int64_t>(&y);
    return q && sym_key(*p, ga) == sym_key(*q, gb);
  }
  if (const auto* p = std::get_if<std::vector<int64_t>>(&x)) {
    const auto* q = std::get_if<std::vector<int64_t>>(&y);
    return q && same_ints(*p, ga, *q, gb);
  }
  if (const auto* p = std::get_if<Scalar>(&x)) {  // arange's end: a size
    const auto* q = std::get_if<Scalar>(&y);
    if (q && p->is_integral() && q->is_integral()) return sym_key(p->to_long(), ga) == sym_key(q->to_long(), gb);
  }
  return attr_equal(x, y);
}
bool same_value(const Value& a, const Graph& ga, const Value& b, const Graph& gb) {
  if (a.node != b.node || a.index != b.index || a.requires_grad != b.requires_grad ||
      a.wrapped_number != b.wrapped_number || !same_ints(a.sym, ga, b.sym, gb) || a.meta.dtype != b.meta.dtype ||
      a.meta.device != b.meta.device || a.meta.storage_offset != b.meta.storage_offset)
    return false;
  if (a.sym.empty()) return a.meta.sizes == b.meta.sizes && a.meta.strides == b.meta.strides;
  // A symbolic input's sizes are this call's; as in its hash, contiguity or the strides count.
  const bool ca = a.meta.strides == contiguous_strides(a.meta.sizes);
  const bool cb = b.meta.strides == contiguous_strides(b.meta.sizes);
  return ca == cb && (ca || a.meta.strides == b.meta.strides);
}
bool same_structure(const Graph& a, const Graph& b) {
  if (a.values.size() != b.values.size() || a.nodes.size() != b.nodes.size() || a.inputs != b.inputs ||
      a.outputs != b.outputs || a.sym_sources.size() != b.sym_sources.size())
    return false;
  for (int v : a.inputs)
    if (!same_value(a.values[v], a, b.values[v], b)) return false;
  for (int v : a.outputs)
    if (a.values[v].requires_grad != b.values[v].requires_grad) return false;
  for (size_t n = 0; n < a.nodes.size(); ++n) {
    const Node &x = a.nodes[n], &y = b.nodes[n];
    if (x.op != y.op || x.no_grad != y.no_grad || x.detached != y.detached || x.inputs != y.inputs ||
        x.outputs != y.outputs)
      return false;
    const auto &xa = x.attrs.symbolic_values(), &ya = y.attrs.symbolic_values();
    if (xa.size() != ya.size()) return false;
    const OpInfo& info = op_info(x.op);
    for (size_t k = 0; k < xa.size(); ++k)
      if (!is_random_attr(info, k, xa.size()) && !same_attr(xa[k], a, ya[k], b)) return false;
  }
  return true;
}

// Guards run per captured tensor on every replay: read the impl's fields directly (inline).
bool same_meta(const Tensor& t, const TensorMeta& m) {
  const TensorImpl* i = t.unsafe_impl();
  return i && i->dtype == m.dtype && i->device == m.device && i->storage_offset == m.storage_offset &&
         IntArrayRef(i->sizes) == IntArrayRef(m.sizes) && IntArrayRef(i->strides) == IntArrayRef(m.strides);
}
TensorMeta meta_of(const Tensor& t) {
  return TensorMeta{Shape(t.sizes()), t.dtype(), t.device(), Shape(t.strides()), t.storage_offset()};
}
// std::equal on int64_t ranges of run-time length compiles to two memcmp calls per guard (through
// the PLT); a guard compares a handful of dims, which an inline loop does in a few cycles.
inline bool same_ints(const int64_t* a, const int64_t* b, size_t n) {
  bool same = true;
  for (size_t k = 0; k < n; ++k) same &= a[k] == b[k];
  return same;
}
bool requires_grad_inline(const TensorImpl* i) {
  const auto* m = static_cast<const autograd::AutogradMeta*>(i->autograd.get());
  return m && (m->requires_grad || m->grad_fn);
}
}  // namespace

void CompiledFunction::remember_pure(const CompiledState::PureCall& call,
                                     const std::vector<std::pair<const TensorImpl*, int64_t>>& returned,
                                     const std::vector<bool>& returned_grad) {
  PureEntry e;
  e.key = call.key;
  e.grad_mode = is_grad_enabled();
  for (const Tensor& a : call.args) {
    if (!a.defined()) return;
    e.arg_meta.push_back(meta_of(a));
    e.arg_requires_grad.push_back(a.requires_grad());
  }
  for (const Tensor& in : last_.inputs) {
    int from = -1;
    for (size_t k = 0; k < call.args.size() && from < 0; ++k)
      if (call.args[k].is_same(in)) from = static_cast<int>(k);
    if (from < 0) {
      // A real alias of an argument made by the code (`arg.detach()`) reads the argument's
      // values: held by identity, a replay would compute with this call's. Re-record instead.
      const void* st = in.unsafe_impl()->storage.get();
      for (const Tensor& a : call.args)
        if (st && a.unsafe_impl()->storage.get() == st) return;
      from = -1 - static_cast<int>(e.captured.size());
      e.captured.push_back(in);
    }
    e.input_from.push_back(from);
  }
  for (const auto& [impl, value] : returned) {
    int from = std::numeric_limits<int>::min();
    if (value >= 0) {
      // A view of an input the graph writes is one of its storage (Note [Views of inputs stay
      // views]); the graph's buffer for it is a view of the functional value: record such calls.
      for (int k : last_.bump)
        if (impl->storage && last_.inputs[static_cast<size_t>(k)].unsafe_impl()->storage == impl->storage) return;
      for (size_t k = 0; k < last_.outputs.size(); ++k)
        if (last_.outputs[k] == value) from = static_cast<int>(k);
    } else {
      for (size_t k = 0; k < last_.inputs.size(); ++k)
        if (last_.inputs[k].unsafe_impl() == impl) from = -1 - static_cast<int>(k);
    }
    if (from == std::numeric_limits<int>::min()) return;  // a result the graph does not produce
    e.output_from.push_back(from);
  }
  e.output_grad = returned_grad;
  if (e.output_grad.size() != e.output_from.size()) return;
  e.bump = last_.bump;
  e.run = last_.run;
  e.alias = input_alias_pattern(last_.inputs);
  // Note [Unreachable captures]: a captured tensor that, with this call's results alive, only
  // e.captured and last_.inputs hold, and that the entry never returns, was made by the code
  // for this graph alone (a number it wrapped: batch norm's momentum and eps, a loss's
  // reduction factor). Nothing else can reach it, so its metadata cannot change and a guard
  // on it always holds: it gets none, and the replay's guards read only what can change.
  std::vector<bool> returned_input(e.captured.size(), false);
  for (int from : e.output_from)
    if (from < 0 && e.input_from[static_cast<size_t>(-1 - from)] < 0)
      returned_input[static_cast<size_t>(-1 - e.input_from[static_cast<size_t>(-1 - from)])] = true;
  for (size_t k = 0; k < e.captured.size(); ++k) {
    const Tensor& t = e.captured[k];
    if (!returned_input[k] && t.impl_ptr().use_count() == 2) continue;
    const TensorImpl* i = t.unsafe_impl();
    e.guards.push_back(PureEntry::Guard{i, i->dtype, i->device, requires_grad_inline(i),
                                        static_cast<uint32_t>(i->sizes.size()), i->storage_offset, e.dims.size(),
                                        i->autograd.get()});
    e.dims.insert(e.dims.end(), i->sizes.begin(), i->sizes.end());
    e.dims.insert(e.dims.end(), i->strides.begin(), i->strides.end());
  }
  e.inputs.resize(e.input_from.size());
  for (size_t k = 0; k < e.input_from.size(); ++k)
    if (e.input_from[k] < 0) e.inputs[k] = e.captured[static_cast<size_t>(-1 - e.input_from[k])];
  if (pure_.size() < static_cast<size_t>(options_.recompile_limit)) pure_.push_back(std::move(e));
}

bool CompiledFunction::replay(const CompiledState::PureCall& call, std::vector<Tensor>& outs) {
  if (!call.supported || active_recording() || current_record_layer()) return false;
  auto t0 = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mu_);
  if (clear_pending_) clear_locked();
  if (fallback_) return false;
  const bool grad_mode = is_grad_enabled();
  for (PureEntry& e : pure_) {
    if (e.key != call.key || e.grad_mode != grad_mode || e.arg_meta.size() != call.args.size()) continue;
    bool ok = true;
    for (size_t k = 0; k < call.args.size() && ok; ++k)
      ok = same_meta(call.args[k], e.arg_meta[k]) &&
           requires_grad_inline(call.args[k].unsafe_impl()) == e.arg_requires_grad[k];
    // The captured tensors are held by identity: only their metadata can have changed. After
    // a training step they are out of cache, one miss per line read: ask for every line the
    // guards read first, so that the misses overlap, then compare. The autograd metas are asked
    // for where they were when the entry was made (a hint: the comparison reads the impl's).
    if (ok) {
      for (const PureEntry::Guard& g : e.guards) {
        const char* p = reinterpret_cast<const char*>(&g.impl->sizes);
        const char* end = reinterpret_cast<const char*>(&g.impl->autograd + 1);
        for (; p < end; p += 64) __builtin_prefetch(p);
        __builtin_prefetch(end - 1);
        __builtin_prefetch(g.autograd_hint);
        // requires_grad_inline also reads grad_fn (a tensor without requires_grad), which lies on
        // the next line when the meta straddles one: ask for that line too.
        if (g.autograd_hint)
          __builtin_prefetch(reinterpret_cast<const char*>(g.autograd_hint) + sizeof(autograd::AutogradMeta) / 2);
      }
      // The written inputs' version counters, bumped below with atomics (each one a full
      // fence on x86, so cold lines would be fetched one at a time).
      for (int i : e.bump)
        if (e.input_from[i] < 0) __builtin_prefetch(e.inputs[i].unsafe_impl()->version.get(), 1);
    }
    for (size_t k = 0; k < e.guards.size() && ok; ++k) {
      const PureEntry::Guard& g = e.guards[k];
      const TensorImpl* i = g.impl;
      const int64_t* d = e.dims.data() + g.at;
      ok = i->dtype == g.dtype && i->device == g.device && i->storage_offset == g.storage_offset &&
           i->sizes.size() == g.rank && same_ints(i->sizes.data(), d, i->sizes.size()) &&
           same_ints(i->strides.data(), d + g.rank, i->strides.size()) && requires_grad_inline(i) == g.requires_grad;
    }
    if (!ok) continue;
    std::vector<Tensor>& inputs = e.inputs;
    for (size_t k = 0; k < e.input_from.size(); ++k)
      if (e.input_from[k] >= 0) inputs[k] = call.args[static_cast<size_t>(e.input_from[k])];
    // The graph was compiled for one aliasing among its inputs (Note [Aliased inputs]): only the
    // arguments can have changed it.
    for (size_t k = 0; k < inputs.size() && ok; ++k) {
      if (e.input_from[k] < 0) continue;
      const Storage* s = inputs[k].unsafe_impl()->storage.get();
      for (size_t j = 0; j < inputs.size() && ok; ++j)
        ok = j == k || (s && inputs[j].unsafe_impl()->storage.get() == s) == (e.alias[j] == e.alias[k]);
    }
    if (!ok) {
      for (size_t k = 0; k < e.input_from.size(); ++k)
        if (e.input_from[k] >= 0) inputs[k] = Tensor();
      continue;
    }
    for (int i : e.bump) inputs[i].unsafe_impl()->bump_version();
    stats_.last_guard_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    GraphResult r;
    try {
      r = e.run(inputs, {});
    } catch (...) {
      for (size_t k = 0; k < e.input_from.size(); ++k)
        if (e.input_from[k] >= 0) inputs[k] = Tensor();
      throw;
    }
    outs.clear();
    // Handles of one graph output alias one buffer, as eager's `{y, y.detach()}` do; only those
    // that required grad when recorded get the compiled backward.
    std::vector<int> first_use(r.outputs.size(), -1);
    for (size_t o = 0; o < e.output_from.size(); ++o) {
      const int from = e.output_from[o];
      if (from < 0) {
        outs.push_back(inputs[-1 - from]);
        continue;
      }
      const bool grad = r.grad_fn && !r.output_nr.empty() && r.output_nr[from] >= 0 && e.output_grad[o];
      const int first = first_use[from];
      if (first >= 0 && grad == outs[static_cast<size_t>(first)].requires_grad()) {
        outs.push_back(outs[static_cast<size_t>(first)]);  // the same tensor again
        continue;
      }
      Tensor t = first < 0 ? r.outputs[from] : outs[static_cast<size_t>(first)].detach();
      if (first < 0) first_use[from] = static_cast<int>(outs.size());
      if (grad) {
        auto& m = autograd::autograd_meta(t);
        m.grad_fn = r.grad_fn;
        m.output_nr = static_cast<uint32_t>(r.output_nr[from]);
      }
      outs.push_back(std::move(t));
    }
    for (size_t k = 0; k < e.input_from.size(); ++k)
      if (e.input_from[k] >= 0) inputs[k] = Tensor();  // the entry does not keep the caller's tensors
    ++stats_.pure_replays;
    return true;
  }
  return false;
}

std::string CompiledFunction::recompile_reason(const std::vector<Entry>& entries, const Graph& g,
                                               const std::vector<Tensor>& inputs) const {
  const Entry& last = entries.back();
  for (size_t i = 0; i < std::min(last.input_metas.size(), g.inputs.size()); ++i) {
    const TensorMeta& a = last.input_metas[i];
    const TensorMeta& b = g.values[g.inputs[i]].meta;
    if (a.sizes != b.sizes || a.dtype != b.dtype || a.device != b.device || a.strides != b.strides) {
      std::ostringstream os;
      os << "input " << i << " changed from " << meta_str(a) << " (strides " << shape_str(a.strides) << ") to "
         << meta_str(b) << " (strides " << shape_str(b.strides) << ")";
      const Shape& sym = g.values[g.inputs[i]].sym;
      if (!sym.empty()) os << "; compiled as " << meta_str(b, sym, g.sym_nodes);
      return os.str();
    }
  }
  (void)inputs;
  if (last.input_metas.size() != g.inputs.size())
    return "the graph takes " + std::to_string(g.inputs.size()) + " inputs instead of " +
           std::to_string(last.input_metas.size());
  for (size_t n = 0; n < std::min(last.ops.size(), g.nodes.size()); ++n)
    if (last.ops[n] != g.nodes[n].op)
      return "op " + std::to_string(n) + " is " + op_name(g.nodes[n].op) + " instead of " + op_name(last.ops[n]);
  if (last.ops.size() != g.nodes.size())
    return "the graph has " + std::to_string(g.nodes.size()) + " ops instead of " + std::to_string(last.ops.size());
  return "an attribute, an alias between inputs, requires_grad or the set of live outputs changed";
}

GraphResult CompiledFunction::run_graph(int graph_index, Graph& graph, uint64_t hash, const std::vector<Tensor>& inputs,
                                        bool differentiable) {
  auto t0 = std::chrono::steady_clock::now();
  stats_.last_call_ops += graph.num_ops();
  struct AddTime {
    double& total;
    std::chrono::steady_clock::time_point t0;
    ~AddTime() { total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count(); }
  } add_time{stats_.last_run_us, t0};
  std::vector<int64_t> rs = random_state(graph);
  std::vector<Entry>& entries = cache_[graph_index];
  const bool specialize = graph.is_symbolic() && !backend_->symbolic;
  std::vector<int64_t> binding;
  if (specialize) {
    binding.assign(graph.sym_sources.size(), 0);
    for (size_t k = 0; k < graph.sym_sources.size(); ++k) {
      const SymSource& s = graph.sym_sources[k];
      binding[k] = inputs[s.input].sizes()[static_cast<size_t>(s.dim)];
    }
  }
  CompileContext ctx{differentiable, options_, stats_};
  ctx.input_alias = input_alias_pattern(inputs);
  ctx.kernel_counts = kernel_counts_;
  for (Entry& e : entries)
    if (e.hash == hash && e.differentiable == differentiable && e.alias == ctx.input_alias &&
        same_structure(*e.structure, graph)) {
      ++stats_.cache_hits;
      latest_[graph_index] = e.graph;  // null for a symbolic graph
      if (!specialize) {
        remember_last(graph, inputs, e.run);
        return e.run(inputs, rs);
      }
      for (const auto& [b, run] : e.specs)
        if (b == binding) {
          remember_last(graph, inputs, run);
          return run(inputs, rs);
        }
      for (const auto& [b, run] : e.fallback_specs)
        if (b == binding) {
          remember_last(graph, inputs, run);
          return run(inputs, rs);
        }
      Runnable run = compile_binding(graph_index, graph, ctx, binding, e);
      remember_last(graph, inputs, run);
      return run(inputs, rs);
    }
  bool over_limit = static_cast<int>(entries.size()) >= options_.recompile_limit;
  std::string reason = entries.empty() ? "" : recompile_reason(entries, graph, inputs);
  if (over_limit && !fallback_) {
    fallback_ = true;
    stats_.fell_back_to_eager = true;
    std::cerr << "kiln::compile: recompile_limit (" << options_.recompile_limit << ") reached at graph " << graph_index
              << " of " << user_call_site() << ": " << reason << "; running this function eagerly from now on\n";
  }
  if (!entries.empty()) {
    ++stats_.recompiles;
    if (stats_.recompile_reasons.size() < 64) stats_.recompile_reasons.push_back(reason);
    log(Log::Recompiles, "graph " + std::to_string(graph_index) + ": " + reason);
  }
  ++stats_.graphs_compiled;
  stats_.guards.clear();
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    const Value& v = graph.values[graph.inputs[i]];
    stats_.guards.push_back(guard_str(i, v.meta, v.requires_grad, v.sym, graph.sym_nodes));
  }
  if (log_enabled(Log::Guards)) log(Log::Guards, join(stats_.guards));
  std::string text = graph.str("graph_" + std::to_string(graph_index));
  log(Log::Graph, text);
  if (stats_.graphs.size() < 64) {
    stats_.graphs.push_back(text);
    stats_.ops_per_graph.push_back(graph.num_ops());
  }
  auto structure = std::make_shared<const Graph>(graph);
  auto captured = graph.is_symbolic() ? nullptr : structure;
  auto tc = std::chrono::steady_clock::now();
  ++backend_compiles_[graph_index];
  Entry e{hash, backend_->compile(graph, ctx), {}, {}, false, captured, structure, ctx.input_alias, differentiable, {},
          {}};
  e.symbolic = graph.is_symbolic();
  latest_[graph_index] = captured;
  if (specialize) e.specs.emplace_back(binding, e.run);
  auto t1 = std::chrono::steady_clock::now();
  stats_.compile_ms += std::chrono::duration<double, std::milli>(t1 - tc).count();
  log(Log::Perf, "graph " + std::to_string(graph_index) + ": compiled " + std::to_string(graph.num_ops()) + " ops in " +
                     std::to_string(std::chrono::duration<double, std::milli>(t1 - tc).count()) + " ms");
  for (int v : graph.inputs) e.input_metas.push_back(graph.values[v].meta);
  for (const Node& n : graph.nodes) e.ops.push_back(n.op);
  Runnable run = e.run;
  if (!over_limit) entries.push_back(std::move(e));
  remember_last(graph, inputs, run);
  return run(inputs, rs);
}

// Note [Specialization limit]
// A symbolic graph on a backend that takes numbers compiles once per binding of its symbols
// (Note [Dynamic shapes]). Each such compile counts toward recompile_limit at its call site
// (graph index), with the graphs compiled there: otherwise sizes that change every step (the
// tokens per expert of a mixture of experts) would run the backend every step, which for
// "inductor" means the C++ compiler. Past the limit a new binding is compiled by "aot_eager"
// (eager's kernels behind the same AOT autograd, so the same results and gradients, and no
// code generation), with one warning per function. A backend that is "aot_eager" already has
// nothing cheaper to fall back to: its bindings are counted, and it goes on compiling them.
Runnable CompiledFunction::compile_binding(int graph_index, const Graph& graph, CompileContext& ctx,
                                           const std::vector<int64_t>& binding, Entry& e) {
  int& compiles = backend_compiles_[graph_index];
  const bool over = compiles >= options_.recompile_limit && backend_->name != "aot_eager";
  const BackendEntry* backend = backend_;
  if (over) {
    backend = find_backend("aot_eager");
    KILN_CHECK(backend, "internal: the backend \"aot_eager\" is not registered");
    ++stats_.limited_specializations;
    if (!stats_.specialization_limit_reached) {
      stats_.specialization_limit_reached = true;
      std::cerr << "kiln::compile: recompile_limit (" << options_.recompile_limit << ") reached at graph "
                << graph_index << " of " << user_call_site() << ": " << compiles
                << " graphs and specializations of its symbolic sizes compiled with backend \"" << backend_->name
                << "\"; new sizes run with backend \"aot_eager\" from now on (Note [Specialization limit])\n";
    }
    log(Log::Recompiles, "graph " + std::to_string(graph_index) +
                             ": a new binding of its symbols, past recompile_limit: compiled with aot_eager");
  } else {
    ++compiles;
    ++stats_.specializations;
    log(Log::Recompiles, "graph " + std::to_string(graph_index) + ": specialized for a new binding of its symbols");
  }
  auto tc = std::chrono::steady_clock::now();
  Runnable run = backend->compile(graph, ctx);
  stats_.compile_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tc).count();
  auto& specs = over ? e.fallback_specs : e.specs;
  if (specs.size() >= kSpecializations) specs.erase(specs.begin());
  specs.emplace_back(binding, run);
  return run;
}

std::shared_ptr<const Graph> CompiledFunction::expected_graph(int graph_index) {
  auto it = latest_.find(graph_index);
  return it == latest_.end() ? nullptr : it->second;
}

bool CompiledFunction::run_replayed(int graph_index, const Graph& expected, const Graph& values, uint64_t hash,
                                    const std::vector<Tensor>& inputs, const std::vector<int64_t>& random,
                                    GraphResult& result) {
  auto t0 = std::chrono::steady_clock::now();
  auto it = cache_.find(graph_index);
  if (it == cache_.end()) return false;
  for (Entry& e : it->second) {
    if (e.hash != hash || e.graph.get() != &expected || e.graph->outputs != values.outputs ||
        e.alias != input_alias_pattern(inputs))
      continue;  // Note [Confirmed hits]
    ++stats_.cache_hits;
    ++stats_.trace_replays;
    stats_.last_call_ops += expected.num_ops();
    latest_[graph_index] = e.graph;
    remember_last(*e.graph, inputs, e.run);
    result = e.run(inputs, random);
    stats_.last_run_us += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    return true;
  }
  return false;
}

void CompiledFunction::remember_last(const Graph& graph, const std::vector<Tensor>& inputs, const Runnable& run) {
  if (!options_.assume_pure) return;  // only run_pure reads it
  last_.inputs = inputs;
  last_.outputs = graph.outputs;
  last_.run = run;
  last_.bump.clear();
  last_.random = false;
  // The inputs the graph writes: MUTATES nodes write input 0 (copy_) or their first list
  // (foreach: as many tensors as the signature has lists), through views to their root; an op
  // with lists marked `T...!` (_fused_adam_) counts as writing all its inputs (its list count
  // depends on its attrs; a version bump too many is harmless).
  std::vector<int> root(graph.values.size());
  for (size_t v = 0; v < root.size(); ++v) root[v] = static_cast<int>(v);
  std::vector<bool> written(graph.values.size(), false);
  for (const Node& n : graph.nodes) {
    const OpInfo& info = op_info(n.op);
    last_.random = last_.random || info.has(RANDOM);
    if (info.has(VIEW) && !n.inputs.empty() && n.inputs[0] >= 0)
      for (int o : n.outputs) root[o] = root[n.inputs[0]];
    if (!info.has(MUTATES)) continue;
    std::string sig = info.signature;
    sig = sig.substr(0, sig.find(';'));
    size_t lists = 0;
    for (size_t p = sig.find("T..."); p != std::string::npos; p = sig.find("T...", p + 1)) ++lists;
    size_t count = sig.find("T...!") != std::string::npos ? n.inputs.size() : lists ? n.inputs.size() / lists : 1;
    for (size_t k = 0; k < count && k < n.inputs.size(); ++k)
      if (n.inputs[k] >= 0) written[root[n.inputs[k]]] = true;
  }
  for (size_t i = 0; i < graph.inputs.size(); ++i)
    if (written[graph.inputs[i]]) last_.bump.push_back(static_cast<int>(i));
}

uint64_t CompiledFunction::dynamic_dims(int graph_index, int slot, const Tensor& t) {
  if (options_.dynamic.has_value() && !*options_.dynamic) return 0;
  if (t.dim() == 0 || (t.requires_grad() && t.is_leaf())) return 0;  // parameters keep their sizes
  const uint64_t all = t.dim() >= 64 ? ~0ull : (1ull << t.dim()) - 1;
  if (options_.dynamic.value_or(false)) return all;
  std::vector<SeenInput>& slots = seen_[graph_index];
  if (slots.size() <= static_cast<size_t>(slot)) slots.resize(static_cast<size_t>(slot) + 1);
  SeenInput& s = slots[static_cast<size_t>(slot)];
  if (s.sizes.empty() && s.dynamic == 0) {
    s.sizes = Shape(t.sizes().begin(), t.sizes().end());  // first sight (a 0-d tensor never gets here)
    return 0;
  }
  if (static_cast<int64_t>(s.sizes.size()) == t.dim())
    for (size_t d = 0; d < s.sizes.size() && d < 64; ++d)
      if (s.sizes[d] != t.sizes()[d] && !(s.dynamic >> d & 1)) {
        s.dynamic |= 1ull << d;
        log(Log::Recompiles, "graph " + std::to_string(graph_index) + ": input " + std::to_string(slot) + " dim " +
                                 std::to_string(d) + " changed from " + std::to_string(s.sizes[d]) + " to " +
                                 std::to_string(t.sizes()[d]) + ": dynamic from now on");
      }
  return s.dynamic & all;
}

void CompiledFunction::on_break(int graph_index, const std::string& op, const std::string& reason) {
  ++breaks_total_;
  std::string site = user_call_site();
  KILN_CHECK(!options_.fullgraph, "compile(fullgraph=true): graph break at ", op, ": ", reason, " (graph ", graph_index,
             ", called from ", site, ")");
  if (stats_.breaks.size() < 64) stats_.breaks.push_back(GraphBreak{graph_index, op, reason, site});
  log(Log::Breaks, "graph " + std::to_string(graph_index) + " ends at " + op + ": " + reason + " (" + site + ")");
}

// ---- public API ----

CompiledState::CompiledState(CompileOptions options) : impl_(std::make_unique<CompiledFunction>(std::move(options))) {}
CompiledState::~CompiledState() = default;
void CompiledState::run(const std::function<void()>& body, const std::vector<Tensor>& args) { impl_->run(body, args); }
bool CompiledState::replay(const PureCall& call, std::vector<Tensor>& outs) { return impl_->replay(call, outs); }
void CompiledState::run_pure(const std::function<void()>& body, const PureCall& call) { impl_->run_pure(body, call); }
const CompileStats& CompiledState::stats() const { return impl_->stats(); }

const CompileStats& CompiledFunction::stats() {
  stats_.generated_kernel_runs = kernel_counts_->generated.load(std::memory_order_relaxed);
  stats_.kernel_fallbacks = kernel_counts_->fallbacks.load(std::memory_order_relaxed);
  stats_.background_runs = kernel_counts_->background_runs.load(std::memory_order_relaxed);
  stats_.cuda_graph_replays = kernel_counts_->cuda_graph_replays.load(std::memory_order_relaxed);
  stats_.background_compile_ms = kernel_counts_->background_us.load(std::memory_order_relaxed) / 1000.0;
  return stats_;
}
const CompileOptions& CompiledState::options() const { return impl_->options_; }

bool is_compiling() { return active_recording() != nullptr || current_record_layer() != nullptr; }

void reset() {
  std::lock_guard<std::mutex> lock(all_mutex());
  for (CompiledFunction* f : all_functions()) f->clear_cache();
  jit::reset_memory_cache();  // the next compile loads generated code from disk, as a new process would
  jit::reset_cuda_memory_cache();
}

std::string CompileStats::str() const {
  std::ostringstream os;
  os << "calls: " << calls << ", graphs compiled: " << graphs_compiled << ", recompiles: " << recompiles
     << ", cache hits: " << cache_hits << " (" << trace_replays << " replayed), graph breaks: " << breaks.size();
  if (specializations) os << ", specializations: " << specializations;
  if (limited_specializations) os << ", specializations past recompile_limit (aot_eager): " << limited_specializations;
  os << "\n";
  for (size_t i = 0; i < graphs.size(); ++i) {
    os << "graph " << i << " (" << ops_per_graph[i] << " ops";
    if (i < prim_ops_per_graph.size()) os << ", " << prim_ops_per_graph[i] << " after decomposition";
    if (i < saved_bytes.size())
      os << ", saves " << saved_bytes[i] << " bytes for backward (save-all: " << saveall_bytes[i] << ")";
    os << "):\n" << graphs[i];
  }
  for (const GraphBreak& b : breaks)
    os << "break after graph " << b.graph << " at " << b.op << ": " << b.reason << " (called from " << b.call_site
       << ")\n";
  for (const std::string& r : recompile_reasons) os << "recompiled: " << r << "\n";
  if (!guards.empty()) {
    os << "guards of the latest graph:\n";
    for (const std::string& g : guards) os << "  " << g << "\n";
  }
  if (fell_back_to_eager) os << "recompile_limit reached: runs eagerly\n";
  return os.str();
}

size_t GraphView::num_nodes() const { return g_->nodes.size(); }
std::string GraphView::op(size_t i) const { return op_name(g_->nodes.at(i).op); }
size_t GraphView::num_inputs() const { return g_->inputs.size(); }
size_t GraphView::num_outputs() const { return g_->outputs.size(); }
std::string GraphView::str() const { return g_->str(); }

}  // namespace kiln::compiler
