// kiln bench ops: CPU kernels against their hardware bounds, measured in one
// run (medians of repeated samples; ratios, since absolute times drift).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kiln/kiln.h"
#include "kiln/parallel.h"
#include "tools/kiln/commands.h"

#ifdef KILN_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace kiln::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Seconds per call of f, one sample of at least ~30 ms.
double time_sample(const std::function<void()>& f, int inner) {
  auto s = Clock::now();
  for (int i = 0; i < inner; ++i) f();
  return std::chrono::duration<double>(Clock::now() - s).count() / inner;
}
int inner_count(const std::function<void()>& f) {
  f();  // warm-up (allocator caches, BLAS threads)
  return std::max(1, static_cast<int>(0.03 / std::max(time_sample(f, 1), 1e-9)));
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
// Median seconds per call of f and of its bound g, sampled alternately so that
// drift on a shared machine affects both alike.
std::pair<double, double> time_pair(const std::function<void()>& f, const std::function<void()>& g, int repeat) {
  int nf = inner_count(f), ng = inner_count(g);
  std::vector<double> a, b;
  for (int r = 0; r < repeat; ++r) {
    a.push_back(time_sample(f, nf));
    b.push_back(time_sample(g, ng));
  }
  return {median(a), median(b)};
}
double time_median(const std::function<void()>& f, int repeat) {
  int n = inner_count(f);
  std::vector<double> a;
  for (int r = 0; r < repeat; ++r) a.push_back(time_sample(f, n));
  return median(a);
}

// Parallel memcpy: the bandwidth bound elementwise kernels are compared with.
void par_memcpy(char* dst, const char* src, int64_t n) {
  const int64_t chunk = int64_t(1) << 20, chunks = (n + chunk - 1) / chunk;
#pragma omp parallel for num_threads(get_num_threads())
  for (int64_t c = 0; c < chunks; ++c) std::memcpy(dst + c * chunk, src + c * chunk, std::min(chunk, n - c * chunk));
}

struct Row {
  std::string name, measure, bound;
  double value, bound_value, target;
};

}  // namespace

