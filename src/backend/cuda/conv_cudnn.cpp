// convolution and convolution_backward on cuDNN's convolution API (forward, backward data,
// backward filter, backward bias), 1-3 spatial dims (1-d as 2-d with a unit width), groups,
// dilation, padding, transposed. float32 computes in TF32 unless backends::cudnn::allow_tf32(false)
// (PyTorch's default); float16/bfloat16 on tensor cores. The algorithm is cuDNN's
// heuristic (or, KILN_CUDNN_BENCHMARK=1, timed) choice, cached per shape. Without
// cuDNN at build time (KILN_HAVE_CUDNN unset) both ops say so. Depthwise convolutions (groups =
// in channels, 1-d/2-d, not transposed) run on kiln's own kernels instead (depthwise_ops.cpp).
#include <atomic>
#include <cstdlib>
#include <string>

#include "backend/cuda/launch.h"
#include "kiln/cuda.h"
#include "ops/conv_util.h"
#include "ops/registry.h"

namespace kiln::backends::cudnn {
namespace {
std::atomic<bool> g_allow_tf32{true};
std::atomic<bool> g_deterministic{[] {
  const char* e = std::getenv("KILN_CUDNN_DETERMINISTIC");
  return !(e && std::string(e) == "0");
}()};
}  // namespace
void allow_tf32(bool on) { g_allow_tf32 = on; }
bool allow_tf32() { return g_allow_tf32; }
void deterministic(bool on) { g_deterministic = on; }
bool deterministic() { return g_deterministic; }
}  // namespace kiln::backends::cudnn

#ifdef KILN_HAVE_CUDNN
#include <cudnn.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/cuda/conv_cudnn_graph.h"
#include "backend/cuda/cuda_check.h"
#include "dispatch/dispatch.h"
#include "kiln/cuda.h"
#endif

namespace kiln::cuda {
namespace {

#ifndef KILN_HAVE_CUDNN
// Depthwise and 1x1 convolutions have kiln's own paths (depthwise_ops.cpp, conv_gemm.cpp); the
// rest need cuDNN.
void no_cudnn(const OpCall& c) {
  KILN_FAIL(c.name(), ": not supported yet on cuda: convolution needs cuDNN (kiln was built without it)");
}
void convolution_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  if (!depthwise_convolution(c, outs) && !gemm_convolution(c, outs)) no_cudnn(c);
}
void convolution_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  if (!depthwise_convolution_backward(c, outs) && !gemm_convolution_backward(c, outs)) no_cudnn(c);
}
KILN_REGISTER_KERNEL(convolution, CUDA, convolution_kernel);
KILN_REGISTER_KERNEL(convolution_backward, CUDA, convolution_backward_kernel);
#else

void check_cudnn(cudnnStatus_t st, const char* what) {
  KILN_CHECK(st == CUDNN_STATUS_SUCCESS, "CUDA: ", what, " failed: ", cudnnGetErrorString(st));
}

// One handle per thread and device, never destroyed (as matmul.cpp's cuBLAS handles).
cudnnHandle_t handle_for(int device) {
  thread_local std::unordered_map<int, cudnnHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cudnnHandle_t h = nullptr;
  check_cudnn(cudnnCreate(&h), "cudnnCreate");
  handles[device] = h;
  return h;
}

cudnnDataType_t cudnn_type(const char* op, DType t) {
  switch (t) {
    case DType::Float32:
      return CUDNN_DATA_FLOAT;
    case DType::Float64:
      return CUDNN_DATA_DOUBLE;
    case DType::Float16:
      return CUDNN_DATA_HALF;
    case DType::BFloat16:
      return CUDNN_DATA_BFLOAT16;
    default:
      KILN_FAIL(op, ": not supported yet on cuda for dtype ", t, " (floating dtypes only)");
  }
}

