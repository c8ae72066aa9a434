// Intra-op parallelism, with PyTorch's names (at::get_num_threads / set_num_threads).
#pragma once

namespace kiln {

// The thread count for kiln's CPU kernels: KILN_NUM_THREADS, else the number of cores.
int get_num_threads();
void set_num_threads(int n);
// True while running inside a parallel region (a nested parallel_for runs serially).
bool in_parallel_region();

}  // namespace kiln
