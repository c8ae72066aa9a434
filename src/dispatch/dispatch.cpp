#include "dispatch/dispatch.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <new>
#include <stdexcept>

#include "dispatch/autocast.h"
#include "kiln/autograd.h"

namespace kiln {

// Note [Op call path]
// Every op, eager or traced, enters through call_op. Modes (the tracer) see
// the call first and may handle it entirely; the autograd layer records a
// node and calls below itself with grad mode off; backend_call picks the
// kernel by device, or runs the decomposition when a device has no kernel.

namespace {
thread_local std::vector<DispatchMode*> tls_modes;
thread_local size_t tls_active_modes = 0;

thread_local RecordLayer* tls_record_layer = nullptr;
thread_local int tls_force_decomp = -1;
thread_local std::vector<uint32_t>* tls_op_counts = nullptr;

std::atomic<KernelTimer*> g_kernel_timer{nullptr};

// Runs f, timed by the kernel timer when it watches `dev`.
template <class F>
void timed(OpId op, Device dev, DType dtype, const Tensor* first, F&& f) {
  KernelTimer* t = g_kernel_timer.load(std::memory_order_relaxed);
  if (!t || t->device() != dev.type) return f();
  t->begin(op);
  f();
  t->end(op, dtype, first);
}

AutogradLayer g_autograd_layer = nullptr;
NeedsAutograd g_needs_autograd = nullptr;
RebaseHistory g_rebase_history = nullptr;

std::array<Backend*, kNumDeviceTypes>& backends() {
  static std::array<Backend*, kNumDeviceTypes> b{};
  return b;
}

// The device an op runs on: that of its tensor inputs (0-d CPU tensors, such
// as wrapped scalars, may accompany tensors of another device).
Device common_device(OpId op, std::span<const Tensor> inputs, bool& found) {
  Device dev = kCPU;
  found = false;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if (t.dim() == 0 && t.is_cpu()) continue;
    if (!found) {
      dev = t.device();
      found = true;
    } else {
      KILN_CHECK(t.device() == dev, op_name(op), ": expected all tensors to be on the same device, but found ", dev,
                 " and ", t.device());
    }
  }
  if (!found) {
    for (const Tensor& t : inputs)
      if (t.defined()) {
        dev = t.device();
        found = true;
        break;
      }
  }
  return dev;
}
}  // namespace

void push_dispatch_mode(DispatchMode* mode) {
  tls_modes.resize(tls_active_modes);
  tls_modes.push_back(mode);
  tls_active_modes = tls_modes.size();
}
void pop_dispatch_mode() {
  KILN_CHECK(tls_active_modes > 0, "pop_dispatch_mode: no mode is active");
  tls_modes.resize(tls_active_modes - 1);
  tls_active_modes = tls_modes.size();
}
ExcludeModeGuard::ExcludeModeGuard() : saved_(tls_active_modes) {
  if (tls_active_modes > 0) --tls_active_modes;
}
ExcludeModeGuard::~ExcludeModeGuard() { tls_active_modes = saved_; }
ExcludeAllModesGuard::ExcludeAllModesGuard() : saved_(tls_active_modes) { tls_active_modes = 0; }
ExcludeAllModesGuard::~ExcludeAllModesGuard() { tls_active_modes = saved_; }

RecordLayer* current_record_layer() { return tls_record_layer; }
RecordLayerGuard::RecordLayerGuard(RecordLayer* layer) : prev_(tls_record_layer) { tls_record_layer = layer; }
RecordLayerGuard::~RecordLayerGuard() { tls_record_layer = prev_; }
void set_force_decomposition(int op) { tls_force_decomp = op; }
int force_decomposition() { return tls_force_decomp; }
void set_op_call_counts(std::vector<uint32_t>* counts) { tls_op_counts = counts; }
void set_kernel_timer(KernelTimer* timer) { g_kernel_timer.store(timer); }
KernelTimer* kernel_timer() { return g_kernel_timer.load(std::memory_order_relaxed); }

namespace {
thread_local bool tls_non_blocking = false;
}
bool non_blocking_copy() { return tls_non_blocking; }
NonBlockingCopyGuard::NonBlockingCopyGuard(bool on) : prev_(tls_non_blocking) { tls_non_blocking = on; }
NonBlockingCopyGuard::~NonBlockingCopyGuard() { tls_non_blocking = prev_; }

void set_autograd_layer(AutogradLayer layer, NeedsAutograd needs, RebaseHistory rebase) {
  g_autograd_layer = layer;
  g_needs_autograd = needs;
  g_rebase_history = rebase;
}

void register_backend(DeviceType type, Backend* backend) { backends()[static_cast<int>(type)] = backend; }
Backend* get_backend(DeviceType type) { return backends()[static_cast<int>(type)]; }

