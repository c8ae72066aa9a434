// Host-side helpers shared by the CUDA kernels' .cpp files.
#pragma once
#include <initializer_list>
#include <string>

#include "backend/cuda/elementwise.h"
#include "core/tensor_impl.h"

namespace kiln::cuda {

// Describes out (first) and its inputs, all with out's sizes (broadcast inputs are
// expanded views), for the kernels of elementwise.cu.
ElementwiseArgs make_elementwise_args(std::initializer_list<const Tensor*> ops);
// dst = src on one device, converting dtype and following strides.
void copy_same_device(const Tensor& dst, const Tensor& src);
// cuDNN as `kiln info` shows it: the loaded library's version, or why convolutions lack it.
std::string cudnn_info();

}  // namespace kiln::cuda
