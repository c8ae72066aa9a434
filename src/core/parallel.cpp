#include "core/parallel.h"

#include <cstdlib>
#include <thread>

namespace kiln {
namespace {
int initial_threads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}
int& thread_count() {
  static int n = initial_threads();
  return n;
}
}  // namespace

int get_num_threads() { return thread_count(); }
void set_num_threads(int n) { thread_count() = n > 0 ? n : 1; }
bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

}  // namespace kiln