std::vector<Tensor> call_op(OpId op, std::vector<Tensor> inputs, Attrs attrs) {
  if (detail::tls_autocast_on && detail::autocast_inputs(op, inputs, attrs)) {  // Note [Autocast]
    detail::AutocastExcludeGuard body;
    return call_op(op, std::move(inputs), std::move(attrs));
  }
  if (tls_op_counts) ++(*tls_op_counts)[static_cast<size_t>(op)];
  if (tls_active_modes > 0) {
    DispatchMode* mode = tls_modes[tls_active_modes - 1];
    ExcludeModeGuard guard;
    return mode->call(op, inputs, attrs);
  }
  if (g_needs_autograd && g_needs_autograd(inputs)) return g_autograd_layer(op, inputs, attrs);
  return backend_call(op, inputs, attrs);
}

namespace {
thread_local bool tls_recording_differentiable = false;
}  // namespace
bool recording_differentiable() { return tls_recording_differentiable; }
DifferentiableScope::DifferentiableScope(bool on) : prev_(tls_recording_differentiable) {
  tls_recording_differentiable = on;
}
DifferentiableScope::~DifferentiableScope() { tls_recording_differentiable = prev_; }

thread_local const DetachedInputs* tls_detached_inputs = nullptr;
const DetachedInputs* recording_detached_inputs() { return tls_detached_inputs; }
DetachedInputsScope::DetachedInputsScope(const DetachedInputs* d) : prev_(tls_detached_inputs) {
  tls_detached_inputs = d;
}
DetachedInputsScope::~DetachedInputsScope() { tls_detached_inputs = prev_; }

Tensor call_op1(OpId op, std::vector<Tensor> inputs, Attrs attrs) {
  auto outs = call_op(op, std::move(inputs), std::move(attrs));
  KILN_CHECK(!outs.empty(), "internal: ", op_name(op), " returned no outputs");
  return std::move(outs[0]);
}

// Note [Cheap dispatch]
// An eager op on a tiny tensor should cost well under a microsecond, which a
// few heap allocations already exceed. So the path avoids them where a fixed
// buffer does the job: sizes and strides are small-buffer vectors (Shape),
// braced input lists reach backend_call without being copied into a vector
// when no mode or autograd needs one, views share their base's version
// counter instead of allocating one first, and what a node or graph keeps
// (attrs, metas, input lists) is moved rather than copied.
std::vector<Tensor> call_op(OpId op, std::initializer_list<Tensor> inputs, Attrs attrs) {
  std::span<const Tensor> ins(inputs.begin(), inputs.size());
  if (tls_active_modes > 0 || detail::tls_autocast_on || (g_needs_autograd && g_needs_autograd(ins)))
    return call_op(op, std::vector<Tensor>(inputs), std::move(attrs));
  if (tls_op_counts) ++(*tls_op_counts)[static_cast<size_t>(op)];
  return backend_call(op, ins, attrs);
}

Tensor call_op1(OpId op, std::initializer_list<Tensor> inputs, Attrs attrs) {
  auto outs = call_op(op, inputs, std::move(attrs));
  KILN_CHECK(!outs.empty(), "internal: ", op_name(op), " returned no outputs");
  return std::move(outs[0]);
}

