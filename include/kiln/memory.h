// Memory statistics per device (torch.cuda.memory_allocated and friends, for every device):
// what the device's allocator has handed to live tensors, and its peak since the last reset.
// On CUDA these are kiln::cuda's caching-allocator statistics; on the CPU the CPU allocator's
// counters (Note [CPU memory statistics] in src/backend/cpu/backend.cpp).
#pragma once
#include <cstddef>

#include "kiln/device.h"

namespace kiln {

size_t memory_allocated(Device device = kCPU);       // bytes held by live tensors
size_t max_memory_allocated(Device device = kCPU);   // peak of memory_allocated since the last reset
void reset_peak_memory_stats(Device device = kCPU);  // the peak becomes the current memory_allocated

}  // namespace kiln
