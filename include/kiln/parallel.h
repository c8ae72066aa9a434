// Intra-op parallelism, with PyTorch's names (at::get_num_threads / set_num_threads).
#pragma once

namespace kiln {

// The CPU thread budget (KILN_NUM_THREADS, else the cores) of kiln's pool, OpenMP and the BLAS.
int get_num_threads();
void set_num_threads(int n);
// The most set_num_threads accepts: 4 per hardware thread. Beyond it
// (or below 1) set_num_threads throws; KILN_NUM_THREADS beyond it is clamped with a warning.
int max_num_threads();
// Inside a parallel region (nested parallel_for runs serially).
bool in_parallel_region();

}  // namespace kiln
