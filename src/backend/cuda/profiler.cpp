// kiln::cuda::profiler_start/stop: the GPU time of every kernel and copy kiln runs on CUDA, per
// op, from a pair of CUDA events around each (Note [Kernel timer]). A kernel that dispatches
// others (a copy inside a kernel) is timed once, as the outer op. KILN_PROFILE_SHAPES=1 also
// tells calls apart by the first input's shape and whether it is dense, to find which calls of
// an op cost the time.
#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "dispatch/dispatch.h"
#include "kiln/cuda.h"

namespace kiln::cuda {
namespace {

struct Record {
  OpId op;
  DType dtype;
  cudaEvent_t start, stop;
  std::string detail;  // with KILN_PROFILE_SHAPES: " [sizes]" and " strided" when not dense
  std::string label;   // a generated kernel's (end_labelled): the row's name instead of the op's
};

bool profile_shapes() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_PROFILE_SHAPES");
    return e && std::string(e) == "1";
  }();
  return on;
}

std::string detail_of(const Tensor* t) {
  if (!t || !profile_shapes()) return {};
  std::string s = " [";
  for (int64_t i = 0; i < t->dim(); ++i) s += (i ? "," : "") + std::to_string(t->sizes()[i]);
  s += "]";
  if (!t->is_contiguous()) s += " strided";
  return s;
}

class CudaKernelTimer : public KernelTimer {
 public:
  DeviceType device() const override { return DeviceType::CUDA; }
  void begin(OpId) override {
    if (depth_++ > 0) return;
    start_ = make_event();
    KILN_CUDA_CHECK(cudaEventRecord(start_, stream()), "cudaEventRecord (profiler)");
  }
  void end(OpId op, DType dtype, const Tensor* first) override {
    if (--depth_ > 0) return;
    cudaEvent_t stop = make_event();
    KILN_CUDA_CHECK(cudaEventRecord(stop, stream()), "cudaEventRecord (profiler)");
    std::string detail = detail_of(first);
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back({op, dtype, start_, stop, std::move(detail), {}});
  }
  void end_labelled(const std::string& label) override {
    if (--depth_ > 0) return;
    cudaEvent_t stop = make_event();
    KILN_CUDA_CHECK(cudaEventRecord(stop, stream()), "cudaEventRecord (profiler)");
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back({OpId{}, DType::Float32, start_, stop, {}, label});
  }
  std::vector<Record> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(records_);
  }

 private:
  static cudaEvent_t make_event() {
    cudaEvent_t e;
    KILN_CUDA_CHECK(cudaEventCreate(&e), "cudaEventCreate (profiler)");
    return e;
  }
  static cudaStream_t stream() {
    int d = 0;
    KILN_CUDA_CHECK(cudaGetDevice(&d), "cudaGetDevice");
    return current_cuda_stream(d);
  }
  static thread_local int depth_;
  static thread_local cudaEvent_t start_;
  std::mutex mu_;
  std::vector<Record> records_;
};
thread_local int CudaKernelTimer::depth_ = 0;
thread_local cudaEvent_t CudaKernelTimer::start_ = nullptr;

std::mutex g_profiler_mu;
CudaKernelTimer* g_timer = nullptr;

}  // namespace

void profiler_start() {
  check_device();
  std::lock_guard<std::mutex> lock(g_profiler_mu);
  KILN_CHECK(!g_timer, "cuda::profiler_start: the profiler is already running");
  g_timer = new CudaKernelTimer();
  set_kernel_timer(g_timer);
}

std::string profiler_stop() {
  std::lock_guard<std::mutex> lock(g_profiler_mu);
  KILN_CHECK(g_timer, "cuda::profiler_stop: the profiler is not running (call profiler_start first)");
  set_kernel_timer(nullptr);
  KILN_CUDA_CHECK(cudaDeviceSynchronize(), "cudaDeviceSynchronize (profiler)");
  std::vector<Record> records = g_timer->take();
  delete g_timer;
  g_timer = nullptr;
  struct Row {
    int64_t calls = 0;
    double ms = 0;
  };
  std::map<std::string, Row> rows;
  double total = 0;
  for (const Record& r : records) {
    float ms = 0;
    KILN_CUDA_CHECK(cudaEventElapsedTime(&ms, r.start, r.stop), "cudaEventElapsedTime (profiler)");
    Row& row = rows[!r.label.empty() ? r.label : std::string(op_name(r.op)) + " " + std::string(dtype_name(r.dtype)) + r.detail];
    ++row.calls;
    row.ms += ms;
    total += ms;
    cudaEventDestroy(r.start);
    cudaEventDestroy(r.stop);
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::string out = "op (gen: a compiled graph's generated kernel, its ops)            calls    GPU ms      %\n";
  char line[320];
  for (const auto& [name, row] : sorted) {
    std::snprintf(line, sizeof line, "%-60s %7lld %9.3f %6.1f\n", name.c_str(), static_cast<long long>(row.calls),
                  row.ms, total > 0 ? 100.0 * row.ms / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-60s %7zu %9.3f  100.0\n", "total", records.size(), total);
  return out + line;
}

}  // namespace kiln::cuda