// RAII wrappers of the descriptors.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc() { check_cudnn(cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor"); }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};
struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc() { check_cudnn(cudnnCreateFilterDescriptor(&d), "cudnnCreateFilterDescriptor"); }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};
struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc() { check_cudnn(cudnnCreateConvolutionDescriptor(&d), "cudnnCreateConvolutionDescriptor"); }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

// Sizes of a contiguous tensor, with a unit trailing dim for 1-d convolutions (cuDNN wants 4-d or 5-d).
std::vector<int> dims_of(const Shape& sizes) {
  std::vector<int> d;
  for (int64_t s : sizes) {
    KILN_CHECK(s < (int64_t(1) << 31), "convolution: sizes beyond 2^31 are not supported yet on cuda");
    d.push_back(static_cast<int>(s));
  }
  if (d.size() == 3) d.push_back(1);
  return d;
}
std::vector<int> contiguous_strides(const std::vector<int>& d) {
  std::vector<int> s(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * d[i + 1];
  return s;
}
// Note [Channels-last convolutions]
// cuDNN's sm90 convolution kernels are NHWC: given NCHW tensors it transposes every operand in
// and the result out (on an H100, torch.compile's NHWC convolutions of a resnet18 training step
// took 5.5 ms of GPU time where the NCHW ones took 8.0). A compiled CUDA graph therefore keeps
// its 2-d convolutions' activations channels-last (Note [Channels-last graphs] in
// compile/ir/layout.cpp) and calls these kernels with channels-last outputs: such a call runs in
// NHWC, its inputs converted where they are not already and the filter too (PyTorch's
// weight.contiguous(memory_format)), a filter gradient copied back into the filter's layout.
// An output in any other layout (a depthwise or transposed call given a channels-last one)
// is computed into a contiguous temporary and copied, so every output layout is right.
// Eager calls get contiguous outputs and run as before.
bool channels_last_dense(const Tensor& t) {
  if (t.dim() != 4) return false;
  const Shape want = channels_last_strides(t.sizes());
  for (int d = 0; d < 4; ++d)
    if (t.sizes()[d] != 1 && t.strides()[d] != want[static_cast<size_t>(d)]) return false;
  return true;
}
// t in dtype dt, channels-last dense (t itself where it is).
Tensor as_channels_last(const Tensor& t, DType dt) {
  if (t.dtype() == dt && channels_last_dense(t)) return t;
  Tensor c = make_tensor_strided(t.sizes(), channels_last_strides(t.sizes()), dt, t.device());
  copy_same_device(c, t);
  return c;
}

void set_tensor(TensorDesc& t, cudnnDataType_t type, const std::vector<int>& d, bool channels_last = false) {
  std::vector<int> s = contiguous_strides(d);
  if (channels_last && d.size() == 4) {
    const Shape cl = kiln::channels_last_strides(Shape(d.begin(), d.end()));
    s.assign(cl.begin(), cl.end());
  }
  check_cudnn(cudnnSetTensorNdDescriptor(t.d, type, static_cast<int>(d.size()), d.data(), s.data()),
              "cudnnSetTensorNdDescriptor");
}

// Dense copy of t on its device (cuDNN is given fully packed NCHW tensors).
Tensor dense(const Tensor& t) { return dense_as(t, t.dtype()); }

// Everything one cuDNN call needs; `xs` is the convolution's input side, `ys` its output side
// in cuDNN's (non-transposed) sense: a transposed convolution swaps them.
struct ConvSetup {
  cudnnHandle_t h = nullptr;
  cudnnDataType_t type{};
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;
  std::string key;  // the shape, dtype and device, for the algorithm cache
  bool fp32_no_tf32 = false;
  GraphConv graph;  // the same call for the graph API (conv_cudnn_graph.cpp)
  bool channels_last = false;
};

void setup(ConvSetup& s, const ConvShape& sh, const Shape& xs, const Shape& ws, const Shape& ys, DType t, int device,
           bool channels_last = false) {
  s.h = handle_for(device);
  check_cudnn(cudnnSetStream(s.h, current_cuda_stream(device)), "cudnnSetStream");
  s.type = cudnn_type("convolution", t);
  std::vector<int> xd = dims_of(xs), wd = dims_of(ws), yd = dims_of(ys);
  const bool cl = channels_last && xd.size() == 4;
  s.channels_last = cl;
  set_tensor(s.x, s.type, xd, cl);
  set_tensor(s.y, s.type, yd, cl);
  check_cudnn(cudnnSetFilterNdDescriptor(s.w.d, s.type, cl ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                         static_cast<int>(wd.size()), wd.data()),
              "cudnnSetFilterNdDescriptor");
  const int n = std::max(sh.nd, 2);
  std::array<int, 3> pad{0, 0, 0}, stride{1, 1, 1}, dil{1, 1, 1};
  for (int i = 0; i < sh.nd; ++i) {
    pad[i] = static_cast<int>(sh.pad[i]);
    stride[i] = static_cast<int>(sh.stride[i]);
    dil[i] = static_cast<int>(sh.dil[i]);
  }
  // Half types accumulate in float32 (as PyTorch's pseudo-half configuration).
  cudnnDataType_t compute = t == DType::Float64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  check_cudnn(cudnnSetConvolutionNdDescriptor(s.conv.d, n, pad.data(), stride.data(), dil.data(),
                                              CUDNN_CROSS_CORRELATION, compute),
              "cudnnSetConvolutionNdDescriptor");
  check_cudnn(cudnnSetConvolutionGroupCount(s.conv.d, static_cast<int>(sh.groups)), "cudnnSetConvolutionGroupCount");
  s.fp32_no_tf32 = t == DType::Float32 && !backends::cudnn::allow_tf32();
  cudnnMathType_t math = t == DType::Float64   ? CUDNN_DEFAULT_MATH
                         : s.fp32_no_tf32      ? CUDNN_FMA_MATH
                         : t == DType::Float32 ? CUDNN_DEFAULT_MATH
                                               : CUDNN_TENSOR_OP_MATH;
  check_cudnn(cudnnSetConvolutionMathType(s.conv.d, math), "cudnnSetConvolutionMathType");
  auto join = [](const std::vector<int>& v) {
    std::string r;
    for (int x : v) r += std::to_string(x) + ",";
    return r;
  };
  s.graph.type = s.type;
  s.graph.compute = compute;
  s.graph.x.assign(xd.begin(), xd.end());
  s.graph.w.assign(wd.begin(), wd.end());
  s.graph.y.assign(yd.begin(), yd.end());
  for (int i = 0; i < static_cast<int>(xd.size()) - 2; ++i) {
    s.graph.pad.push_back(pad[i]);
    s.graph.stride.push_back(stride[i]);
    s.graph.dil.push_back(dil[i]);
  }
  s.graph.no_tf32 = s.fp32_no_tf32;
  s.graph.channels_last = cl;
  s.key = "d" + std::to_string(device) + "t" + std::to_string(static_cast<int>(t)) + "x" + join(xd) + "w" + join(wd) +
          "y" + join(yd) + "p" + join({pad[0], pad[1], pad[2]}) + "s" + join({stride[0], stride[1], stride[2]}) + "l" +
          join({dil[0], dil[1], dil[2]}) + "g" + std::to_string(sh.groups) + (s.fp32_no_tf32 ? "f" : "m") + (cl ? "c" : "");
  s.graph.key = s.key;
}

// The largest power of two up to 16 that every data pointer is a multiple of (the graph API's
// plans are built for an alignment).
int64_t alignment(std::initializer_list<const void*> ptrs) {
  int64_t a = 16;
  for (const void* p : ptrs)
    while (a > 1 && reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(a) != 0) a /= 2;
  return a;
}

// Note [cuDNN algorithm cache]
// The candidates are ranked once per (kind, shape, dtype, device, math, determinism): by cuDNN's
// heuristics, or with KILN_CUDNN_BENCHMARK=1 by timing them on the first call's buffers. The
// first deterministic algorithm that works is kept (the first working one if none is
// deterministic), so a shape's results are the same run to run; with
// backends::cudnn::deterministic(false) the first working one.
struct Algo {
  int algo = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};
std::mutex g_algo_mu;
std::unordered_map<std::string, Algo> g_algos;

template <class Perf>
Algo pick(const Perf* perf, int n, const ConvSetup& s, const char* what) {
  int chosen = -1;
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (s.fp32_no_tf32 && perf[i].mathType == CUDNN_TENSOR_OP_MATH) continue;
    if (chosen < 0) chosen = i;
    if (!backends::cudnn::deterministic() || perf[i].determinism == CUDNN_DETERMINISTIC) {
      chosen = i;
      break;
    }
  }
  KILN_CHECK(chosen >= 0, "convolution: cuDNN has no ", what, " algorithm for this shape on cuda");
  Algo a{static_cast<int>(perf[chosen].algo), perf[chosen].mathType};
  if (s.fp32_no_tf32) a.math = CUDNN_FMA_MATH;
  return a;
}

