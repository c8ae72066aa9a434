// Note [CUDA graphs in reduce-overhead]
// Launching a kernel costs the host microseconds; a training step of a small model launches
// hundreds, so the GPU waits on the host (the mlp's whole step on an H100: 0.8 ms for a few
// microseconds of arithmetic per kernel). In mode "reduce-overhead" a graph's run becomes one
// cudaGraphLaunch (kiln::cuda::CUDAGraph, Note [CUDA graphs]), as torch.compile's mode of that
// name does; a whole training step compiled as one graph (forward, backward and AdamW, Note
// [Writes are ops]) replays as one launch, which torch cannot export.
//  - Eligible: every value of the graph (inputs, intermediates, outputs) on one CUDA device but
//    CPU 0-d inputs (a C++ number), and no op that draws random numbers (a replay would draw the
//    captured numbers again). A CPU 0-d input's value is baked into the capture (a kernel
//    argument), so a call where it differs captures again.
//  - Call 1 runs the graph as usual, on the capture stream (cuBLAS and cuDNN set up their state
//    for that stream outside capture); call 2 captures it and replays the capture; later calls
//    replay.
//  - Inputs: one at the address it had in call 1 (a parameter, an optimizer's moment, a saved
//    tensor that the forward's replay left in its static outputs) is read in place; any other
//    is copied into a static buffer before each replay. An in-place input that later moves
//    makes the next call capture again with that input copied (at most kMaxCaptures graphs;
//    then the graph runs without CUDA graphs).
//  - Outputs live in the capture's private pool and are overwritten by the next replay. A
//    replay that finds an earlier output still held (a loss kept in a list, a gradient left in
//    .grad) first moves that output's memory out: a fresh block takes its contents and its
//    Storage, so the holder sees its values unchanged while the graph keeps its addresses.
//  - Anything that cannot be captured (a host synchronization: nonzero, item, a copy to the
//    CPU) fails the capture; the graph then runs without CUDA graphs (KILN_LOGS=perf says why).
#include "compile/backends/cuda_graphs.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include "compile/logs.h"
#include "core/tensor_impl.h"
#include "dispatch/dispatch.h"
#include "kiln/autograd.h"
#include "kiln/cuda.h"
#include "ops/registry.h"

namespace kiln::compiler {
namespace {

constexpr int kMaxCaptures = 8;

// Why graph g cannot become a CUDA graph ("" when it can); sets *device to its GPU.
std::string ineligible(const Graph& g, int* device) {
  std::optional<int> dev;
  for (const Value& v : g.values) {
    const TensorMeta& m = v.meta;
    // A scalar input, guarded by its value (at most 8 bytes: a complex128 is not).
    if (m.device.is_cpu() && v.node < 0 && m.sizes.empty() && itemsize(m.dtype) <= 8) continue;
    if (!m.device.is_cuda()) {
      std::ostringstream os;
      os << "a value on " << m.device << (v.node < 0 ? " (an input)" : "");
      return os.str();
    }
    if (dev && *dev != m.device.index) return "values on two GPUs";
    dev = m.device.index;
  }
  for (const Node& n : g.nodes)
    if (op_info(n.op).has(RANDOM)) return std::string(op_info(n.op).name) + " draws random numbers";
  if (!dev) return "no value on a GPU";
  *device = *dev;
  return "";
}

// A tensor over `storage` with the given geometry.
Tensor over(const std::shared_ptr<Storage>& storage, const Shape& sizes, const Shape& strides, int64_t offset, DType dtype,
            Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = storage;
  impl->sizes = sizes;
  impl->strides = strides;
  impl->storage_offset = offset;
  impl->dtype = dtype;
  impl->device = device;
  impl->refresh_metadata();
  return Tensor(std::move(impl));
}

Tensor bytes_of(const std::shared_ptr<Storage>& s) {
  return over(s, {static_cast<int64_t>(s->nbytes)}, {1}, 0, DType::UInt8, s->device);
}

struct InputSlot {
  bool defined = false;
  bool scalar = false;  // a CPU 0-d input: its bytes at capture
  bool copied = false;  // read from `buffer`, filled before each replay
  const void* ptr = nullptr;  // in place: its address at capture
  Shape sizes, strides;
  DType dtype = DType::Float32;
  Tensor buffer;
  uint64_t value = 0;
};

struct OutputSlot {
  enum Kind : uint8_t { Undefined, Static, InputView, CopiedInputView } kind = Undefined;
  int index = -1;            // into statics, or the input's position
  bool whole_input = false;  // InputView: the input itself
  Shape sizes, strides;
  int64_t offset = 0;
  DType dtype = DType::Float32;
  Device device;
};

class Runner {
 public:
  Runner(GraphFn run, int device, size_t num_inputs, std::shared_ptr<KernelCounts> counts)
      : run_(std::move(run)), device_(device), counts_(std::move(counts)), force_copy_(num_inputs, false) {}

  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) {
    std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
    if (!lock.owns_lock()) {  // another thread replays the graph: this call runs as usual, said once
      if (!told_busy_.exchange(true))
        log(Log::Perf, "reduce-overhead: a call from a second thread ran without CUDA graphs while another "
                       "thread replayed the graph (one capture serves one thread at a time)\n");
      return run_(inputs);
    }
    if (off_) return run_(inputs);
    PauseRecording pause;
    NoGradGuard no_grad;
    if (graph_ && !replayable(inputs)) {
      drop_graph();
      if (captures_ >= kMaxCaptures) {
        give_up("inputs kept moving or scalar inputs kept changing after " + std::to_string(kMaxCaptures) +
                " captures");
        return run_(inputs);
      }
      warmed_ = false;
    }
    if (!warmed_) return warm_up(inputs);
    if (!graph_) return capture(inputs);
    return replay(inputs);
  }