namespace {
void copy_into_impl(const Tensor& dst, const Tensor& src);
void check_no_internal_overlap(const Tensor& self, OpId op);  // Note [Overlapping writes]
void check_no_partial_overlap(const Tensor& self, const Tensor& input, OpId op);

std::vector<Tensor> meta_outputs(const std::vector<TensorMeta>& metas) {
  std::vector<Tensor> outs;
  outs.reserve(metas.size());
  for (const TensorMeta& m : metas) {
    // A meta that reports strides (reshape-like ops that may alias) gives eager's layout.
    bool strided = m.strides.size() == m.sizes.size() && !m.sizes.empty();
    Tensor t = make_meta_tensor(m.sizes, strided ? IntArrayRef(m.strides) : IntArrayRef(contiguous_strides(m.sizes)),
                                m.dtype, m.device);
    if (strided) t.unsafe_impl()->storage_offset = m.storage_offset;
    outs.push_back(std::move(t));
  }
  return outs;
}

// backend_call while a record layer is active: the op becomes a graph node
// where a kernel would have run (Note [Record layer]). Returns false when the
// op is to run as usual: by decomposition, or eagerly after a graph break.
// A composite whose kernel writes some of its inputs in place: batch_norm in training with
// running statistics. Recorded, it is decomposed wherever it has a kernel, so that its writes
// are copy_ nodes of the graph (Note [Writes are ops]) rather than hidden in one node that a
// pass could drop, reorder or recompute.
bool kernel_writes_inputs(const OpCall& call) {
  return call.op == OpId::batch_norm && call.attrs.b(0) && call.in(1).defined();
}

// Note [Kernels worth keeping]
// A composite whose kernel does in one pass what its decomposition splits in two: _addmm_bias,
// where cuBLASLt adds the bias in the GEMM's epilogue (Note [Bias epilogue]). Lowered to prims
// for inductor it would become a GEMM and a loop re-reading its output, so where the call's
// device has the kernel it stays one node, an extern call of the compiled graph (its VJP
// still gives the backward). Without the kernel (the CPU) it decomposes as before.
bool kernel_worth_keeping(const OpInfo& info, const OpCall& call) {
  // _batch_norm_backward on the CPU: its kernel takes a channel at a time while the channel is
  // in cache; the decomposition's generated reduction over NCHW's middle dim made mobilenet_v2's
  // compiled training step ~8% slower on 2 cores (Note [Batch norm backward decomposed]).
  if (call.op == OpId::_batch_norm_backward) return call.inputs.size() > 1 && call.in(1).device().is_cpu();
  if (call.op != OpId::_addmm_bias || call.inputs.size() < 2 || !call.in(1).defined()) return false;
  return info.kernels[static_cast<int>(call.in(1).device().type)] != nullptr;
}

bool record_call(RecordLayer* rec, const OpInfo& info, const OpCall& call, std::vector<Tensor>& outs) {
  if (info.kind == OpKind::Composite && info.decomp &&
      ((rec->decompose(call.op) && !kernel_worth_keeping(info, call)) || kernel_writes_inputs(call))) {
    std::vector<TensorMeta> metas;
    if (info.meta && !info.has(DATA_DEPENDENT)) metas = info.meta(call);  // the composite's own errors first
    outs = info.decomp(call);
    // Note [Decomposed layouts]: an op that is not a view gives a fresh contiguous tensor
    // eagerly (its meta reports no strides); a decomposition that ends in a view (repeat:
    // reshape of an expand) must give the same layout, or a later view that eager allows fails.
    if (!info.has(VIEW))
      for (size_t k = 0; k < outs.size() && k < metas.size(); ++k) {
        const bool strided = metas[k].strides.size() == metas[k].sizes.size() && !metas[k].sizes.empty();
        if (!strided && outs[k].defined() && !outs[k].is_contiguous()) outs[k] = call_op1(OpId::clone, {outs[k]}, {});
      }
    // An op that is not a view gives a tensor of its own eagerly; a decomposition that hands
    // back an input or a view of one (roll of a 0-d tensor) must too, or a later write to the
    // input would show through the result.
    if (!info.has(VIEW) && !info.has(MUTATES))
      for (size_t k = 0; k < outs.size() && k < metas.size(); ++k) {
        Tensor& o = outs[k];
        const bool may_alias = metas[k].strides.size() == metas[k].sizes.size() && !metas[k].sizes.empty();
        if (!o.defined() || may_alias) continue;
        const TensorImpl* oi = o.unsafe_impl();
        const TensorImpl* root = oi->view_base ? oi->view_base.get() : oi;
        for (const Tensor& in : call.inputs) {
          if (!in.defined()) continue;
          const TensorImpl* ii = in.unsafe_impl();
          if (root == (ii->view_base ? ii->view_base.get() : ii)) {
            o = call_op1(OpId::clone, {o}, {});
            break;
          }
        }
      }
    return true;
  }
  if ((info.has(VIEW) || call.op == OpId::copy_) && info.meta) {
    if (rec->replay(call.op, call.inputs, call.attrs, outs)) return true;
    std::vector<TensorMeta> metas = info.meta(call);
    outs = rec->record(call.op, call.inputs, call.attrs, metas);
    return true;
  }
  bool found = false;
  Device dev = common_device(call.op, call.inputs, found);
  std::vector<TensorMeta> metas;
  if (!found && info.meta && !info.has(DATA_DEPENDENT)) {
    metas = info.meta(call);  // a factory: the device is an attr
    if (!metas.empty()) dev = metas[0].device;
  }
  bool has_kernel = info.kernels[static_cast<int>(dev.type)] != nullptr;
  // Note [Composites with their own derivative]
  // A composite without a kernel runs by its decomposition. Where it has a VJP of its own, that
  // VJP is eager's derivative, and it can differ from the derivative of the decomposition at
  // special points (std of equal values: 0, where sqrt's derivative gives 0 * inf = NaN; median
  // over ties: shared evenly, where the decomposition's selection picks one element). So it is
  // recorded as one node, as PyTorch's AOTAutograd keeps an op with a derivatives.yaml entry:
  // the joint graph differentiates it with its VJP, and a graph that must be made of prims is
  // decomposed afterwards (decompose() above); the interpreter runs it by its decomposition, as
  // eager does. Only pointwise ops and reductions: a decomposition of another composite may
  // write an input the op's flags do not name (batch_norm's running statistics), which only a
  // functionalized decomposition turns into the graph's write-backs. embedding too: its
  // decomposition (index) reads only its inputs, and it gives the padding row a gradient that
  // eager's VJP (and PyTorch's embedding_backward) leaves at zero. _batch_norm_training too: it
  // writes nothing, and its VJP is the fused backward (Note [Batch norm's training node]).
  const bool own_vjp = info.kind == OpKind::Composite && info.vjp && info.meta && !info.has(MUTATES) &&
                       (info.has(POINTWISE) || info.has(REDUCTION) || call.op == OpId::embedding ||
                        call.op == OpId::_batch_norm_training);
  if (!has_kernel && info.decomp && !info.has(DATA_DEPENDENT) && !own_vjp) return false;
  if (info.has(DATA_DEPENDENT) || !info.meta) {
    rec->graph_break(
        call.op, call.inputs,
        info.has(DATA_DEPENDENT) ? "its output's shape depends on the input's values" : "it has no meta function");
    return false;
  }
  KILN_CHECK(has_kernel || (own_vjp && info.decomp), info.name, ": not supported yet on ", dev,
             " (no kernel and no decomposition)");
  if (rec->replay(call.op, call.inputs, call.attrs, outs)) return true;
  if (metas.empty()) metas = info.meta(call);
  outs = rec->record(call.op, call.inputs, call.attrs, metas);
  return true;
}
}  // namespace

