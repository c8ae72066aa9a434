// The BLAS follows kiln's thread budget (Note [Thread budget]). OpenBLAS is looked up at run time,
// so this works whether it came at link time (KILN_HAVE_OPENBLAS) or through LAPACK (Debian's
// liblapack.so.3 may be OpenBLAS's), and does nothing where the process has no OpenBLAS.
#include "backend/cpu/blas_threads.h"

#include <dlfcn.h>

#include "core/parallel.h"

namespace kiln::cpu {
namespace {

using SetThreads = void (*)(int);
using GetThreads = int (*)();
SetThreads g_set = nullptr;
GetThreads g_get = nullptr;

void set_openblas_threads(int n) {
  if (g_get() != n) g_set(n);
}

[[maybe_unused]] const bool registered = [] {
  g_set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  g_get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (g_set && g_get) add_thread_budget_hook(&set_openblas_threads);
  return true;
}();

}  // namespace

int blas_threads() { return g_get ? g_get() : 0; }

}  // namespace kiln::cpu
