// What kiln's oneDNN users share (onednn_conv.cpp, onednn_matmul.cpp): the CPU engine and the
// thread hook. Included only where KILN_HAVE_ONEDNN is defined (CMakeLists.txt sets it per file).
#pragma once
#include <omp.h>

#include "core/parallel.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::cpu::onednn {

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// The thread hook: oneDNN (OpenMP runtime) runs on omp_get_max_threads() threads, so this
// sets it to kiln's budget around each build and call, and to 1 inside a kiln parallel
// region so threads never multiply. The thread-budget work joins here.
inline int onednn_threads() { return in_parallel_region() ? 1 : get_num_threads(); }
struct OmpThreads {
  int prev;
  explicit OmpThreads(int n) : prev(omp_get_max_threads()) {
    if (n != prev) omp_set_num_threads(n);
  }
  ~OmpThreads() {
    if (omp_get_max_threads() != prev) omp_set_num_threads(prev);
  }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;
};

}  // namespace kiln::cpu::onednn