namespace {
// Note [Host memory failures]
// A kernel or decomposition that cannot get host memory for its own bookkeeping (the source
// indices of an interpolation to 2^40 elements, a workspace: std::vector throws std::bad_alloc
// or std::length_error) raises kiln::Error naming the op and its inputs' sizes, as the allocator
// does for a tensor, never a bare std::bad_alloc. The innermost op converts it; ops above it see
// a kiln::Error and let it pass.
[[noreturn]] void fail_host_memory(const OpInfo& info, std::span<const Tensor> inputs) {
  std::string sizes;
  for (const Tensor& t : inputs) {
    if (!sizes.empty()) sizes += ", ";
    sizes += t.defined() ? shape_str(t.sizes()) : "None";
  }
  KILN_FAIL(info.name, ": not enough memory for the result or the work it needs (inputs of sizes ", sizes,
            "): the requested output is too large");
}
// f(), with a host memory failure inside it raised as above.
template <class F>
auto with_host_memory_errors(const OpInfo& info, std::span<const Tensor> inputs, const F& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    fail_host_memory(info, inputs);
  } catch (const std::length_error&) {
    fail_host_memory(info, inputs);
  }
}

// kernel(call, outs), timed, with host allocation failures named (backend_call, kernel_into).
void run_kernel(const OpInfo& info, KernelFn kernel, const OpCall& call, Device dev, std::vector<Tensor>& outs) {
  const Tensor* first = !call.inputs.empty() && call.inputs[0].defined() ? &call.inputs[0] : nullptr;
  with_host_memory_errors(info, call.inputs, [&] {
    timed(call.op, dev, first ? first->dtype() : (outs.empty() ? kFloat32 : outs[0].dtype()), first,
          [&] { kernel(call, outs); });
  });
}
}  // namespace

bool kernel_into(OpId op, Device dev, std::span<const Tensor> inputs, const Attrs& attrs, std::vector<Tensor>& outs) {
  const OpInfo& info = op_info(op);
  KernelFn kernel = info.kernels[static_cast<int>(dev.type)];
  if (!kernel) return false;
  run_kernel(info, kernel, OpCall{op, inputs, attrs}, dev, outs);
  return true;
}