enum class Kind { Forward, BackwardData, BackwardFilter };

// Scratch memory from the caching allocator (freed back to it when the tensor dies).
Tensor workspace(size_t bytes, Device d) {
  return make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, DType::UInt8, d);
}

// KILN_CUDNN_BENCHMARK=1: time the candidates once per shape on the call's own buffers
// (cudnnFind*AlgorithmEx, as torch.backends.cudnn.benchmark) instead of the heuristics.
bool benchmark_mode() {
  static const bool on = [] {
    const char* e = std::getenv("KILN_CUDNN_BENCHMARK");
    return e && std::string(e) == "1";
  }();
  return on;
}
constexpr size_t kBenchmarkWorkspace = size_t(256) << 20;

// The buffers of the call an algorithm is chosen for: the convolution's input side, filter,
// output side, in cuDNN's sense (Find writes the output it is given).
struct Buffers {
  void* x = nullptr;
  void* w = nullptr;
  void* y = nullptr;
};

Algo algo_for(Kind kind, ConvSetup& s, const Buffers& b, Device dev) {
  std::string key = std::to_string(static_cast<int>(kind)) + (backends::cudnn::deterministic() ? "D" : "N") + s.key;
  {
    std::lock_guard<std::mutex> lock(g_algo_mu);
    auto it = g_algos.find(key);
    if (it != g_algos.end()) {
      check_cudnn(cudnnSetConvolutionMathType(s.conv.d, it->second.math), "cudnnSetConvolutionMathType");
      return it->second;
    }
  }
  Algo a;
  int n = 0;
  if (benchmark_mode()) {
    Tensor ws;
    size_t bytes = kBenchmarkWorkspace;
    try {
      ws = workspace(bytes, dev);
    } catch (const Error&) {
      bytes = 0;  // no room: only the algorithms without scratch memory take part
    }
    void* wp = ws.defined() ? ws.unsafe_impl()->data() : nullptr;
    if (kind == Kind::Forward) {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      check_cudnn(cudnnFindConvolutionForwardAlgorithmEx(s.h, s.x.d, b.x, s.w.d, b.w, s.conv.d, s.y.d, b.y,
                                                         static_cast<int>(perf.size()), &n, perf.data(), wp, bytes),
                  "cudnnFindConvolutionForwardAlgorithmEx");
      a = pick(perf.data(), n, s, "forward");
    } else if (kind == Kind::BackwardData) {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      check_cudnn(
          cudnnFindConvolutionBackwardDataAlgorithmEx(s.h, s.w.d, b.w, s.y.d, b.y, s.conv.d, s.x.d, b.x,
                                                      static_cast<int>(perf.size()), &n, perf.data(), wp, bytes),
          "cudnnFindConvolutionBackwardDataAlgorithmEx");
      a = pick(perf.data(), n, s, "backward data");
    } else {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
      check_cudnn(
          cudnnFindConvolutionBackwardFilterAlgorithmEx(s.h, s.x.d, b.x, s.y.d, b.y, s.conv.d, s.w.d, b.w,
                                                        static_cast<int>(perf.size()), &n, perf.data(), wp, bytes),
          "cudnnFindConvolutionBackwardFilterAlgorithmEx");
      a = pick(perf.data(), n, s, "backward filter");
    }
  } else if (kind == Kind::Forward) {
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
    check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(s.h, s.x.d, s.w.d, s.conv.d, s.y.d,
                                                       static_cast<int>(perf.size()), &n, perf.data()),
                "cudnnGetConvolutionForwardAlgorithm_v7");
    a = pick(perf.data(), n, s, "forward");
  } else if (kind == Kind::BackwardData) {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(s.h, s.w.d, s.y.d, s.conv.d, s.x.d,
                                                            static_cast<int>(perf.size()), &n, perf.data()),
                "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    a = pick(perf.data(), n, s, "backward data");
  } else {
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT> perf{};
    check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(s.h, s.x.d, s.y.d, s.conv.d, s.w.d,
                                                              static_cast<int>(perf.size()), &n, perf.data()),
                "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    a = pick(perf.data(), n, s, "backward filter");
  }
  check_cudnn(cudnnSetConvolutionMathType(s.conv.d, a.math), "cudnnSetConvolutionMathType");
  std::lock_guard<std::mutex> lock(g_algo_mu);
  g_algos.emplace(key, a);
  return a;
}

