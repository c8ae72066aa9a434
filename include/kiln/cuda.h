// kiln::cuda: devices, streams, events and the caching allocator's statistics (torch.cuda).
// Every function works in a build without CUDA and on a machine without a GPU: queries say
// "none" (is_available() false, device_count() 0); anything that needs a device throws a
// kiln::Error saying why.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/device.h"
#include "kiln/tensor.h"

namespace kiln::cuda {

// True when kiln was built with CUDA (-DKILN_CUDA=ON), whether or not a GPU is present.
bool is_built();
// True when kiln was built with CUDA and at least one device is usable.
bool is_available();
int device_count();  // 0 without a driver or a GPU; never throws

struct DeviceProperties {
  std::string name;
  size_t total_memory = 0;  // bytes
  int major = 0;            // compute capability
  int minor = 0;
  int multi_processor_count = 0;
};
DeviceProperties get_device_properties(int device = -1);  // -1: the current device

int current_device();
void set_device(int device);
// Waits for all work on `device` (-1: the current one).
void synchronize(int device = -1);

// A CUDA stream. Streams are never destroyed (as PyTorch's pool): a Stream is a value
// that may be copied freely. The default-constructed Stream is the legacy default stream.
class Stream {
 public:
  Stream() = default;
  // A new non-blocking stream on `device` (-1: the current one).
  static Stream create(int device = -1);
  int device() const { return device_; }
  void* handle() const { return handle_; }  // the cudaStream_t
  bool query() const;                       // true when all its work is done
  void synchronize() const;
  bool operator==(const Stream& o) const { return device_ == o.device_ && handle_ == o.handle_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

  // For the runtime: wraps an existing cudaStream_t.
  Stream(int device, void* handle) : device_(device), handle_(handle) {}

 private:
  int device_ = 0;
  void* handle_ = nullptr;
};

// The stream kernels and copies on `device` are enqueued on (this thread).
Stream current_stream(int device = -1);
Stream default_stream(int device = -1);
void set_current_stream(const Stream& s);

// RAII: makes `s` (and its device) current for this thread, restoring both on exit.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream prev_stream_;
  int prev_device_ = 0;
};

// A CUDA event, created lazily on first record(). Move-only.
class Event {
 public:
  explicit Event(bool enable_timing = false) : timing_(enable_timing) {}
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(const Stream& s);
  void record() { record(current_stream()); }
  void wait(const Stream& s) const;  // makes `s` wait for this event
  bool query() const;
  void synchronize() const;
  float elapsed_time(const Event& end) const;  // milliseconds, both recorded with timing

 private:
  bool timing_ = false;
  int device_ = 0;
  void* handle_ = nullptr;
};

// The caching allocator (Note [CUDA caching allocator]), per device (-1: the current one).
size_t memory_allocated(int device = -1);      // bytes held by live tensors
size_t max_memory_allocated(int device = -1);  // peak of memory_allocated since the last reset
size_t memory_reserved(int device = -1);       // bytes obtained from cudaMalloc, cached or not
void reset_peak_memory_stats(int device = -1);
void empty_cache();  // returns unused cached segments to the driver
// Marks `t`'s memory as used by `s`: it is not reused until the work enqueued on `s` so far is done.
void record_stream(const Tensor& t, const Stream& s);

// A CUDA graph (torch.cuda.CUDAGraph): the work this thread issues between capture_begin() and
// capture_end() is recorded, not run, and replay() runs it again, with one launch, on the current
// stream, at the same addresses. Capture runs on a capture stream (a private one, or the one
// given), which is made current until capture_end() and first waits for the current stream's
// work. Memory allocated while capturing comes from that stream's blocks, its private pool: it is
// reused only by later captures on the same stream (graphs sharing a pool, as torch's `pool`
// argument) and stays cached while a graph captured on it lives, since replays write there.
// A call that cannot be captured (a host synchronization, an item(), a copy to the CPU) fails
// with kiln::Error and invalidates the capture: capture_end() then throws, reset() discards it.
class CUDAGraph {
 public:
  CUDAGraph();
  ~CUDAGraph();
  CUDAGraph(const CUDAGraph&) = delete;
  CUDAGraph& operator=(const CUDAGraph&) = delete;

  void capture_begin();
  void capture_begin(const Stream& capture_stream);
  void capture_end();
  void replay();
  void reset();  // drops the graph, or an unfinished capture
  bool captured() const;
  Stream capture_stream() const;  // the stream capture runs on (set by capture_begin)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};
// Whether the current stream of the current device is capturing a CUDA graph.
bool is_current_stream_capturing();

// The GPU time of every kernel and copy kiln runs on CUDA, per op (a coarse torch.profiler):
// profiler_start(), run the work, then profiler_stop() returns a table of the ops by total time.
// Each kernel gets a pair of CUDA events, so timings of tiny kernels include the events' cost.
void profiler_start();
std::string profiler_stop();

}  // namespace kiln::cuda

namespace kiln::backends {
// TF32 tensor cores for float32 matmuls on CUDA (torch.backends.cuda.matmul.allow_tf32): off by
// default, so float32 matmuls give float32 accuracy. (Declared here, not in backends.h, to keep
// the CUDA API in one header.)
void allow_tf32(bool on);
bool allow_tf32();
}  // namespace kiln::backends

namespace kiln::backends::cudnn {
// TF32 tensor cores for float32 convolutions in cuDNN (torch.backends.cudnn.allow_tf32): on by
// default, as PyTorch, whose float32 convolutions on Ampere and later GPUs run in TF32 (10-bit
// mantissa products, float32 accumulation). Off gives float32 products.
void allow_tf32(bool on);
bool allow_tf32();
// Only deterministic cuDNN convolution algorithms (torch.backends.cudnn.deterministic): on by
// default in kiln, so a shape's results are the same run to run (PyTorch's default is off, and
// its heuristics may pick algorithms that accumulate with atomics). Off takes the heuristics' (or
// the benchmark's) first algorithm whatever its determinism; the environment variable
// KILN_CUDNN_DETERMINISTIC=0 sets that at start-up.
void deterministic(bool on);
bool deterministic();
}  // namespace kiln::backends::cudnn