std::vector<Tensor> backend_call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs) {
  const OpInfo& info = op_info(op);
  OpCall call{op, inputs, attrs};
  if (op == OpId::copy_) {
    KILN_CHECK(inputs.size() == 2, "internal: copy_ takes (self, src)");
    // Note [Overlapping writes]: before the record layer, so a traced copy_ raises as eager's.
    check_no_internal_overlap(inputs[0], OpId::copy_);
    check_no_partial_overlap(inputs[0], inputs[1], OpId::copy_);
  }
  if (RecordLayer* rec = tls_record_layer) {
    std::vector<Tensor> outs;
    if (static_cast<int>(op) != tls_force_decomp && record_call(rec, info, call, outs)) return outs;
  }
  if (op == OpId::copy_) {
    copy_into_impl(inputs[0], inputs[1]);
    return {};
  }
  if (info.has(VIEW) && info.meta) {
    std::vector<TensorMeta> metas = info.meta(call);
    std::vector<Tensor> outs;
    outs.reserve(metas.size());
    for (const TensorMeta& m : metas) outs.push_back(make_view(inputs[0], m.sizes, m.strides, m.storage_offset));
    return outs;
  }
  bool found = false;
  Device dev = common_device(op, inputs, found);
  std::vector<TensorMeta> metas;
  if (!found && info.meta) {
    metas = info.meta(call);
    if (!metas.empty()) dev = metas[0].device;
  }
  if (dev.type == DeviceType::Meta && !(static_cast<int>(op) == tls_force_decomp && info.decomp)) {
    // Tensors with sizes and no storage: the meta function is the kernel.
    KILN_CHECK(!info.has(DATA_DEPENDENT), info.name,
               ": not supported on the meta device: the output's shape depends on the input's values");
    if (info.meta) return meta_outputs(metas.empty() ? info.meta(call) : metas);
  }
  KernelFn kernel = info.kernels[static_cast<int>(dev.type)];
  if (static_cast<int>(op) == tls_force_decomp && info.decomp) kernel = nullptr;
  if (kernel) {
    std::vector<Tensor> outs;
    if (!info.has(DATA_DEPENDENT)) {
      KILN_CHECK(info.meta, "internal: ", info.name, " has a kernel but no meta function");
      if (metas.empty()) metas = info.meta(call);
      outs.reserve(metas.size());
      for (const TensorMeta& m : metas) outs.push_back(make_tensor(m.sizes, m.dtype, m.device));
    }
    run_kernel(info, kernel, call, dev, outs);
    return outs;
  }
  if (info.decomp) {
    // Validate with the meta function first, so a composite gives its own error.
    if (info.meta && metas.empty() && !info.has(DATA_DEPENDENT)) (void)info.meta(call);
    SymAttrScope sizes_at_hand(attrs);
    return with_host_memory_errors(info, inputs, [&] { return info.decomp(call); });
  }
  // A device without a backend was left out of the build (the CUDA backend's no_cuda.cpp).
  KILN_CHECK(get_backend(dev.type) || dev.type == DeviceType::Meta, info.name, ": ", dev, " is not available: ",
             dev.type == DeviceType::CUDA ? "CUDA: kiln was built without CUDA (-DKILN_CUDA=ON)" : "no backend");
  KILN_FAIL(info.name, ": not supported yet on ", dev, " (no kernel and no decomposition)");
}

namespace {
// Note [Overlapping writes]
// A tensor with a stride-0 dim of size > 1 (an expand) has elements that share
// memory: an in-place write to it would race with itself and give an answer
// that depends on the order of the loop. Like PyTorch's assert_no_internal_overlap,
// every write refuses it once, here: the in-place path and copy_, not each op.
// Other overlapping layouts (as_strided windows) are refused too, where PyTorch leaves the
// result undefined (a compiled graph wrote each element once, eager once per window): the
// dims, by stride, each step past all the smaller ones reach cannot overlap; others are
// checked element by element (as_strided is rare).
enum class Overlap { No, Expanded, Strided };
Overlap internal_overlap(const Tensor& self) {
  if (!self.defined() || self.numel() <= 1 || self.is_contiguous()) return Overlap::No;
  IntArrayRef sizes = self.sizes(), strides = self.strides();
  std::array<std::pair<int64_t, int64_t>, 16> dims_at;  // (|stride|, size) of each dim of size > 1
  size_t n_dims = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] <= 1) continue;
    if (strides[d] == 0) return Overlap::Expanded;
    if (n_dims == dims_at.size()) return Overlap::No;  // too many dims to tell cheaply
    dims_at[n_dims++] = {strides[d] < 0 ? -strides[d] : strides[d], sizes[d]};
  }
  std::span<std::pair<int64_t, int64_t>> dims(dims_at.data(), n_dims);
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the largest offset the smaller dims make
  bool fast = true;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) fast = false;
    reach += stride * (size - 1);
  }
  if (fast || self.numel() > (int64_t{1} << 22)) return Overlap::No;
  std::vector<int64_t> offsets{0};
  for (const auto& [stride, size] : dims) {
    const size_t n = offsets.size();
    for (int64_t k = 1; k < size; ++k)
      for (size_t j = 0; j < n; ++j) offsets.push_back(offsets[j] + k * stride);
  }
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) != offsets.end() ? Overlap::Strided : Overlap::No;
}
void check_no_internal_overlap(const Tensor& self, OpId op) {
  const Overlap overlap = internal_overlap(self);
  if (overlap == Overlap::No) [[likely]]
    return;
  // The name the user called: copy_ and fill_ are the in-place forms of to and full(_like).
  std::string name = op == OpId::to || op == OpId::copy_         ? "copy_"
                     : op == OpId::full || op == OpId::full_like ? "fill_"
                                                                 : std::string(op_name(op)) + "_";
  KILN_FAIL(name,
            ": unsupported operation: more than one element of the written-to tensor refers to a single memory "
            "location (",
            overlap == Overlap::Expanded ? "it has a stride-0, expanded dim" : "its strides overlap", ": shape ",
            shape_str(self.sizes()), ", strides ", shape_str(self.strides()),
            "); clone() the tensor before writing to it");
}

