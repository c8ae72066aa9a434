// The C++ JIT: compiles generated source with the system compiler into a shared
// library, loads it with dlopen, and caches it in memory and on disk (Note [JIT cache]).
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace kiln::compiler::jit {

class Library {
 public:
  explicit Library(void* handle) : handle_(handle) {}
  // The address of an extern "C" function; throws naming it when absent.
  void* symbol(const std::string& name) const;

 private:
  void* handle_;  // never closed: kernels may be running on other threads until exit
};

// Source → library, from the in-memory cache, the disk cache, or the compiler.
std::shared_ptr<const Library> compile_cpp(const std::string& source);
// Several at once: the compilers run side by side (one per core).
std::vector<std::shared_ptr<const Library>> compile_cpp(const std::vector<std::string>& sources);

struct JitStats {
  int compiler_runs = 0;  // processes of the C++ compiler started
  int disk_hits = 0;      // libraries loaded from KILN_CACHE_DIR
  int memory_hits = 0;
  double compile_seconds = 0;  // wall time spent in the compiler
};
JitStats jit_stats();
void reset_memory_cache();  // kiln::compiler::reset(); the disk cache stays

// $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln.
std::string cache_dir();
// The compiler command: $KILN_CXX, else $CXX, else "c++".
std::string compiler_command();
// -O3 -march=native -fopenmp ... (in the cache key).
std::string compiler_flags();

}  // namespace kiln::compiler::jit
