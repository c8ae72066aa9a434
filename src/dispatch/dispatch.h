// The op call path (Note [Op call path]):
//   call_op → top DispatchMode (the tracer, while compiling)
//           → autograd layer (grad mode on and an input requires grad)
//           → backend_call (the device's kernel, or the op's decomposition).
#pragma once
#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ops/registry.h"

namespace kiln {

std::vector<Tensor> call_op(OpId op, std::vector<Tensor> inputs, Attrs attrs = {});
Tensor call_op1(OpId op, std::vector<Tensor> inputs, Attrs attrs = {});
// The usual form, `call_op1(op, {a, b}, {alpha})`: with no mode and no
// autograd the inputs go straight to backend_call, without a vector of their
// own (Note [Cheap dispatch]); otherwise as above.
std::vector<Tensor> call_op(OpId op, std::initializer_list<Tensor> inputs, Attrs attrs = {});
Tensor call_op1(OpId op, std::initializer_list<Tensor> inputs, Attrs attrs = {});

// Below autograd: runs the device kernel, else the decomposition, else throws.
std::vector<Tensor> backend_call(OpId op, std::span<const Tensor> inputs, const Attrs& attrs);
// Runs op's kernel for device `dev` into `outs`, which the caller allocated (a compiled graph
// giving a value the layout it planned: Note [Channels-last convolutions]), timed as
// backend_call's. False where that device has no kernel for op.
bool kernel_into(OpId op, Device dev, std::span<const Tensor> inputs, const Attrs& attrs, std::vector<Tensor>& outs);

// Note [In-place ops]: writes op(inputs) into `self` (which is inputs[0] for
// ops like add_), bumping its version. Without autograd a pointwise kernel
// writes straight into self; with autograd the result is computed out of
// place and self takes over its history.
Tensor& call_op_inplace(Tensor& self, OpId op, std::vector<Tensor> inputs, Attrs attrs = {});

// Runs op's kernel for its inputs' device into `outs`, which the caller made: one per output, each of
// the meta function's sizes, dtype and device, and contiguous. False, with nothing run, where the
// device has no kernel for op or `outs` does not fit. No record layer, no modes, no autograd: for
// compiled graphs that give an op a dead buffer to write (Note [Externs into dead inputs]).
bool kernel_into(OpId op, std::span<const Tensor> inputs, const Attrs& attrs, std::vector<Tensor>& outs);

// Copies src into dst (broadcasting src, converting dtype, across devices),
// without autograd and without bumping dst's version (callers do). It is the
// op `copy_` (Note [Writes are ops]).
void copy_into(const Tensor& dst, const Tensor& src);

// Note [Record layer]
// While compiling, a record layer stands where kernels run, below autograd
// (as PyTorch's __torch_dispatch__ modes do): backend_call hands it every op
// that would run a kernel or make a view, after the meta function has checked
// the inputs, and the layer returns tracer outputs. Composites without a
// kernel run their decomposition as in eager, so a graph holds exactly the
// kernels eager would run. An op it cannot record (data-dependent, no meta
// function) first ends the graph (a graph break): its inputs become real and
// the op runs eagerly.
namespace autograd {
class DeferredGraph;
}

struct RecordLayer {
  virtual ~RecordLayer() = default;
  virtual std::vector<Tensor> record(OpId op, std::span<const Tensor> inputs, const Attrs& attrs,
                                     std::vector<TensorMeta>& metas) = 0;
  virtual void graph_break(OpId op, std::span<const Tensor> inputs, const char* reason) = 0;
  // Called where record would be, before the meta function: true when the layer produced
  // `outs` itself (Note [Trace replay]); false to go on (meta function, then record).
  virtual bool replay(OpId, std::span<const Tensor>, const Attrs&, std::vector<Tensor>&) { return false; }
  // True: run this composite's decomposition instead of recording it (lowering to prims).
  virtual bool decompose(OpId) const { return false; }
  // Where the autograd layer notes the nodes of recorded ops instead of building them
  // (Note [Deferred tracer autograd]); null: build them as in eager.
  virtual autograd::DeferredGraph* deferred_autograd() { return nullptr; }
  // The graph being recorded must keep eager's autograd graph (a custom Function's backward).
  virtual void keep_eager_autograd() {}
};
RecordLayer* current_record_layer();

// Note [No-grad nodes]
// A recorded op is differentiable when it ran inside the autograd layer (an op on inputs that
// require grad, with grad mode on, and the write of an in-place op that autograd follows);
// anything else (NoGradGuard regions, ops on values that need no grad) is a constant for the
// joint graph's autograd, as it is for eager's. The scope says which an op being recorded is;
// retraces set it per replayed node.
bool recording_differentiable();
class DifferentiableScope {
 public:
  explicit DifferentiableScope(bool on);
  ~DifferentiableScope();
  DifferentiableScope(const DifferentiableScope&) = delete;
  DifferentiableScope& operator=(const DifferentiableScope&) = delete;