// An input that shares some of the written tensor's memory but is not the same elements
// (x.copy_(x.t())) is refused too, as PyTorch's assert_no_partial_overlap: eager's kernel would
// read elements it already wrote, a compiled graph reads them all first. Like PyTorch's, the
// test compares the memory ranges of tensors whose elements are dense; others are compared
// element by element where that is cheap (PyTorch lets them pass).
bool non_overlapping_and_dense(const Tensor& t) {
  std::array<std::pair<int64_t, int64_t>, 16> dims_at;  // (stride, size) of each dim of size > 1
  size_t n_dims = 0;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.sizes()[d] == 1) continue;
    if (t.strides()[d] <= 0 || n_dims == dims_at.size()) return false;
    dims_at[n_dims++] = {t.strides()[d], t.sizes()[d]};
  }
  std::sort(dims_at.begin(), dims_at.begin() + static_cast<std::ptrdiff_t>(n_dims));
  int64_t expected = 1;
  for (size_t k = 0; k < n_dims; ++k) {
    if (dims_at[k].first != expected) return false;
    expected *= dims_at[k].second;
  }
  return true;
}
// The storage offsets (in elements) of t's elements, sorted.
std::vector<int64_t> element_offsets(const Tensor& t) {
  std::vector<int64_t> offsets{t.storage_offset()};
  for (int64_t d = 0; d < t.dim(); ++d) {
    const size_t n = offsets.size();
    for (int64_t k = 1; k < t.sizes()[d]; ++k)
      for (size_t j = 0; j < n; ++j) offsets.push_back(offsets[j] + k * t.strides()[d]);
  }
  std::sort(offsets.begin(), offsets.end());
  return offsets;
}
// Beyond dense tensors, up to 4M elements in all and of one element size, the elements
// themselves are compared: `v.copy_(x)` with v a transposed alias of a strided x reads elements
// it wrote (fuzz seed 17026075), where `x[::2].copy_(x[1::2])` touches none twice.
void check_no_partial_overlap(const Tensor& self, const Tensor& input, OpId op) {
  if (!self.defined() || !input.defined() || self.is_same(input) || !self.is_alias_of(input)) [[likely]]
    return;
  if (self.numel() == 0 || input.numel() == 0) return;
  if (!non_overlapping_and_dense(self) || !non_overlapping_and_dense(input)) {
    if (itemsize(self.dtype()) != itemsize(input.dtype()) || self.numel() + input.numel() > (int64_t{1} << 22))
      return;
    if (self.sizes() == input.sizes() && self.strides() == input.strides() &&
        self.storage_offset() == input.storage_offset())
      return;  // the same elements
    const std::vector<int64_t> a = element_offsets(self), b = element_offsets(input);
    size_t i = 0, j = 0;
    bool shared = false;
    while (i < a.size() && j < b.size() && !shared) {
      shared = a[i] == b[j];
      if (a[i] < b[j])
        ++i;
      else
        ++j;
    }
    if (!shared) return;
  } else {
    const int64_t a = self.storage_offset() * static_cast<int64_t>(itemsize(self.dtype()));
    const int64_t a_end = a + self.numel() * static_cast<int64_t>(itemsize(self.dtype()));
    const int64_t b = input.storage_offset() * static_cast<int64_t>(itemsize(input.dtype()));
    const int64_t b_end = b + input.numel() * static_cast<int64_t>(itemsize(input.dtype()));
    const bool full = a == b && a_end == b_end && self.strides() == input.strides();
    if (full || a >= b_end || b >= a_end) return;
  }
  KILN_FAIL(op == OpId::copy_ || op == OpId::to ? std::string("copy_") : std::string(op_name(op)) + "_",
            ": unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
            "memory location (shape ",
            shape_str(input.sizes()), ", strides ", shape_str(input.strides()), " read, shape ",
            shape_str(self.sizes()), ", strides ", shape_str(self.strides()), " written); clone() the input first");
}

bool shares_storage_but_differs(const Tensor& self, const Tensor& other) {
  if (!other.defined() || other.is_same(self) || !other.has_storage() || !self.has_storage()) return false;
  if (!self.is_alias_of(other)) return false;
  return !(other.sizes() == self.sizes() && other.strides() == self.strides() &&
           other.storage_offset() == self.storage_offset());
}
}  // namespace

