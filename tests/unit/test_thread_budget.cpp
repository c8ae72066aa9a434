// One thread budget (Note [Thread budget]): set_num_threads sizes kiln's pool, the OpenMP default
// and OpenBLAS alike; a BLAS/LAPACK call inside a kiln parallel region runs on its caller's thread.
#include <gtest/gtest.h>

#include <omp.h>

#include <dirent.h>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/blas_threads.h"
#include "core/parallel.h"
#include "kiln/kiln.h"

namespace {

// Restores the budget a test found.
struct SavedBudget {
  int n = kiln::get_num_threads();
  ~SavedBudget() { kiln::set_num_threads(n); }
};

// utime + stime (clock ticks) of each thread of this process, from /proc/self/task/<tid>/stat.
std::map<int, long> task_cpu_ticks() {
  std::map<int, long> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const size_t close = s.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(s.substr(close + 2));  // fields from 3 (state) on
    std::vector<std::string> fields;
    for (std::string t; rest >> t;) fields.push_back(t);
    if (fields.size() < 13) continue;
    out[std::stoi(e->d_name)] = std::stol(fields[11]) + std::stol(fields[12]);  // fields 14, 15
  }
  closedir(d);
  return out;
}

// How many threads spent at least min_ticks of CPU time while f ran.
template <class F>
int busy_threads(F&& f, long min_ticks) {
  auto before = task_cpu_ticks();
  f();
  int busy = 0;
  for (const auto& [tid, ticks] : task_cpu_ticks()) {
    auto it = before.find(tid);
    if (ticks - (it == before.end() ? 0 : it->second) >= min_ticks) ++busy;
  }
  return busy;
}

// OpenBLAS's and OpenMP's idle workers spin for a while after their last job; let them sleep so
// that only the work measured shows up.
void let_workers_sleep() { std::this_thread::sleep_for(std::chrono::milliseconds(400)); }

TEST(ThreadBudget, SetNumThreadsSetsPoolOpenMPAndBlas) {
  SavedBudget saved;
  for (int k : {1, 3, 2}) {
    kiln::set_num_threads(k);
    EXPECT_EQ(kiln::get_num_threads(), k);
    EXPECT_EQ(omp_get_max_threads(), k);  // this thread's OpenMP default (oneDNN, compiled code)
    EXPECT_EQ(kiln::apply_thread_budget(), k);
    if (kiln::cpu::blas_threads() != 0) {
      EXPECT_EQ(kiln::cpu::blas_threads(), k) << "OpenBLAS";
    }
  }
  // As torch.set_num_threads: a count below 1 is an error, and changes nothing.
  EXPECT_THROW(kiln::set_num_threads(0), kiln::Error);
  EXPECT_EQ(kiln::get_num_threads(), 2);
}

TEST(ThreadBudget, CountsBeyondTheMachineAreRefused) {
  SavedBudget saved;
  const int before = kiln::get_num_threads();
  EXPECT_GE(kiln::max_num_threads(), 4);
  try {
    kiln::set_num_threads(100000);
    FAIL() << "set_num_threads(100000) was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("100000 threads is more than kiln runs"), std::string::npos) << e.what();
  }
  EXPECT_THROW(kiln::set_num_threads(kiln::max_num_threads() + 1), kiln::Error);
  EXPECT_THROW(kiln::set_num_threads(0), kiln::Error);
  EXPECT_EQ(kiln::get_num_threads(), before) << "a refused count must leave the budget as it was";
}

TEST(ThreadBudget, OneThenBackRestores) {
  SavedBudget saved;
  const int n = saved.n;
  kiln::set_num_threads(1);
  if (kiln::cpu::blas_threads() != 0) {
    EXPECT_EQ(kiln::cpu::blas_threads(), 1);
  }
  kiln::set_num_threads(n);
  EXPECT_EQ(kiln::get_num_threads(), n);
  EXPECT_EQ(omp_get_max_threads(), n);
  if (kiln::cpu::blas_threads() != 0) {
    EXPECT_EQ(kiln::cpu::blas_threads(), n);
  }
}

TEST(ThreadBudget, InsideAParallelRegionLibrariesGetOneThread) {
  SavedBudget saved;
  kiln::set_num_threads(2);
  std::atomic<int> chunks{0}, blas_not_one{0}, budget_not_one{0};
  kiln::parallel_for(0, 2, 1, [&](int64_t, int64_t) {
    ++chunks;
    if (kiln::cpu::blas_threads() > 1) ++blas_not_one;
    if (kiln::apply_thread_budget() != 1) ++budget_not_one;
  });
  EXPECT_EQ(chunks.load(), 2);
  EXPECT_EQ(blas_not_one.load(), 0);
  EXPECT_EQ(budget_not_one.load(), 0);
  // Back to the budget once the region ends.
  if (kiln::cpu::blas_threads() != 0) {
    EXPECT_EQ(kiln::cpu::blas_threads(), 2);
  }
  EXPECT_EQ(kiln::apply_thread_budget(), 2);
}

// linalg.inv runs LAPACK's getrf/getrs (OpenBLAS's threaded ones where it is the LAPACK).
kiln::Tensor well_conditioned(int64_t n) {
  return kiln::add(kiln::mul(kiln::randn({n, n}, kiln::kFloat64), 0.01), kiln::eye(n, std::nullopt, kiln::kFloat64));
}

TEST(ThreadBudget, LapackInsideARegionDoesNotOversubscribe) {
  if (!kiln::linalg::has_lapack()) GTEST_SKIP() << "kiln was built without LAPACK";
  SavedBudget saved;
  kiln::set_num_threads(2);
  std::vector<kiln::Tensor> as = {well_conditioned(384), well_conditioned(384)};
  std::vector<double> err(2, 1.0);
  let_workers_sleep();
  // Each of the region's 2 threads inverts for ~0.2 s or more; OpenBLAS threads of its own would
  // show up as more busy threads than the budget.
  const int busy = busy_threads(
      [&] {
        kiln::parallel_for(0, 2, 1, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i)
            for (int r = 0; r < 8; ++r) {
              kiln::Tensor x = kiln::linalg::inv(as[i]);
              err[i] =
                  kiln::amax(kiln::abs(kiln::sub(kiln::matmul(as[i], x), kiln::eye(384, std::nullopt, kiln::kFloat64))))
                      .item<double>();
            }
        });
      },
      /*min_ticks=*/3);
  EXPECT_LE(busy, 2) << "threads that ran LAPACK work: more than the budget of 2";
  EXPECT_LT(err[0], 1e-10);
  EXPECT_LT(err[1], 1e-10);
}

TEST(ThreadBudget, TopLevelLapackKeepsToABudgetOfOne) {
  if (!kiln::linalg::has_lapack()) GTEST_SKIP() << "kiln was built without LAPACK";
  SavedBudget saved;
  kiln::set_num_threads(1);
  kiln::Tensor a = well_conditioned(512);
  let_workers_sleep();
  const int busy = busy_threads(
      [&] {
        for (int r = 0; r < 6; ++r) (void)kiln::linalg::inv(a);
      },
      /*min_ticks=*/3);
  EXPECT_LE(busy, 1) << "threads that ran LAPACK work with KILN_NUM_THREADS=1";
}

}  // namespace
