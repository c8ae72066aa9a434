// Files of the JIT caches (C++ libraries, CUDA cubins): hashing, reading, and
// writing through a temporary name and a rename so a reader sees a whole file or none.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::compiler::jit {

uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull);
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull);
std::string hex(uint64_t v);  // 16 hex digits
bool read_file(const std::string& path, std::string& out);
// Writes data to path through a temporary name and a rename.
void write_atomic(const std::string& path, const std::string& data);
void make_dirs(const std::string& dir);  // mkdir -p; a kiln::Error naming KILN_CACHE_DIR on failure

}  // namespace kiln::compiler::jit