struct Scale {
  double one_d = 1.0, zero_d = 0.0;
  float one_f = 1.0f, zero_f = 0.0f;
  bool dbl;
  explicit Scale(DType t) : dbl(t == DType::Float64) {}
  const void* one() const { return dbl ? static_cast<const void*>(&one_d) : &one_f; }
  const void* zero() const { return dbl ? static_cast<const void*>(&zero_d) : &zero_f; }
};

void* ptr(const Tensor& t) { return t.unsafe_impl()->data(); }

// The graph API first (conv_cudnn_graph.cpp); false: the legacy API below runs.
bool run_graph(ConvSetup& s, GraphConv::Kind kind, void* x, void* w, void* y, Device dev) {
  GraphConv g = s.graph;
  g.kind = kind;
  g.deterministic = backends::cudnn::deterministic();
  g.align = alignment({x, w, y});
  Tensor ws;
  return run_graph_conv(s.h, g, x, w, y, [&](int64_t bytes) {
    ws = workspace(static_cast<size_t>(bytes), dev);
    return ptr(ws);
  });
}

// y = conv(x, w) in cuDNN's sense (descriptors x, w, y of s).
void run_forward(ConvSetup& s, const Tensor& x, const Tensor& w, const Tensor& y) {
  if (run_graph(s, GraphConv::Forward, ptr(x), ptr(w), ptr(y), y.device())) return;
  Algo a = algo_for(Kind::Forward, s, {ptr(x), ptr(w), ptr(y)}, y.device());
  auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(a.algo);
  size_t bytes = 0;
  check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(s.h, s.x.d, s.w.d, s.conv.d, s.y.d, algo, &bytes),
              "cudnnGetConvolutionForwardWorkspaceSize");
  Tensor ws = workspace(bytes, y.device());
  Scale k(y.dtype());
  check_cudnn(cudnnConvolutionForward(s.h, k.one(), s.x.d, ptr(x), s.w.d, ptr(w), s.conv.d, algo, ptr(ws), bytes,
                                      k.zero(), s.y.d, ptr(y)),
              "cudnnConvolutionForward");
}

