// The GPU peaks model FLOP utilization (MFU) is reported against: BENCHMARKS.md's measured H200
// figures, dense bf16 matrix rate and float32 without TF32.
#pragma once

namespace kiln::cli {

constexpr double kPeakBf16Flops = 790e12;
constexpr double kPeakFp32Flops = 60e12;

// A transformer's training FLOPs per step: 6 per parameter per token (forward and backward;
// attention's T^2 term left out).
inline double transformer_step_flops(double params, double tokens) { return 6.0 * params * tokens; }

}  // namespace kiln::cli
