#pragma once
#include <algorithm>
#ifdef _OPENMP
#include <omp.h>
#endif

namespace kiln {

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  if (begin >= end) return;
  int64_t n = end - begin;
  grain = std::max<int64_t>(grain, 1);
  int nt = get_num_threads();
  if (nt <= 1 || n <= grain || in_parallel_region()) {
    f(begin, end);
    return;
  }
#ifdef _OPENMP
  int64_t chunks = std::min<int64_t>(nt, (n + grain - 1) / grain);
  detail::ParallelRegionGuard region;  // libraries with pools of their own run on 1 thread inside
#pragma omp parallel num_threads(static_cast<int>(chunks))
  {
    int64_t tid = omp_get_thread_num();
    int64_t per = (n + chunks - 1) / chunks;
    int64_t b = begin + tid * per;
    int64_t e = std::min(end, b + per);
    if (b < e) f(b, e);
  }
#else
  f(begin, end);
#endif
}

}  // namespace kiln
