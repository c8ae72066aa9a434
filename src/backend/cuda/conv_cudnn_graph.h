// Convolutions through cuDNN's graph API (conv_cudnn_graph.cpp), for conv_cudnn.cpp.
#pragma once
#ifdef KILN_HAVE_CUDNN
#include <cudnn.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::cuda {

// One convolution call in cuDNN's sense: x the input side, w the filter, y the output side
// (a transposed convolution swaps x and y), packed NC... tensors, or NHWC where channels_last.
struct GraphConv {
  enum Kind { Forward, BackwardData, BackwardFilter } kind = Forward;
  cudnnDataType_t type{}, compute{};
  std::vector<int64_t> x, w, y;           // dims
  std::vector<int64_t> pad, stride, dil;  // per spatial dim
  bool no_tf32 = false;                   // float32 without TF32
  bool deterministic = true;
  int64_t align = 16;  // bytes every data pointer is aligned to
  bool channels_last = false;  // x, w and y laid out NHWC (Note [Channels-last convolutions])
  std::string key;     // shape, dtype, device and math (conv_cudnn.cpp's algorithm key)
};

// Runs the convolution with the first engine cuDNN's heuristics rank that the flags allow
// (cached per key and handle); false where none works, and the caller uses the legacy API.
// `workspace(bytes)` returns scratch memory that lives until the call's work is done.
// KILN_CUDNN_API=legacy turns this path off.
bool run_graph_conv(cudnnHandle_t h, const GraphConv& g, void* x, void* w, void* y,
                    const std::function<void*(int64_t)>& workspace);

}  // namespace kiln::cuda
#endif