// dx = conv's gradient with respect to its input, from dy.
void run_backward_data(ConvSetup& s, const Tensor& w, const Tensor& dy, const Tensor& dx) {
  if (run_graph(s, GraphConv::BackwardData, ptr(dx), ptr(w), ptr(dy), dx.device())) return;
  Algo a = algo_for(Kind::BackwardData, s, {ptr(dx), ptr(w), ptr(dy)}, dx.device());
  auto algo = static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo);
  size_t bytes = 0;
  check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(s.h, s.w.d, s.y.d, s.conv.d, s.x.d, algo, &bytes),
              "cudnnGetConvolutionBackwardDataWorkspaceSize");
  Tensor ws = workspace(bytes, dx.device());
  Scale k(dx.dtype());
  check_cudnn(cudnnConvolutionBackwardData(s.h, k.one(), s.w.d, ptr(w), s.y.d, ptr(dy), s.conv.d, algo, ptr(ws), bytes,
                                           k.zero(), s.x.d, ptr(dx)),
              "cudnnConvolutionBackwardData");
}

// dw = conv's gradient with respect to its filter, from x and dy.
void run_backward_filter(ConvSetup& s, const Tensor& x, const Tensor& dy, const Tensor& dw) {
  if (run_graph(s, GraphConv::BackwardFilter, ptr(x), ptr(dw), ptr(dy), dw.device())) return;
  Algo a = algo_for(Kind::BackwardFilter, s, {ptr(x), ptr(dw), ptr(dy)}, dw.device());
  auto algo = static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo);
  size_t bytes = 0;
  check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(s.h, s.x.d, s.y.d, s.conv.d, s.w.d, algo, &bytes),
              "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  Tensor ws = workspace(bytes, dw.device());
  Scale k(dw.dtype());
  check_cudnn(cudnnConvolutionBackwardFilter(s.h, k.one(), s.x.d, ptr(x), s.y.d, ptr(dy), s.conv.d, algo, ptr(ws),
                                             bytes, k.zero(), s.w.d, ptr(dw)),
              "cudnnConvolutionBackwardFilter");
}

