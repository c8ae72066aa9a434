// CompileOptions::mode "max-autotune" for inductor's loop kernels (Note [Max-autotune]).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::compiler::autotune {

// The thread count kernel `key` runs fastest with, from `candidates`: read from the disk cache
// (<cache>/autotune/<key>) when an earlier process timed it, else timed now by calling
// run(threads) a few times for each candidate (the kernel writes only its own outputs, so
// running it again is harmless) and kept in the cache.
int pick_threads(const std::string& key, const std::vector<int>& candidates, const std::function<void(int)>& run);

// A key for kernel `index` of a library built from `source`, with these parameters, on this
// many cores.
std::string kernel_key(const std::string& source, size_t index, const std::vector<int64_t>& params, int cores);

}  // namespace kiln::compiler::autotune
