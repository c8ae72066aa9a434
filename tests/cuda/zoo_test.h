// Shared by the CUDA tests of the zoo's models (test_cuda_zoo.cpp: CUDA against the CPU,
// test_cuda_compile.cpp: compiled against eager on CUDA).
#pragma once
#include <string>

#include "models/zoo.h"

namespace kiln::testing {

// MobileNetV2 at the CPU sizes is compared in float64: in float32 the GPU's gradients differed
// from the CPU's by up to 3% of a gradient's scale on an H100 while the loss agreed, 20x what
// perturbing the inputs by 1e-6 moves them by (a single probe direction; rounding elsewhere flips
// ReLU6 kinks and 2 x 2 maps under batch norm amplify it), and the compiled step's from eager's on
// CUDA by up to 0.8% (with or without generated kernels: decompositions round differently). In
// float64 rounding cannot reach a kink, so both must agree to 1e-6 of scale.
inline bool compare_in_float64(const std::string& name) { return name == "mobilenet_v2"; }

inline void to_float64(models::Workload& w) {
  w.module->to(kFloat64);
  for (Tensor& x : w.inputs)
    if (is_floating_point(x.dtype())) x = x.to(kFloat64);
}

}  // namespace kiln::testing