namespace {
// Note [In-place on a view]
// With autograd, writing r into a view V of base B changes B too (PyTorch's CopySlices). As
// ops: B's new value is B's old one with V's elements replaced by r, an index_put of r at the
// positions V covers (a copy of B's old value, so no saved tensor is overwritten), and V
// becomes a view of that. B takes over the new history; so does V. Views of B made before
// the write keep their old history, as they keep their old values' meaning in the graph.
Tensor& inplace_on_view(Tensor& self, const Tensor& r, const char* name) {
  Tensor base = self._base();
  // A view that requires grad of a base that does not is a view of a detach()ed alias made to
  // require grad: its history is not its base's (kiln's views record storage, not autograd, bases).
  KILN_CHECK(!self.requires_grad() || base.requires_grad(), name,
             "_: not supported yet: an in-place op on a view of a detach()ed tensor that requires grad; clone() it "
             "first");
  KILN_CHECK(base.is_contiguous() && base.storage_offset() == 0, name,
             "_: not supported yet: autograd through an in-place op on a view of a non-contiguous tensor (shape ",
             shape_str(base.sizes()), "); clone() the base first");
  // The storage position of each of the view's elements: offset + sum_d i_d * stride_d, built by
  // broadcasting one arange per dim (the view's size, not the base's).
  Tensor pos = call_op1(OpId::full, std::vector<Tensor>{},
                        {std::vector<int64_t>{}, Scalar(static_cast<int64_t>(self.storage_offset())), kInt64,
                         base.device()});
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.sizes()[d] == 1) continue;  // adds nothing (its stride may be anything, even 0)
    // An empty dim leaves no positions at all (its stride may be 0 too: step 1 then).
    const int64_t n = self.sizes()[d], step = n == 0 ? 1 : self.strides()[d];
    std::vector<int64_t> shape(static_cast<size_t>(self.dim()), 1);
    shape[static_cast<size_t>(d)] = n;
    Tensor along = call_op1(OpId::arange, std::vector<Tensor>{},
                            {Scalar(int64_t(0)), Scalar(n * step), Scalar(step), kInt64, base.device()});
    pos = call_op1(OpId::add, {pos, call_op1(OpId::reshape, {along}, {shape})}, {Scalar(int64_t(1))});
  }
  Tensor flat_pos = call_op1(OpId::reshape, {pos}, {std::vector<int64_t>{-1}});
  Tensor old = call_op1(OpId::reshape, {call_op1(OpId::clone, {base}, {})}, {std::vector<int64_t>{-1}});
  Tensor vals = call_op1(OpId::reshape, {call_op1(OpId::to, {r}, {self.dtype()})}, {std::vector<int64_t>{-1}});
  Tensor updated = call_op1(OpId::reshape, {call_op1(OpId::index_put, {old, vals, flat_pos}, {false})},
                            {base.sizes().vec()});
  {
    NoGradGuard no_grad;
    DifferentiableScope followed(true);  // Note [No-grad nodes]
    copy_into(self, r);
  }
  self.unsafe_impl()->bump_version();
  g_rebase_history(base, updated);
  Tensor view = call_op1(OpId::as_strided, {updated},
                         {self.sizes().vec(), self.strides().vec(), static_cast<int64_t>(self.storage_offset())});
  g_rebase_history(self, view);
  return self;
}
}  // namespace

Tensor& call_op_inplace(Tensor& self, OpId op, std::vector<Tensor> inputs, Attrs attrs) {
  if (detail::tls_autocast_on) {  // in-place ops keep self's dtype: never autocast (Note [Autocast])
    detail::AutocastExcludeGuard no_autocast;
    return call_op_inplace(self, op, std::move(inputs), std::move(attrs));
  }
  if (tls_op_counts) ++(*tls_op_counts)[static_cast<size_t>(op)];
  const OpInfo& info = op_info(op);
  const char* name = info.name;
  check_no_internal_overlap(self, op);  // Note [Overlapping writes]
  for (const Tensor& t : inputs) check_no_partial_overlap(self, t, op);
  if (tls_active_modes == 0 && g_needs_autograd && g_needs_autograd(inputs)) {
    KILN_CHECK(!(self.is_leaf() && self.requires_grad()), name,
               "_: a leaf tensor that requires grad is being used in an in-place operation; "
               "wrap it in kiln::NoGradGuard or clone() it first");
    KILN_CHECK(!self.is_view() || !(self._base().is_leaf() && self._base().requires_grad()), name,
               "_: a view of a leaf tensor that requires grad is being used in an in-place operation");
    // The node may save self's old value, which is about to be overwritten:
    // give it a copy of its own so the version check stays meaningful.
    if (static_cast<uint8_t>(info.save) & static_cast<uint8_t>(SaveMask::SaveIn))
      for (Tensor& t : inputs)
        if (t.is_same(self)) t = self.clone();
    Tensor r = call_op1(op, std::move(inputs), std::move(attrs));
    KILN_CHECK(r.sizes() == self.sizes(), name, "_: output with shape ", shape_str(self.sizes()),
               " doesn't match the broadcast shape ", shape_str(r.sizes()));
    KILN_CHECK(can_cast(r.dtype(), self.dtype()), name, "_: result type ", r.dtype(),
               " can't be cast to the desired output type ", self.dtype());
    if (self.is_view()) return inplace_on_view(self, r, name);
    {
      NoGradGuard no_grad;
      DifferentiableScope followed(true);  // Note [No-grad nodes]
      copy_into(self, r);
    }
    self.unsafe_impl()->bump_version();
    // self now holds r's value: it takes over r's place in the graph.
    g_rebase_history(self, r);
    return self;
  }
  OpCall call{op, inputs, attrs};
  std::vector<TensorMeta> metas;
  if (info.meta && !info.has(DATA_DEPENDENT)) {
    metas = info.meta(call);
    KILN_CHECK(metas.size() == 1, name, "_: in-place form needs an op with one output");
    KILN_CHECK(metas[0].sizes == self.sizes(), name, "_: output with shape ", shape_str(self.sizes()),
               " doesn't match the broadcast shape ", shape_str(metas[0].sizes));
    KILN_CHECK(can_cast(metas[0].dtype, self.dtype()), name, "_: result type ", metas[0].dtype,
               " can't be cast to the desired output type ", self.dtype());
  }
  bool overlap = false;
  for (const Tensor& t : inputs) overlap = overlap || shares_storage_but_differs(self, t);
  bool found = false;
  Device dev = common_device(op, inputs, found);
  KernelFn kernel = info.kernels[static_cast<int>(dev.type)];
  if (tls_active_modes == 0 && !tls_record_layer && kernel && info.has(POINTWISE) && !metas.empty() &&
      metas[0].dtype == self.dtype() && !overlap && self.has_storage()) {
    std::vector<Tensor> outs{self};
    kernel(call, outs);
  } else {
    Tensor r = call_op1(op, std::move(inputs), std::move(attrs));
    copy_into(self, r);
  }
  self.unsafe_impl()->bump_version();
  return self;
}