// The bias as [1, C, 1, ...] against a [N, C, ...] tensor of `dims` dims.
void set_bias_desc(TensorDesc& b, cudnnDataType_t type, int64_t channels, size_t dims) {
  std::vector<int> d(std::max<size_t>(dims, 4), 1);
  d[1] = static_cast<int>(channels);
  set_tensor(b, type, d);
}

void zero(const Tensor& t) {
  if (t.numel() == 0) return;
  KILN_CUDA_CHECK(cudaMemsetAsync(ptr(t), 0, t.nbytes(), current_cuda_stream(t.device().index)), "cudaMemsetAsync");
}

Shape shape_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end()); }

// out += bias on its channels (out NCHW, or NHWC where channels_last).
void add_bias(cudnnHandle_t h, cudnnDataType_t type, const Tensor& bias, const Tensor& out, int64_t channels,
              bool channels_last) {
  Tensor b = dense(bias);
  TensorDesc bd, od;
  set_bias_desc(bd, type, channels, static_cast<size_t>(out.dim()));
  set_tensor(od, type, dims_of(shape_of(out)), channels_last);
  Scale k(out.dtype());
  check_cudnn(cudnnAddTensor(h, k.one(), bd.d, ptr(b), k.one(), od.d, ptr(out)), "cudnnAddTensor");
}

// gb = go summed over every dim but the channels (go NCHW, or NHWC where channels_last).
void bias_grad(cudnnHandle_t h, cudnnDataType_t type, const Tensor& go, const Tensor& gb, int64_t channels,
               bool channels_last) {
  if (go.dtype() == DType::BFloat16) {
    // cuDNN has no bfloat16 bias gradient: the sum over every dim but the channels (the CUDA
    // reduction, Note [CUDA reductions over outer and inner dims]).
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < go.dim(); ++d) dims.push_back(d);
    Tensor sum = backend_call(OpId::sum, std::span<const Tensor>(&go, 1), Attrs{dims, false, std::monostate{}})[0];
    copy_same_device(gb, sum);
    return;
  }
  TensorDesc bd, gd;
  set_bias_desc(bd, type, channels, static_cast<size_t>(go.dim()));
  set_tensor(gd, type, dims_of(shape_of(go)), channels_last);
  Scale k(go.dtype());
  check_cudnn(cudnnConvolutionBackwardBias(h, k.one(), gd.d, ptr(go), k.zero(), bd.d, ptr(gb)),
              "cudnnConvolutionBackwardBias");
}

