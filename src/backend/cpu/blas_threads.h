// The BLAS library's thread count as kiln sets it (Note [Thread budget]).
#pragma once

namespace kiln::cpu {

// OpenBLAS's current thread count; 0 when the process has no OpenBLAS.
int blas_threads();

}  // namespace kiln::cpu