bool kernel_into(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, std::vector<Tensor>& outs) {
  const OpInfo& info = op_info(op);
  if (!info.meta || info.has(DATA_DEPENDENT) || info.has(VIEW)) return false;
  bool found = false;
  const Device dev = common_device(op, inputs, found);
  KernelFn kernel = info.kernels[static_cast<int>(dev.type)];
  if (!kernel) return false;
  OpCall call{op, inputs, attrs};
  const std::vector<TensorMeta> metas = info.meta(call);
  if (metas.size() != outs.size()) return false;
  for (size_t k = 0; k < metas.size(); ++k) {
    const Tensor& o = outs[k];
    if (!o.defined() || !o.has_storage() || o.dtype() != metas[k].dtype || o.device() != metas[k].device ||
        !(o.sizes() == IntArrayRef(metas[k].sizes)) || !o.is_contiguous())
      return false;
  }
  const Tensor* first = !inputs.empty() && inputs[0].defined() ? &inputs[0] : nullptr;
  timed(op, dev, first ? first->dtype() : outs[0].dtype(), first, [&] { kernel(call, outs); });
  return true;
}

void copy_into(const Tensor& dst, const Tensor& src) {
  KILN_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  Tensor args[2] = {dst, src};
  (void)backend_call(OpId::copy_, args, Attrs{});
}

namespace {
void copy_into_impl(const Tensor& dst, const Tensor& src) {
  KILN_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  Tensor s = src;  // dst was checked for internal overlap in backend_call
  if (s.sizes() != dst.sizes()) {
    // Broadcast src to dst's shape (same rules as expand).
    int64_t nd = dst.dim(), ns = s.dim();
    KILN_CHECK(ns <= nd, "copy_: source of shape ", shape_str(s.sizes()), " can't be broadcast to ",
               shape_str(dst.sizes()));
    Shape strides(nd, 0);
    for (int64_t i = 0; i < ns; ++i) {
      int64_t di = nd - ns + i;
      int64_t sz = s.sizes()[i];
      KILN_CHECK(sz == dst.sizes()[di] || sz == 1, "copy_: source of shape ", shape_str(s.sizes()),
                 " can't be broadcast to ", shape_str(dst.sizes()));
      strides[di] = sz == 1 ? 0 : s.strides()[i];
    }
    s = make_view(s, dst.sizes(), strides, s.storage_offset());
  }
  if (dst.numel() == 0) return;
  Device dd = dst.device(), sd = s.device();
  if (dd.type == DeviceType::Meta || sd.type == DeviceType::Meta) {
    KILN_CHECK(dd.type == DeviceType::Meta, "copy_: cannot copy out of a meta tensor: it has no data");
    return;
  }
  Backend* b = get_backend(dd.is_cpu() ? sd.type : dd.type);
  KILN_CHECK(b, "copy_: no backend for ", (dd.is_cpu() ? sd : dd));
  KILN_CHECK(dd.is_cpu() || sd.is_cpu() || dd.type == sd.type, "copy_: not supported yet: copy from ", sd, " to ", dd);
  timed(OpId::copy_, dd.is_cpu() ? sd : dd, dst.dtype(), &s, [&] { b->copy(dst, s); });
}
}  // namespace

}  // namespace kiln