// Whether a call of this shape runs in NHWC when its output is channels-last (Note
// [Channels-last convolutions]): 2-d, not transposed, not depthwise (kiln's own kernels).
bool nhwc_capable(const ConvShape& sh, const Tensor& x) {
  return x.dim() == 4 && !sh.transposed && !depthwise_groups(sh.groups, sh.C_in);
}

// The kernel below into contiguous temporaries for the outputs that are not contiguous, then
// copied into them (Note [Channels-last convolutions]: any output layout is right).
template <class Kernel>
bool via_contiguous(const OpCall& c, std::vector<Tensor>& outs, Kernel kernel) {
  bool all = true;
  for (const Tensor& o : outs) all = all && (!o.defined() || o.is_contiguous());
  if (all) return false;
  std::vector<Tensor> tmp;
  for (const Tensor& o : outs) tmp.push_back(o.defined() && !o.is_contiguous() ? make_tensor(o.sizes(), o.dtype(), o.device()) : o);
  kernel(c, tmp);
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k].defined() && !outs[k].is_contiguous()) copy_same_device(outs[k], tmp[k]);
  return true;
}

void convolution_kernel(const OpCall& c, std::vector<Tensor>& outs);

// y = conv(x, w) + b with x, w and y channels-last.
void convolution_nhwc(const OpCall& c, const ConvShape& sh, const Tensor& out) {
  const int d = out.device().index;
  Tensor x = as_channels_last(c.in(0), out.dtype()), w = as_channels_last(c.in(1), out.dtype());
  ConvSetup s;
  setup(s, sh, shape_of(x), shape_of(w), shape_of(out), out.dtype(), d, true);
  run_forward(s, x, w, out);
  if (c.in(2).defined()) add_bias(s.h, s.type, c.in(2), out, sh.C_out, true);
}

// Outputs are fresh contiguous tensors (backend_call) or, from a compiled graph, channels-last
// ones (Note [Channels-last convolutions]); inputs are made dense here.
void convolution_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor& out = outs[0];
  ConvShape sh = conv_shape(c.name(), c.in(0), c.in(1), c.in(2), c.attrs);
  int d = out.device().index;
  DeviceGuard g(d);
  (void)cudnn_type(c.name(), out.dtype());
  if (out.numel() == 0) return;
  if (!out.is_contiguous()) {
    if (nhwc_capable(sh, c.in(0)) && channels_last_dense(out) && c.in(0).numel() > 0 && c.in(1).numel() > 0) {
      convolution_nhwc(c, sh, out);
      return;
    }
    if (via_contiguous(c, outs, convolution_kernel)) return;
  }
  if (depthwise_convolution(c, outs) || gemm_convolution(c, outs)) return;
  Tensor x = dense(c.in(0)), w = dense(c.in(1));
  ConvSetup s;
  if (x.numel() == 0 || w.numel() == 0) {
    zero(out);
  } else if (!sh.transposed) {
    setup(s, sh, shape_of(x), shape_of(w), shape_of(out), out.dtype(), d);
    run_forward(s, x, w, out);
  } else {
    // A transposed convolution is the gradient of the convolution from `out` to `x`.
    setup(s, sh, shape_of(out), shape_of(w), shape_of(x), out.dtype(), d);
    run_backward_data(s, w, x, out);
  }
  if (c.in(2).defined()) {
    cudnnHandle_t h = handle_for(d);
    check_cudnn(cudnnSetStream(h, current_cuda_stream(d)), "cudnnSetStream");
    add_bias(h, cudnn_type(c.name(), out.dtype()), c.in(2), out, sh.C_out, false);
  }
}
KILN_REGISTER_KERNEL(convolution, CUDA, convolution_kernel);