 private:
  void give_up(const std::string& why) {
    off_ = true;
    drop_graph();
    log(Log::Perf, "reduce-overhead: a graph runs without CUDA graphs: " + why + "\n");
  }

  void drop_graph() {
    graph_.reset();
    statics_.clear();
    ins_.clear();
    outs_.clear();
  }

  std::vector<Tensor> warm_up(const std::vector<Tensor>& inputs) {
    stream_ = cuda::Stream::create(device_);
    const cuda::Stream caller = cuda::current_stream(device_);
    cuda::Event ready;
    ready.record(caller);
    ready.wait(stream_);
    warm_ptrs_.assign(inputs.size(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && inputs[i].has_storage()) warm_ptrs_[i] = inputs[i].unsafe_impl()->data();
    std::vector<Tensor> r;
    {
      cuda::StreamGuard on(stream_);
      r = run_(inputs);
    }
    cuda::Event done;
    done.record(stream_);
    done.wait(caller);
    warmed_ = true;
    return r;
  }

  std::vector<Tensor> capture(const std::vector<Tensor>& inputs) {
    ++captures_;
    ins_.assign(inputs.size(), {});
    std::vector<Tensor> cap(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Tensor& t = inputs[i];
      InputSlot& s = ins_[i];
      if (!t.defined()) continue;
      s.defined = true;
      s.sizes = Shape(t.sizes().begin(), t.sizes().end());
      s.strides = Shape(t.strides().begin(), t.strides().end());
      s.dtype = t.dtype();
      if (t.device().is_cpu()) {
        s.scalar = true;
        std::memcpy(&s.value, t.unsafe_impl()->data(), itemsize(t.dtype()));
        cap[i] = t;
        continue;
      }
      const void* p = t.unsafe_impl()->data();
      if (force_copy_[i] || p != warm_ptrs_[i]) {
        s.copied = true;
        // Its own layout where that is a plain one (the kernels were compiled for it).
        bool dense = true;
        for (int64_t st : t.strides()) dense = dense && st != 0;
        s.buffer = dense ? make_tensor_strided(t.sizes(), t.strides(), t.dtype(), t.device())
                         : make_tensor(t.sizes(), t.dtype(), t.device());
        cap[i] = s.buffer;
      } else {
        s.ptr = p;
        cap[i] = t;
      }
    }
    graph_ = std::make_unique<cuda::CUDAGraph>();
    std::vector<Tensor> r;
    try {
      graph_->capture_begin(stream_);
      r = run_(cap);
      graph_->capture_end();
    } catch (const Error& e) {
      r.clear();
      give_up(std::string("its capture failed: ") + e.what());
      return run_(inputs);
    }
    outs_.assign(r.size(), {});
    for (size_t o = 0; o < r.size(); ++o) {
      const Tensor& t = r[o];
      OutputSlot& s = outs_[o];
      if (!t.defined() || !t.has_storage()) continue;
      s.sizes = Shape(t.sizes().begin(), t.sizes().end());
      s.strides = Shape(t.strides().begin(), t.strides().end());
      s.offset = t.storage_offset();
      s.dtype = t.dtype();
      s.device = t.device();
      const Storage* st = t.unsafe_impl()->storage.get();
      for (size_t j = 0; j < cap.size() && s.kind == OutputSlot::Undefined; ++j) {
        if (!cap[j].defined() || !cap[j].has_storage() || cap[j].unsafe_impl()->storage.get() != st) continue;
        s.kind = ins_[j].copied ? OutputSlot::CopiedInputView : OutputSlot::InputView;
        s.index = static_cast<int>(j);
        s.whole_input = t.sizes() == cap[j].sizes() && t.strides() == cap[j].strides() &&
                        t.storage_offset() == cap[j].storage_offset() && t.dtype() == cap[j].dtype();
      }
      if (s.kind != OutputSlot::Undefined) continue;
      s.kind = OutputSlot::Static;
      for (size_t k = 0; k < statics_.size() && s.index < 0; ++k)
        if (statics_[k].get() == st) s.index = static_cast<int>(k);
      if (s.index < 0) {
        s.index = static_cast<int>(statics_.size());
        statics_.push_back(t.unsafe_impl()->storage);
      }
    }
    r.clear();
    return replay(inputs);
  }

  bool replayable(const std::vector<Tensor>& inputs) {
    bool ok = inputs.size() == ins_.size();
    for (size_t i = 0; i < inputs.size() && ok; ++i) {
      const Tensor& t = inputs[i];
      const InputSlot& s = ins_[i];
      if (t.defined() != s.defined) return false;
      if (!s.defined) continue;
      if (t.dtype() != s.dtype || !(t.sizes() == IntArrayRef(s.sizes))) return false;
      if (s.scalar) {
        uint64_t v = 0;
        if (!t.device().is_cpu()) return false;
        std::memcpy(&v, t.unsafe_impl()->data(), itemsize(t.dtype()));
        ok = v == s.value;
      } else if (!s.copied) {
        ok = t.device() == Device(DeviceType::CUDA, device_) && t.unsafe_impl()->data() == s.ptr &&
             t.strides() == IntArrayRef(s.strides);
        if (!ok) force_copy_[i] = true;
      } else {
        ok = t.device() == Device(DeviceType::CUDA, device_);
      }
    }
    return ok;
  }

  // Static output k is still held by the caller: its Storage gets a fresh block with its values.
  void move_out(size_t k) {
    std::shared_ptr<Storage>& held = statics_[k];
    std::shared_ptr<Storage> fresh = get_allocator(DeviceType::CUDA)->allocate(held->nbytes, held->device);
    if (held->nbytes) copy_into(bytes_of(fresh), bytes_of(held));
    std::swap(held->data, fresh->data);
    std::swap(held->deleter, fresh->deleter);
    held = std::move(fresh);  // now the static block's owner; the caller's Storage has the copy
  }

  std::vector<Tensor> replay(const std::vector<Tensor>& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i)
      if (ins_[i].copied) copy_into(ins_[i].buffer, inputs[i]);
    for (size_t k = 0; k < statics_.size(); ++k)
      if (statics_[k].use_count() > 1) move_out(k);
    graph_->replay();
    if (counts_) counts_->cuda_graph_replays.fetch_add(1, std::memory_order_relaxed);
    std::vector<Tensor> out(outs_.size());
    for (size_t o = 0; o < outs_.size(); ++o) {
      const OutputSlot& s = outs_[o];
      switch (s.kind) {
        case OutputSlot::Undefined:
          break;
        case OutputSlot::Static:
          out[o] = over(statics_[static_cast<size_t>(s.index)], s.sizes, s.strides, s.offset, s.dtype, s.device);
          break;
        case OutputSlot::InputView: {
          const Tensor& in = inputs[static_cast<size_t>(s.index)];
          out[o] = s.whole_input ? in : over(in.unsafe_impl()->storage, s.sizes, s.strides, s.offset, s.dtype, s.device);
          break;
        }
        case OutputSlot::CopiedInputView: {
          // A view of an input the graph read from its copy: the values, in memory of its own.
          const Tensor& buf = ins_[static_cast<size_t>(s.index)].buffer;
          out[o] = over(buf.unsafe_impl()->storage, s.sizes, s.strides, s.offset, s.dtype, s.device).clone();
          break;
        }
      }
    }
    return out;
  }

