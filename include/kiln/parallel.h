// Intra-op parallelism, with PyTorch's names (at::get_num_threads / set_num_threads).
#pragma once

namespace kiln {

// The CPU thread budget (KILN_NUM_THREADS, else the cores) of kiln's pool, OpenMP and the BLAS.
int get_num_threads();
void set_num_threads(int n);
// Inside a parallel region (nested parallel_for runs serially). set_num_threads(n < 1) throws.
bool in_parallel_region();

}  // namespace kiln
