// Run-time ISA dispatch for loops in kernels built for the baseline x86-64 (SSE2: the library
// must run on any x86-64 CPU). with_best_isa(f) calls f inlined into a copy compiled for
// AVX2+FMA when the CPU has both, else into the baseline copy: g++ vectorizes f's loops for the
// ISA of the function they are inlined into (f's own body has no target of its own, so it may
// be inlined into either). Call it inside a parallel_for body, around the loops of one chunk:
// the OpenMP region's outlined function does not inherit a target.
#pragma once

namespace kiln::cpu {

#if defined(__x86_64__) && defined(__GNUC__)
inline const bool kCpuHasAvx2Fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

template <class F>
[[gnu::target("avx2,fma"), gnu::noinline]] void run_avx2_fma(const F& f) {
  f();
}
template <class F>
[[gnu::noinline]] void run_baseline(const F& f) {
  f();
}
template <class F>
void with_best_isa(const F& f) {
  kCpuHasAvx2Fma ? run_avx2_fma(f) : run_baseline(f);
}
#else
template <class F>
void with_best_isa(const F& f) {
  f();
}
#endif

}  // namespace kiln::cpu
