// The C++/OpenMP emitter: one translation unit per scheduled graph, one
// extern "C" function per loop kernel (Note [Generated C++]).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "compile/lower/schedule.h"

namespace kiln::compiler::codegen {

// The source of kernels [first, last) of `s`; kernel i is `kiln_kernel_<i>(char* const* bufs,
// const int64_t* p, int threads)` with bufs = its buffers (inputs, then outputs), each pointing
// at the element of index 0, and p = its parameters (sizes, strides: Note [Kernel parameters]),
// appended to *params per kernel. A large graph's kernels go into several sources, compiled side
// by side; graphs of one structure at other sizes give the same source.
std::string generate_cpp(const lower::Schedule& s, size_t first, size_t last,
                         std::vector<std::vector<int64_t>>* params = nullptr);
std::string kernel_symbol(size_t i);

// What every generated source starts with (the precompiled header).
std::string source_prelude();
// One kernel's function, named `symbol`; its parameters go to *params. Kernels of one structure
// give the same text (Note [Kernel parameters]), which inductor compiles once per graph.
std::string generate_kernel(const lower::LoopKernel& k, const std::string& symbol, std::vector<int64_t>* params);

// Work (points) below which a kernel runs on one thread.
inline constexpr int64_t kParallelGrain = 32768;

}  // namespace kiln::compiler::codegen
