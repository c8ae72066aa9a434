// kiln::cuda::CUDAGraph (include/kiln/cuda.h) over the CUDA runtime's stream capture.
//
// Note [CUDA graphs]
// A graph replays the kernels and copies captured from a stream, reading and writing the
// addresses they had at capture. So the memory allocated while capturing must keep those
// addresses and never go to other work: it comes from the capture stream's own blocks (the
// caching allocator hands a stream's free blocks to that stream only), and the allocator keeps
// that stream's segments cached while a graph captured on it lives (retain_pool). cudaMalloc
// is allowed during capture in relaxed mode (backend/cuda/allocator.cpp); a host
// synchronization is not, and fails the capture with the op's kiln::Error. Capture uses
// cudaStreamCaptureModeThreadLocal: other threads (a background compiler loading modules) are
// not disturbed, and this thread's unsafe calls fail instead of running outside the graph.
#include <utility>

#include "backend/cuda/caching_allocator.h"
#include "backend/cuda/cuda_check.h"
#include "kiln/cuda.h"

namespace kiln::cuda {

struct CUDAGraph::Impl {
  int device = -1;
  Stream stream;            // the capture stream (its pool is the graph's)
  Stream previous;          // the stream current before capture_begin
  bool capturing = false;
  bool retained = false;    // this graph holds the capture stream's pool
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;

  void release() {
    if (capturing) {
      // An unfinished (or failed) capture: end it and drop what was recorded.
      DeviceGuard g(device);
      cudaGraph_t partial = nullptr;
      (void)cudaStreamEndCapture(static_cast<cudaStream_t>(stream.handle()), &partial);
      if (partial) (void)cudaGraphDestroy(partial);
      (void)cudaGetLastError();
      set_current_stream(previous);
      capturing = false;
    }
    if (exec) (void)cudaGraphExecDestroy(exec);
    if (graph) (void)cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
    if (retained) release_pool(device, reinterpret_cast<StreamId>(stream.handle()));
    retained = false;
  }
};

CUDAGraph::CUDAGraph() : impl_(std::make_unique<Impl>()) {}
CUDAGraph::~CUDAGraph() { impl_->release(); }

void CUDAGraph::capture_begin() { capture_begin(Stream::create()); }

void CUDAGraph::capture_begin(const Stream& capture_stream) {
  Impl& m = *impl_;
  KILN_CHECK(!m.capturing && !m.exec, "CUDAGraph::capture_begin: the graph is already ",
             m.capturing ? "capturing" : "captured", "; reset() it first");
  KILN_CHECK(capture_stream.handle() != nullptr,
             "CUDAGraph::capture_begin: the legacy default stream cannot capture; pass a stream from Stream::create()");
  m.device = capture_stream.device();
  m.stream = capture_stream;
  m.previous = current_stream(m.device);
  // The captured work comes after what the caller queued before it.
  Event ready;
  ready.record(m.previous);
  ready.wait(m.stream);
  retain_pool(m.device, reinterpret_cast<StreamId>(m.stream.handle()));
  m.retained = true;
  DeviceGuard g(m.device);
  set_current_stream(m.stream);
  cudaError_t err = cudaStreamBeginCapture(static_cast<cudaStream_t>(m.stream.handle()),
                                           cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    set_current_stream(m.previous);
    m.release();
    throw_cuda_error(err, "cudaStreamBeginCapture");
  }
  m.capturing = true;
}

void CUDAGraph::capture_end() {
  Impl& m = *impl_;
  KILN_CHECK(m.capturing, "CUDAGraph::capture_end: no capture_begin() before it");
  DeviceGuard g(m.device);
  cudaGraph_t graph = nullptr;
  cudaError_t err = cudaStreamEndCapture(static_cast<cudaStream_t>(m.stream.handle()), &graph);
  m.capturing = false;
  set_current_stream(m.previous);
  if (err != cudaSuccess || !graph) {
    if (graph) (void)cudaGraphDestroy(graph);
    m.release();
    throw_cuda_error(err != cudaSuccess ? err : cudaErrorStreamCaptureInvalidated,
                     "cudaStreamEndCapture (a call during capture could not be captured)");
  }
  m.graph = graph;
  err = cudaGraphInstantiate(&m.exec, graph, 0);
  if (err != cudaSuccess) {
    m.exec = nullptr;
    m.release();
    throw_cuda_error(err, "cudaGraphInstantiate");
  }
  // The capture stream now waits for nothing of the caller's: replays run on the caller's stream.
}

void CUDAGraph::replay() {
  Impl& m = *impl_;
  KILN_CHECK(m.exec, "CUDAGraph::replay: nothing captured (capture_begin() and capture_end() first)");
  DeviceGuard g(m.device);
  KILN_CUDA_CHECK(cudaGraphLaunch(m.exec, current_cuda_stream(m.device)), "cudaGraphLaunch");
}

void CUDAGraph::reset() { impl_->release(); }
bool CUDAGraph::captured() const { return impl_->exec != nullptr; }
Stream CUDAGraph::capture_stream() const { return impl_->stream; }

bool is_current_stream_capturing() {
  if (!is_available()) return false;
  const int d = current_device();
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  KILN_CUDA_CHECK(cudaStreamIsCapturing(current_cuda_stream(d), &st), "cudaStreamIsCapturing");
  return st != cudaStreamCaptureStatusNone;
}

}  // namespace kiln::cuda
