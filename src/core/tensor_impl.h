// TensorImpl and Storage: what a Tensor handle points at.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/small_vector.h"
#include "kiln/tensor.h"

namespace kiln {

// Autograd's per-tensor state (autograd::AutogradMeta) lives above core: a tensor only owns and
// destroys it, through this base (PyTorch's c10::AutogradMetaInterface), so core never includes autograd.
struct AutogradMetaInterface {
  virtual ~AutogradMetaInterface() = default;
};

// Sizes and strides: inline up to 6 dims, so making a tensor or a meta result
// allocates no shape buffers (Note [Cheap dispatch]).
using Shape = SmallVector<int64_t, 6>;

// A reference-counted buffer on one device. Views share it.
struct Storage {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  std::function<void(void*)> deleter;  // frees `data`; empty for borrowed memory
  bool pinned = false;                 // page-locked host memory (Tensor::pin_memory)

  Storage(void* d, size_t n, Device dev, std::function<void(void*)> del)
      : data(d), nbytes(n), device(dev), deleter(std::move(del)) {}
  ~Storage() {
    if (deleter) deleter(data);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

// Shared by a tensor and all its views: bumped by every in-place write, so
// autograd can tell that a tensor it saved has changed (Note [Version counter]).
struct VersionCounter {
  std::atomic<uint32_t> version{0};
};

struct TensorImpl {
  std::shared_ptr<Storage> storage;  // null for tracer/meta tensors
  Shape sizes;
  Shape strides;
  int64_t storage_offset = 0;
  int64_t numel = 1;
  DType dtype = DType::Float32;
  Device device;
  bool is_contiguous = true;
  // A 0-d tensor made from a C++ number: promotes like a Python scalar.
  bool is_wrapped_number = false;
  std::shared_ptr<VersionCounter> version = std::make_shared<VersionCounter>();
  std::unique_ptr<AutogradMetaInterface> autograd;  // null until autograd touches it
  // For views: the tensor whose storage this one aliases (for Tensor::_base()).
  std::shared_ptr<TensorImpl> view_base;
  // A tracer (while compiling): the recording it belongs to and its value
  // there; 0 / -1 for real and meta tensors (Note [Record layer]).
  uint64_t tracer_recording = 0;
  int64_t tracer_value = -1;
  bool is_tracer() const { return tracer_recording != 0; }
  // A tracer with symbolic dims: its sizes as raw SymInts (sizes holds their
  // values in this call); null otherwise (Note [SymInt encoding]).
  std::unique_ptr<Shape> sym_sizes;

  TensorImpl();
  // A view: shares `version` with its base instead of allocating its own.
  explicit TensorImpl(std::shared_ptr<VersionCounter> shared_version);
  ~TensorImpl();
  // Recomputes numel and is_contiguous from sizes/strides.
  void refresh_metadata();
  char* data() const { return static_cast<char*>(storage->data) + storage_offset * itemsize(dtype); }
  void bump_version() { version->version.fetch_add(1, std::memory_order_relaxed); }
};

// Row-major (contiguous) strides for `sizes`.
Shape contiguous_strides(IntArrayRef sizes);
int64_t compute_numel(IntArrayRef sizes);
bool compute_contiguous(IntArrayRef sizes, IntArrayRef strides);

// Allocates storage on `device` for a contiguous tensor (uninitialised contents).
Tensor make_tensor(IntArrayRef sizes, DType dtype, Device device);
Tensor make_tensor_strided(IntArrayRef sizes, IntArrayRef strides, DType dtype, Device device);
// A contiguous CPU tensor in page-locked memory (pinned_allocator(), which must exist).
Tensor make_tensor_pinned(IntArrayRef sizes, DType dtype);
// A tensor without storage (tracer / meta); with `version`, it shares that
// counter (a view) instead of getting its own.
Tensor make_meta_tensor(IntArrayRef sizes, IntArrayRef strides, DType dtype, Device device,
                        std::shared_ptr<VersionCounter> version = nullptr);
// A new impl aliasing base's storage and version counter (a view).
Tensor make_view(const Tensor& base, IntArrayRef sizes, IntArrayRef strides, int64_t storage_offset);
// A 0-d tensor from a Scalar, flagged as a wrapped number.
Tensor wrap_scalar(const Scalar& s, Device device = kCPU);

// Memory allocation per device; the CPU one aligns to 64 bytes.
struct Allocator {
  virtual ~Allocator() = default;
  virtual std::shared_ptr<Storage> allocate(size_t nbytes, Device device) = 0;
};
void register_allocator(DeviceType type, Allocator* alloc);
Allocator* get_allocator(DeviceType type);
// Page-locked host memory for fast and asynchronous copies to and from a GPU (the CUDA backend
// registers it; null in a build without CUDA). Its storages have `pinned` set.
void register_pinned_allocator(Allocator* alloc);
Allocator* pinned_allocator();

// Note [Value reads]: every read of a tensor's values from C++ (item,
// to_vector, printing, data_ptr) calls this hook first; while compiling it
// ends the graph when the tensor is a tracer (a graph break), which makes it real.
using ValueReadHook = void (*)(const Tensor& t, const char* what);
void set_value_read_hook(ValueReadHook hook);  // this thread
void notify_value_read(const Tensor& t, const char* what);

// A new impl that stands for a tracer's value (a view of it, detach(), a
// saved copy) is announced here, so that the recording can make it real
// together with the tracer (Note [Record layer]).
using TracerAliasHook = void (*)(const std::shared_ptr<TensorImpl>& alias);
void set_tracer_alias_hook(TracerAliasHook hook);  // this thread
void notify_tracer_alias(const std::shared_ptr<TensorImpl>& alias);

// Wraps a dimension index into [0, ndim) (ndim 0 accepts -1 and 0), or throws
// naming the op.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
std::string shape_str(IntArrayRef sizes);

}  // namespace kiln