 private:
  bool prev_;
};
// Note [Detached inputs]
// `y = x.detach()` is an alias of x's buffer, so a recorded graph reads one value through both;
// but eager's autograd sends nothing back through y. A node records which of its inputs came
// through a tensor that did not require grad while the op was differentiable (Node::detached),
// and the joint graph's replay passes those inputs detached (a wrong gradient otherwise: fuzz seed
// 12204616, `addcdiv(a, b, prelu(x, w).detach())` gave w the addcdiv's gradient). Retraces
// (functionalization, the joint graph) carry the bits over: while a node is replayed, the scope
// names its detached input tensors: a node of the same op on as many inputs takes its bits by
// position (one value may be read both ways: `addcdiv(y, t, y.detach())`); another node (an op
// the replay records in its place) marks an input that is one of those tensors and is read by
// the replayed node through no other position. At most 32 inputs carry a bit.
struct DetachedInputs {
  OpId op;
  uint32_t mask = 0;
  std::span<const Tensor> inputs;
};
const DetachedInputs* recording_detached_inputs();
class DetachedInputsScope {
 public:
  explicit DetachedInputsScope(const DetachedInputs* d);
  ~DetachedInputsScope();
  DetachedInputsScope(const DetachedInputsScope&) = delete;
  DetachedInputsScope& operator=(const DetachedInputsScope&) = delete;

 private:
  const DetachedInputs* prev_;
};
// RAII: installs `layer` (null pauses recording, as replaying a graph does) on this thread.
class RecordLayerGuard {
 public:
  explicit RecordLayerGuard(RecordLayer* layer);
  ~RecordLayerGuard();
  RecordLayerGuard(const RecordLayerGuard&) = delete;
  RecordLayerGuard& operator=(const RecordLayerGuard&) = delete;

 private:
  RecordLayer* prev_;
};

// Test hooks (tests/ops): run this op's decomposition even where a kernel
// exists (-1: none); count every call_op per op into `counts` (null: off).
void set_force_decomposition(int op);
int force_decomposition();  // the op set above, -1 for none
void set_op_call_counts(std::vector<uint32_t>* counts);

// Note [Kernel timer]: a device backend's profiler (kiln::cuda::profiler_start) sees every kernel
// the dispatcher runs on its device and every copy, bracketed by begin/end; one at a time, process-wide.
struct KernelTimer {
  virtual ~KernelTimer() = default;
  virtual DeviceType device() const = 0;
  virtual void begin(OpId op) = 0;
  // `dtype`: the first input's (the output's for factories), so the profile tells casts apart;
  // `first`: the first input (null for factories), for profiles that also tell shapes apart.
  virtual void end(OpId op, DType dtype, const Tensor* first) = 0;
  // A kernel that is no op of the table (a compiled graph's generated kernel), under `label`.
  virtual void end_labelled(const std::string& label) { (void)label; }
};
void set_kernel_timer(KernelTimer* timer);
KernelTimer* kernel_timer();  // the one watching, or null

// Note [Non-blocking copies]: Tensor::copy_(src, non_blocking) and to(..., non_blocking) tell the
// device backend's copy, below the op call, that the caller does not need the values on return.
bool non_blocking_copy();
class NonBlockingCopyGuard {
 public:
  explicit NonBlockingCopyGuard(bool on);
  ~NonBlockingCopyGuard();
  NonBlockingCopyGuard(const NonBlockingCopyGuard&) = delete;
  NonBlockingCopyGuard& operator=(const NonBlockingCopyGuard&) = delete;

 private:
  bool prev_;
};

// A mode intercepts every op call above autograd (the tracer is one).
struct DispatchMode {
  virtual ~DispatchMode() = default;
  virtual std::vector<Tensor> call(OpId op, std::vector<Tensor>& inputs, Attrs& attrs) = 0;
};
void push_dispatch_mode(DispatchMode* mode);
void pop_dispatch_mode();
// RAII: modes below the current one see calls made while this guard lives.
class ExcludeModeGuard {
 public:
  ExcludeModeGuard();
  ~ExcludeModeGuard();

 private:
  size_t saved_;
};
// RAII: no mode sees calls made while this guard lives (the host copies made to read a
// tensor's values are the reader's, not the program's ops).
class ExcludeAllModesGuard {
 public:
  ExcludeAllModesGuard();
  ~ExcludeAllModesGuard();

 private:
  size_t saved_;
};

// The autograd layer, installed by src/autograd (which sits above backends).
// It may move from `attrs` (the node keeps them) once the op below it has run.
using AutogradLayer = std::vector<Tensor> (*)(OpId op, std::vector<Tensor>& inputs, Attrs& attrs);
using NeedsAutograd = bool (*)(std::span<const Tensor> inputs);
// Makes `self` take over `result`'s place in the graph after an in-place op.
using RebaseHistory = void (*)(Tensor& self, const Tensor& result);
void set_autograd_layer(AutogradLayer layer, NeedsAutograd needs, RebaseHistory rebase);

// A device backend: the small interface a device implements besides kernels.
struct Backend {
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // dst and src have the same sizes; either may live on this device, the other on the CPU.
  virtual void copy(const Tensor& dst, const Tensor& src) = 0;
  virtual void synchronize() {}
  // What `kiln info` and the benchmarks print about this backend (its BLAS, ...) as key/value
  // pairs, so tools learn it without including the backend (docs/layers.md).
  virtual std::vector<std::pair<std::string, std::string>> info() const { return {}; }
};
void register_backend(DeviceType type, Backend* backend);
Backend* get_backend(DeviceType type);  // null when the device has none

}  // namespace kiln
