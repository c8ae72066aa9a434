// kiln::cuda's devices, streams and events (include/kiln/cuda.h) over the CUDA runtime API.
#include <algorithm>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "kiln/cuda.h"

namespace kiln::cuda {

void throw_cuda_error(cudaError_t err, const char* what) {
  (void)cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  KILN_FAIL("CUDA: ", what, " failed: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
}

namespace {

// Asked once: without a driver or a GPU cudaGetDeviceCount fails, which means "no devices";
// the reason is kept for the error raised when something needs one.
struct DeviceCount {
  int count = 0;
  std::string why;  // empty when count > 0
};
const DeviceCount& devices() {
  static const DeviceCount d = [] {
    DeviceCount r;
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      r.why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
    } else if (n == 0) {
      r.why = "cudaGetDeviceCount: 0 devices";
    }
    r.count = err == cudaSuccess ? n : 0;
    return r;
  }();
  return d;
}

// Per thread and device: the current stream (null: the legacy default stream).
std::vector<cudaStream_t>& tls_streams() {
  thread_local std::vector<cudaStream_t> s;
  if (s.empty()) s.resize(static_cast<size_t>(std::max(devices().count, 1)), nullptr);
  return s;
}

int resolve(int device) {
  check_device(device);
  return device < 0 ? current_device() : device;
}

}  // namespace

void check_device(int device) {
  const DeviceCount& d = devices();
  KILN_CHECK(d.count > 0, "CUDA: no CUDA device is available (", d.why, ")");
  KILN_CHECK(device < d.count, "CUDA: invalid device cuda:", device, ": ", d.count, " device",
             d.count == 1 ? " is" : "s are", " available");
}

bool is_built() { return true; }
bool is_available() { return devices().count > 0; }
int device_count() { return devices().count; }

int current_device() {
  check_device();
  int d = 0;
  KILN_CUDA_CHECK(cudaGetDevice(&d), "cudaGetDevice");
  return d;
}

void set_device(int device) {
  check_device(device);
  KILN_CHECK(device >= 0, "set_device: invalid device index ", device);
  KILN_CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice");
}

DeviceProperties get_device_properties(int device) {
  device = resolve(device);
  cudaDeviceProp p{};
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&p, device), "cudaGetDeviceProperties");
  DeviceProperties r;
  r.name = p.name;
  r.total_memory = p.totalGlobalMem;
  r.major = p.major;
  r.minor = p.minor;
  r.multi_processor_count = p.multiProcessorCount;
  return r;
}

void synchronize(int device) {
  DeviceGuard g(resolve(device));
  KILN_CUDA_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

DeviceGuard::DeviceGuard(int device) {
  check_device(device);
  KILN_CUDA_CHECK(cudaGetDevice(&prev_), "cudaGetDevice");
  if (device >= 0 && device != prev_) {
    KILN_CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice");
    changed_ = true;
  }
}
DeviceGuard::~DeviceGuard() {
  if (changed_) (void)cudaSetDevice(prev_);
}

// ----- streams

Stream Stream::create(int device) {
  device = resolve(device);
  DeviceGuard g(device);
  cudaStream_t s = nullptr;
  KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return Stream(device, s);  // never destroyed (include/kiln/cuda.h)
}

bool Stream::query() const {
  DeviceGuard g(device_);
  cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  if (err == cudaErrorNotReady) return false;
  KILN_CUDA_CHECK(err, "cudaStreamQuery");
  return true;
}

void Stream::synchronize() const {
  DeviceGuard g(device_);
  KILN_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cudaStreamSynchronize");
}

cudaStream_t current_cuda_stream(int device) { return tls_streams()[static_cast<size_t>(device)]; }

Stream current_stream(int device) {
  device = resolve(device);
  return Stream(device, current_cuda_stream(device));
}
Stream default_stream(int device) { return Stream(resolve(device), nullptr); }
void set_current_stream(const Stream& s) {
  check_device(s.device());
  tls_streams()[static_cast<size_t>(s.device())] = static_cast<cudaStream_t>(s.handle());
}

StreamGuard::StreamGuard(const Stream& s) : prev_stream_(current_stream(s.device())), prev_device_(current_device()) {
  set_device(s.device());
  set_current_stream(s);
}
StreamGuard::~StreamGuard() {
  set_current_stream(prev_stream_);
  (void)cudaSetDevice(prev_device_);
}

// ----- events

Event::~Event() {
  if (handle_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}
Event::Event(Event&& o) noexcept : timing_(o.timing_), device_(o.device_), handle_(std::exchange(o.handle_, nullptr)) {}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (handle_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    timing_ = o.timing_;
    device_ = o.device_;
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

void Event::record(const Stream& s) {
  DeviceGuard g(s.device());
  if (!handle_) {
    cudaEvent_t e = nullptr;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault : cudaEventDisableTiming),
                    "cudaEventCreateWithFlags");
    handle_ = e;
    device_ = s.device();
  }
  KILN_CHECK(device_ == s.device(), "Event::record: the event belongs to cuda:", device_,
             ", the stream to cuda:", s.device());
  KILN_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(s.handle())),
                  "cudaEventRecord");
}

void Event::wait(const Stream& s) const {
  if (!handle_) return;  // never recorded: nothing to wait for (as torch)
  DeviceGuard g(s.device());
  KILN_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.handle()), static_cast<cudaEvent_t>(handle_), 0),
                  "cudaStreamWaitEvent");
}

bool Event::query() const {
  if (!handle_) return true;
  cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (err == cudaErrorNotReady) return false;
  KILN_CUDA_CHECK(err, "cudaEventQuery");
  return true;
}

void Event::synchronize() const {
  if (handle_) KILN_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cudaEventSynchronize");
}

float Event::elapsed_time(const Event& end) const {
  KILN_CHECK(timing_ && end.timing_, "Event::elapsed_time: both events need enable_timing=true");
  KILN_CHECK(handle_ && end.handle_, "Event::elapsed_time: both events must be recorded first");
  float ms = 0;
  KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(end.handle_)),
                  "cudaEventElapsedTime");
  return ms;
}

}  // namespace kiln::cuda
