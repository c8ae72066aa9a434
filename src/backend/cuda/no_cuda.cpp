// kiln::cuda in a build without CUDA (-DKILN_CUDA=OFF or no nvcc): queries say "none", and
// anything that needs a device throws. The CUDA allocator throws the same error, so a
// `.cuda()` says why instead of "no allocator".
#include <memory>

#include "core/tensor_impl.h"
#include "kiln/cuda.h"

namespace kiln::cuda {
namespace {

[[noreturn]] void fail() { KILN_FAIL("CUDA: kiln was built without CUDA (-DKILN_CUDA=ON)"); }

struct NoCudaAllocator : Allocator {
  std::shared_ptr<Storage> allocate(size_t, Device) override { fail(); }
};
NoCudaAllocator* g_allocator = new NoCudaAllocator;
[[maybe_unused]] const bool registered = [] {
  register_allocator(DeviceType::CUDA, g_allocator);
  return true;
}();

}  // namespace

bool is_built() { return false; }
bool is_available() { return false; }
int device_count() { return 0; }
DeviceProperties get_device_properties(int) { fail(); }
int current_device() { fail(); }
void set_device(int) { fail(); }
void synchronize(int) { fail(); }

Stream Stream::create(int) { fail(); }
bool Stream::query() const { fail(); }
void Stream::synchronize() const { fail(); }
Stream current_stream(int) { fail(); }
Stream default_stream(int) { fail(); }
void set_current_stream(const Stream&) { fail(); }
StreamGuard::StreamGuard(const Stream&) { fail(); }
StreamGuard::~StreamGuard() = default;

Event::~Event() = default;
Event::Event(Event&& o) noexcept : timing_(o.timing_), device_(o.device_), handle_(o.handle_) {}
Event& Event::operator=(Event&& o) noexcept {
  timing_ = o.timing_;
  device_ = o.device_;
  handle_ = o.handle_;
  return *this;
}
void Event::record(const Stream&) { fail(); }
void Event::wait(const Stream&) const { fail(); }
bool Event::query() const { fail(); }
void Event::synchronize() const { fail(); }
float Event::elapsed_time(const Event&) const { fail(); }

size_t memory_allocated(int) { fail(); }
size_t max_memory_allocated(int) { fail(); }
size_t memory_reserved(int) { fail(); }
void reset_peak_memory_stats(int) { fail(); }
void empty_cache() {}  // nothing cached
void record_stream(const Tensor&, const Stream&) { fail(); }
struct CUDAGraph::Impl {};
CUDAGraph::CUDAGraph() = default;
CUDAGraph::~CUDAGraph() = default;
void CUDAGraph::capture_begin() { fail(); }
void CUDAGraph::capture_begin(const Stream&) { fail(); }
void CUDAGraph::capture_end() { fail(); }
void CUDAGraph::replay() { fail(); }
void CUDAGraph::reset() {}
bool CUDAGraph::captured() const { return false; }
Stream CUDAGraph::capture_stream() const { return {}; }
bool is_current_stream_capturing() { return false; }
void profiler_start() { fail(); }
std::string profiler_stop() { fail(); }

}  // namespace kiln::cuda

namespace kiln::backends {
// Remembered, so code written for GPUs runs unchanged; nothing reads it without CUDA.
namespace {
bool g_allow_tf32 = false;
}
void allow_tf32(bool on) { g_allow_tf32 = on; }
bool allow_tf32() { return g_allow_tf32; }
}  // namespace kiln::backends

namespace kiln::backends::cudnn {
namespace {
bool g_allow_tf32 = true;
bool g_deterministic = true;
}  // namespace
void allow_tf32(bool on) { g_allow_tf32 = on; }
bool allow_tf32() { return g_allow_tf32; }
void deterministic(bool on) { g_deterministic = on; }
bool deterministic() { return g_deterministic; }
}  // namespace kiln::backends::cudnn
