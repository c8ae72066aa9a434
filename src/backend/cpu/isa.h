// Run-time ISA dispatch for loops in kernels built for the baseline x86-64 (SSE2: the library
// must run on any x86-64 CPU). with_best_isa(f) calls f inlined into a copy compiled for
// AVX2 when the CPU has it, else into the baseline copy: g++ vectorizes f's loops for the
// ISA of the function they are inlined into (f's own body has no target of its own, so it may
// be inlined into either). Both copies are `flatten`: everything f calls is inlined into them
// too (without it g++ kept a large f out of line, one baseline copy that both called, and the
// math functors such as exp_float as calls, which no loop vectorizes). So f holds loops over
// plain memory and math, no calls into the library. Call it inside a parallel_for body, around
// the loops of one chunk: the OpenMP region's outlined function does not inherit a target.
// AVX2 without FMA: g++ contracts a * b + c into one fused (once-rounded) instruction where FMA
// is enabled, so the two copies would give different bits, and a result would depend on the
// CPU and on whether a run was long enough to take the wide copy (foreach and per-tensor
// optimizer steps must agree bit for bit). Without FMA every lane rounds as the scalar code.
#pragma once

namespace kiln::cpu {

#if defined(__x86_64__) && defined(__GNUC__)
inline const bool kCpuHasAvx2 = __builtin_cpu_supports("avx2");

template <class F>
[[gnu::target("avx2"), gnu::noinline, gnu::flatten]] void run_avx2(const F& f) {
  f();
}
template <class F>
[[gnu::noinline, gnu::flatten]] void run_baseline(const F& f) {
  f();
}
template <class F>
void with_best_isa(const F& f) {
  kCpuHasAvx2 ? run_avx2(f) : run_baseline(f);
}
#else
template <class F>
void with_best_isa(const F& f) {
  f();
}
#endif

}  // namespace kiln::cpu