  GraphFn run_;
  int device_;
  std::shared_ptr<KernelCounts> counts_;
  std::mutex mu_;
  std::atomic<bool> told_busy_{false};  // the second-thread fallback was logged
  bool off_ = false;
  bool warmed_ = false;
  int captures_ = 0;
  std::vector<bool> force_copy_;  // inputs seen moving: copied from then on
  std::vector<const void*> warm_ptrs_;
  cuda::Stream stream_;
  std::unique_ptr<cuda::CUDAGraph> graph_;
  std::vector<InputSlot> ins_;
  std::vector<OutputSlot> outs_;
  std::vector<std::shared_ptr<Storage>> statics_;  // the outputs' storages in the graph's pool
};

}  // namespace

GraphFn with_cuda_graphs(const Graph& g, GraphFn run, std::shared_ptr<KernelCounts> counts) {
  const bool any_cuda = std::any_of(g.values.begin(), g.values.end(), [](const Value& v) { return v.meta.device.is_cuda(); });
  if (!any_cuda) return run;  // a CPU graph: nothing to say
  int device = -1;
  const std::string why = ineligible(g, &device);
  if (!why.empty()) {
    log(Log::Perf, "reduce-overhead: a graph runs without CUDA graphs: " + why + "\n");
    return run;
  }
  auto r = std::make_shared<Runner>(std::move(run), device, g.inputs.size(), std::move(counts));
  return [r](const std::vector<Tensor>& inputs) { return (*r)(inputs); };
}

}  // namespace kiln::compiler
