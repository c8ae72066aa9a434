// Intra-op parallelism for kernels. Backed by OpenMP; the thread count comes
// from KILN_NUM_THREADS, else the number of cores.
#pragma once
#include <cstdint>

#include "kiln/parallel.h"

namespace kiln {

// Calls f(begin, end) over chunks of [begin, end), in parallel when the range is
// longer than grain. f must be safe to call concurrently on disjoint chunks.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f);

}  // namespace kiln

#include "core/parallel_impl.h"
