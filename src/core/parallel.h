// Intra-op parallelism for kernels. Backed by OpenMP; the thread count comes
// from KILN_NUM_THREADS, else the number of cores (Note [Thread budget]).
#pragma once
#include <cstdint>

#include "kiln/parallel.h"

namespace kiln {

// Calls f(begin, end) over chunks of [begin, end), in parallel when the range is
// longer than grain. f must be safe to call concurrently on disjoint chunks.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f);

// Note [Thread budget]
// One thread count (KILN_NUM_THREADS, set_num_threads) bounds every pool kiln's work runs on:
// parallel_for's OpenMP threads, the OpenMP default of the calling thread (for other OpenMP code:
// oneDNN, compiled kernels) and libraries with pools of their own (OpenBLAS's pthreads, which run
// kiln's LAPACK calls). Nesting never multiplies threads: while the outermost kiln parallel region
// runs, those libraries are set to 1 thread and get the budget back when it ends, so a library
// call at top level uses the whole budget and one inside a region runs on its caller's thread.
// kiln's own GEMM splits C among parallel_for's threads, one single-threaded BLAS call per block
// (Note [OpenBLAS threading]).
//
// A library with a pool of its own registers how to size it: set_threads(n) is called at once and
// again after every set_num_threads (the budget), when the outermost parallel region starts (1)
// and when it ends (the budget). At most 8 hooks.
void add_thread_budget_hook(void (*set_threads)(int n));
// For libraries that run on OpenMP or take a thread count per call (oneDNN): the threads a call
// made here may use, 1 inside a parallel region, else the budget. It also makes that this
// thread's OpenMP default (omp_set_num_threads is per thread), so OpenMP code follows it.
int apply_thread_budget();

namespace detail {
// Around the outermost parallel region: the hooks get 1 while it runs (Note [Thread budget]).
class ParallelRegionGuard {
 public:
  ParallelRegionGuard();
  ~ParallelRegionGuard();
  ParallelRegionGuard(const ParallelRegionGuard&) = delete;
  ParallelRegionGuard& operator=(const ParallelRegionGuard&) = delete;

 private:
  bool counted_;
};
}  // namespace detail

}  // namespace kiln

#include "core/parallel_impl.h"
