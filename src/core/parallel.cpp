#include "core/parallel.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "kiln/error.h"

namespace kiln {
namespace {
// The most threads set_num_threads takes: oversubscribing a few times over is a user's choice,
// but a count far beyond the machine only crawls (each step's time grows with the threads:
// 64 threads on 2 cores train the digits CNN 12x slower) or hangs (libgomp cannot create 100000).
constexpr int kThreadsPerCore = 4;

int hardware_threads() {
  unsigned hc = std::thread::hardware_concurrency();
  return hc ? static_cast<int>(hc) : 1;
}

// KILN_NUM_THREADS when it is a count kiln accepts, else the cores. This runs while the library
// loads, where an exception would abort the program: a bad value is named on stderr instead,
// and a count above max_num_threads() is clamped to it (libgomp fails to create 100000
// threads and the program hangs).
int initial_threads() {
  const char* env = std::getenv("KILN_NUM_THREADS");
  if (!env || !*env) return hardware_threads();
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(env, &end, 10);
  if (end == env || *end != '\0' || errno == ERANGE || n < 1) {
    std::fprintf(stderr, "kiln: KILN_NUM_THREADS='%s' is not a positive integer; using %d threads (the cores)\n", env,
                 hardware_threads());
    return hardware_threads();
  }
  if (n > max_num_threads()) {
    std::fprintf(stderr, "kiln: KILN_NUM_THREADS=%ld is more than kiln runs (at most %d here); using %d threads\n", n,
                 max_num_threads(), max_num_threads());
    return max_num_threads();
  }
  return static_cast<int>(n);
}
std::atomic<int>& thread_count() {
  static std::atomic<int> n{initial_threads()};
  return n;
}

// Guards the hooks' state: the list, and how many outermost regions run (user threads may
// each run one), so a hook never sees the budget while a region still runs.
std::mutex& budget_mutex() {
  static std::mutex mu;
  return mu;
}
constexpr int kMaxHooks = 8;
std::array<std::atomic<void (*)(int)>, kMaxHooks> g_hooks{};
std::atomic<int> g_num_hooks{0};
int g_active_regions = 0;  // under budget_mutex

void call_hooks(int n) {
  for (int i = 0, e = g_num_hooks.load(std::memory_order_acquire); i < e; ++i) g_hooks[i].load()(n);
}

// omp_set_num_threads is per thread: the value this thread last set, to set it only on change.
thread_local int t_omp_threads = 0;
void set_omp_threads(int n) {
#ifdef _OPENMP
  if (t_omp_threads != n) omp_set_num_threads(n);
#endif
  t_omp_threads = n;
}

// At load time, on the loading thread: OpenMP code that runs without kiln's num_threads
// clause (compiled kernels, oneDNN) starts with the budget, not one thread per core.
[[maybe_unused]] const bool omp_initialized = (set_omp_threads(thread_count().load()), true);
}  // namespace

int get_num_threads() { return thread_count().load(std::memory_order_relaxed); }

int max_num_threads() { return kThreadsPerCore * hardware_threads(); }

void set_num_threads(int n) {
  KILN_CHECK(n > 0, "set_num_threads: expected a positive number of threads, got ", n);
  KILN_CHECK(n <= max_num_threads(), "set_num_threads: ", n, " threads is more than kiln runs: at most ",
             max_num_threads(), " (", kThreadsPerCore, " per hardware thread) on this machine of ", hardware_threads(),
             " hardware threads");
  std::lock_guard<std::mutex> lock(budget_mutex());
  thread_count().store(n, std::memory_order_relaxed);
  set_omp_threads(n);
  if (g_active_regions == 0) call_hooks(n);
}

bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

void add_thread_budget_hook(void (*set_threads)(int n)) {
  KILN_CHECK(set_threads != nullptr, "add_thread_budget_hook: the hook is null");
  std::lock_guard<std::mutex> lock(budget_mutex());
  const int i = g_num_hooks.load();
  KILN_CHECK(i < kMaxHooks, "add_thread_budget_hook: at most ", kMaxHooks, " hooks");
  g_hooks[i].store(set_threads);
  g_num_hooks.store(i + 1, std::memory_order_release);
  set_threads(g_active_regions ? 1 : get_num_threads());
}

int apply_thread_budget() {
  if (in_parallel_region()) return 1;
  const int n = get_num_threads();
  set_omp_threads(n);
  return n;
}

namespace detail {
ParallelRegionGuard::ParallelRegionGuard() : counted_(g_num_hooks.load(std::memory_order_acquire) > 0) {
  if (!counted_) return;
  std::lock_guard<std::mutex> lock(budget_mutex());
  if (g_active_regions++ == 0) call_hooks(1);
}
ParallelRegionGuard::~ParallelRegionGuard() {
  if (!counted_) return;
  std::lock_guard<std::mutex> lock(budget_mutex());
  if (--g_active_regions == 0) call_hooks(get_num_threads());
}
}  // namespace detail

}  // namespace kiln