int cmd_bench_ops(const BenchOptions& o) {
  std::vector<Row> rows;
  const int rep = std::max(3, o.repeat);

  // 1. float32 GEMM 1024^3 through kiln::mm vs the BLAS called directly.
  {
    const int64_t n = 1024;
    Tensor a = randn({n, n}), b = randn({n, n});
    Tensor c = empty({n, n});
    double flops = 2.0 * n * n * n;
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* pc = c.data_ptr<float>();
#ifdef KILN_HAVE_OPENBLAS
    // OpenBLAS with its own threads (kiln gives it the budget outside parallel regions), as a
    // user calling it directly would run it (kiln runs it single-threaded in its own blocks).
    auto direct = [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, pa, n, pb, n, 0.0f, pc, n);
    };
    // Not interleaved: OpenBLAS's and OpenMP's worker threads keep spinning for a
    // while after a call and would slow whichever side runs next.
    double t_kiln = time_median([&] { (void)mm(a, b); }, rep);
    double t_blas = time_median(direct, rep);
    rows.push_back({"mm float32 1024^3", "GFLOP/s", "cblas_sgemm (OpenBLAS) direct", flops / t_kiln / 1e9,
                    flops / t_blas / 1e9, 0.9});
#else
    // No BLAS to compare with: the absolute figure only.
    (void)pa, (void)pb, (void)pc;
    double t_kiln = time_median([&] { (void)mm(a, b); }, rep);
    rows.push_back({"mm float32 1024^3", "GFLOP/s", "none (no OpenBLAS)", flops / t_kiln / 1e9, 0, 0.9});
#endif
  }

  // 2. Elementwise ops on 16M float32 vs memcpy of the same bytes (bytes read + written).
  const int64_t big = 16 << 20;
  Tensor x = randn({big}), y = randn({big});
  std::vector<char> src(big * 4 * 2), dst(big * 4 * 2);
  std::memset(src.data(), 1, src.size());
  std::memset(dst.data(), 0, dst.size());
  auto copy = [&] { par_memcpy(dst.data(), src.data(), big * 4); };
  // Bandwidth in bytes read + written per second, each case against a memcpy sampled alongside it.
  auto elementwise = [&](const char* name, int arrays, const std::function<void()>& f) {
    auto [t, t_copy] = time_pair(f, copy, rep);
    rows.push_back({name, "GB/s", "parallel memcpy", static_cast<double>(arrays) * big * 4 / t / 1e9,
                    2.0 * big * 4 / t_copy / 1e9, 0.5});
  };
  elementwise("neg float32 16M (unary)", 2, [&] { (void)neg(x); });
  elementwise("exp float32 16M (unary)", 2, [&] { (void)exp(x); });
  elementwise("relu float32 16M (unary)", 2, [&] { (void)relu(x); });
  elementwise("add float32 16M (binary)", 3, [&] { (void)add(x, y); });
  elementwise("mul by scalar float32 16M", 2, [&] { (void)mul(x, 2.0); });
  elementwise("add_ in place float32 16M", 3, [&] { x.add_(y); });

  // 3. Reductions read each byte once: bytes read per second vs memcpy's read+write bandwidth.
  elementwise("sum float32 16M (full)", 1, [&] { (void)sum(x); });
  elementwise("amax float32 16M (full)", 1, [&] { (void)amax(x); });
  {
    Tensor m = randn({4096, 4096});
    elementwise("sum float32 4096x4096 dim=1", 1, [&] { (void)sum(m, {1}); });
    elementwise("sum float32 4096x4096 dim=0", 1, [&] { (void)sum(m, {0}); });
  }

  // 4. conv2d 3x3, 64->64 channels on 1x64x56x56 vs a GEMM of the same FLOPs (M=64, N=3136, K=576).
  {
    Tensor in = randn({1, 64, 56, 56}), w = randn({64, 64, 3, 3});
    double flops = 2.0 * 64 * 56 * 56 * 64 * 9;
    Tensor ga = randn({64, 576}), gb = randn({576, 3136});
    auto [t_conv, t_gemm] = time_pair([&] { (void)conv2d(in, w, {}, 1, 1); }, [&] { (void)mm(ga, gb); }, rep);
    rows.push_back(
        {"conv2d 3x3 64x56x56", "GFLOP/s", "mm of the same FLOPs", flops / t_conv / 1e9, flops / t_gemm / 1e9, 0.7});
  }

  // 5. Dispatch overhead: one op on a 1-element tensor.
  {
    Tensor s = ones({1}), s2 = ones({1});
    double t = time_median([&] { (void)add(s, s2); }, rep);
    rows.push_back({"dispatch: add on 1 element", "us/op", "target", t * 1e6, 0.5, 0});
    Tensor g = ones({1}).requires_grad_(true);
    double tg = time_median([&] { (void)add(g, s2); }, rep);
    rows.push_back({"dispatch: add with autograd", "us/op", "target", tg * 1e6, 1.0, 0});
    // Recording: a compiled chain of 100 adds, re-recorded each call (its graph run excluded).
    auto chain = compile(
        [](const Tensor& x, const Tensor& y) {
          Tensor z = x;
          for (int i = 0; i < 100; ++i) z = add(z, y);
          return z;
        },
        {.backend = "eager"});
    (void)chain(s, s2);
    std::vector<double> per_op;
    for (int r = 0; r < std::max(rep, 5); ++r) {
      for (int i = 0; i < 50; ++i) (void)chain(s, s2);
      const auto& st = chain.stats();
      per_op.push_back((st.last_call_us - st.last_run_us) / static_cast<double>(std::max<size_t>(st.last_call_ops, 1)));
    }
    rows.push_back({"recording: add, per op", "us/op", "target", median(per_op), 0.5, 0});
  }

  if (o.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const Row& r : rows)
      arr.push_back({{"name", r.name},
                     {"measure", r.measure},
                     {"value", r.value},
                     {"bound", r.bound},
                     {"bound_value", r.bound_value},
                     {"ratio", r.bound_value > 0 ? r.value / r.bound_value : 0.0}});
    std::cout << nlohmann::json{{"threads", get_num_threads()}, {"blas", cpu_info("blas")}, {"results", arr}}.dump()
              << "\n";
    return 0;
  }
  std::printf("kiln bench ops: %d threads, BLAS %s, median of %d samples\n", get_num_threads(),
              cpu_info("blas").c_str(), rep);
  std::printf("%-32s %12s %10s  %-32s %8s %7s\n", "case", "kiln", "", "bound", "ratio", "target");
  for (const Row& r : rows) {
    if (r.measure == "us/op") {
      std::printf(
          "%-32s %12.3f %-10s  %-32s %8s %7s\n", r.name.c_str(), r.value, r.measure.c_str(),
          r.bound_value > 0 ? ("(target <= " + std::to_string(r.bound_value).substr(0, 3) + " us)").c_str() : "", "",
          "");
      continue;
    }
    if (r.bound_value <= 0) {
      std::printf("%-32s %12.2f %-10s  %-22s\n", r.name.c_str(), r.value, r.measure.c_str(), r.bound.c_str());
      continue;
    }
    std::printf("%-32s %12.2f %-10s  %-22s %9.2f %8.2f %7.2f\n", r.name.c_str(), r.value, r.measure.c_str(),
                r.bound.c_str(), r.bound_value, r.value / r.bound_value, r.target);
  }
  return 0;
}

}  // namespace kiln::cli