// The three gradients with grad_out, x and w channels-last; grad_input (outs[0]) is.
void convolution_backward_nhwc(const OpCall& c, const ConvShape& sh, std::vector<Tensor>& outs) {
  const auto& mask = c.attrs.ints(6);
  const DType t = c.in(1).dtype();
  const int d = c.in(1).device().index;
  Tensor go = as_channels_last(c.in(0), t), x = as_channels_last(c.in(1), t), w = as_channels_last(c.in(2), t);
  ConvSetup s;
  setup(s, sh, shape_of(x), shape_of(w), shape_of(go), t, d, true);
  if (mask[0]) run_backward_data(s, w, go, outs[0]);
  if (mask[1]) {
    // The filter's gradient in the call's layout, copied into the output's where that differs.
    Tensor dw = channels_last_dense(outs[1])
                    ? outs[1]
                    : make_tensor_strided(outs[1].sizes(), channels_last_strides(outs[1].sizes()), t, outs[1].device());
    run_backward_filter(s, x, go, dw);
    if (dw.unsafe_impl() != outs[1].unsafe_impl()) copy_same_device(outs[1], dw);
  }
  if (mask[2]) bias_grad(s.h, s.type, go, outs[2], sh.C_out, true);
}

// Outputs not asked for by output_mask have shape [0] (meta_convolution_backward).
void convolution_backward_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  ConvShape sh = conv_shape(c.name(), c.in(1), c.in(2), Tensor(), c.attrs);
  const auto& mask = c.attrs.ints(6);
  int d = c.in(1).device().index;
  DeviceGuard g(d);
  (void)cudnn_type(c.name(), c.in(1).dtype());
  // Note [Channels-last convolutions]: NHWC where grad_input is channels-last, or (not asked
  // for) where grad_out and x both are.
  if (nhwc_capable(sh, c.in(1)) && c.in(0).numel() > 0 && c.in(1).numel() > 0 && c.in(2).numel() > 0 &&
      (mask[0] ? channels_last_dense(outs[0]) && !outs[0].is_contiguous()
               : channels_last_dense(c.in(0)) && channels_last_dense(c.in(1)) && !c.in(1).is_contiguous())) {
    convolution_backward_nhwc(c, sh, outs);
    return;
  }
  if (via_contiguous(c, outs, convolution_backward_kernel)) return;
  if (depthwise_convolution_backward(c, outs) || gemm_convolution_backward(c, outs)) return;
  Tensor go = dense(c.in(0)), x = dense(c.in(1)), w = dense(c.in(2));
  const bool empty = go.numel() == 0 || x.numel() == 0 || w.numel() == 0;
  if (empty) {
    for (int k = 0; k < 3; ++k)
      if (mask[k]) zero(outs[k]);
    return;
  }
  ConvSetup s;
  // cuDNN's "input" side is x for a convolution, grad_out for a transposed one.
  const Tensor& in = sh.transposed ? go : x;
  const Tensor& res = sh.transposed ? x : go;
  setup(s, sh, shape_of(in), shape_of(w), shape_of(res), x.dtype(), d);
  if (mask[0]) {
    if (!sh.transposed)
      run_backward_data(s, w, go, outs[0]);
    else
      run_forward(s, go, w, outs[0]);
  }
  if (mask[1]) run_backward_filter(s, in, res, outs[1]);
  if (mask[2]) bias_grad(s.h, s.type, go, outs[2], sh.C_out, false);
}
KILN_REGISTER_KERNEL(convolution_backward, CUDA, convolution_backward_kernel);

#endif  // KILN_HAVE_CUDNN

}  // namespace

std::string cudnn_info() {
#ifdef KILN_HAVE_CUDNN
  // cudnnGetVersion is major*10000 + minor*100 + patch for cuDNN 9.
  size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100) +
         " (built with " + std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + ")";
#else
  return "not built in (CUDA convolutions need it)";
#endif
}

}  // namespace kiln::cuda
