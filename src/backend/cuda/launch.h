// Host-side helpers shared by the CUDA kernels' .cpp files.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "backend/cuda/elementwise.h"
#include "core/tensor_impl.h"
#include "ops/registry.h"

namespace kiln::cuda {

// Describes out (first) and its inputs, all with out's sizes (broadcast inputs are
// expanded views), for the kernels of elementwise.cu.
ElementwiseArgs make_elementwise_args(std::initializer_list<const Tensor*> ops);
// dst = src on one device, converting dtype and following strides.
void copy_same_device(const Tensor& dst, const Tensor& src);
// t as a dense tensor of dtype `dt` on its device (t itself when it already is one).
Tensor dense_as(const Tensor& t, DType dt);
// Note [CUDA staged through the CPU]: runs the op's CPU kernel on downloaded inputs, uploads the results.
void staged_on_cpu(const OpCall& c, std::vector<Tensor>& outs);
// Depthwise convolutions (depthwise_ops.cpp): false, computing nothing, when c is not one.
bool depthwise_convolution(const OpCall& c, std::vector<Tensor>& outs);
bool depthwise_convolution_backward(const OpCall& c, std::vector<Tensor>& outs);
// 1x1 convolutions as batched GEMMs (conv_gemm.cpp): false, computing nothing, when c is not one.
bool gemm_convolution(const OpCall& c, std::vector<Tensor>& outs);
bool gemm_convolution_backward(const OpCall& c, std::vector<Tensor>& outs);
// out[i] = a[i] @ b[i] on cuBLAS (matmul.cpp) for 3-D a [B, m, k], b [B, k, n] (a batch stride of
// 0 broadcasts), out [B, m, n] contiguous (+= when accumulate); out may be float32 for
// float16/bfloat16 operands; float32 on TF32 tensor cores where tf32.
void gemm_batched(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate, bool tf32);
// cuDNN as `kiln info` shows it: the loaded library's version, or why convolutions lack it.
std::string cudnn_info();

}  // namespace kiln::cuda
