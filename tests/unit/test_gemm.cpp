// GEMM kernels against a naive triple loop: float/double checked against a
// double-precision reference with a K-scaled tolerance, integers exactly
// (with wrap-around). Both gemm() (OpenBLAS when built with it) and the own
// kernel detail::gemm_fallback, in every micro-kernel variant the CPU runs,
// are exercised.
//
// Both BLAS configurations can be built without CMake, e.g.
//   g++ -std=c++20 -O2 -fopenmp -Iinclude -Isrc src/core/parallel.cpp src/core/error.cpp src/backend/cpu/gemm.cpp
//       src/backend/cpu/conv_kernels.cpp tests/unit/test_gemm.cpp
//       tests/unit/test_conv_kernels.cpp -lgtest -lgtest_main -lpthread
//       [-DKILN_HAVE_OPENBLAS -lopenblas]
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/gemm.h"
#include "core/parallel.h"

namespace {

using kiln::cpu::gemm;
using kiln::cpu::gemm_strided;
using kiln::cpu::detail::gemm_fallback;

template <class T>
using GemmFn = void (*)(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*,
                        int64_t, T, T*, int64_t);

template <class T>
T random_value(std::mt19937& rng) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(std::uniform_real_distribution<double>(-1.0, 1.0)(rng));
  } else {
    // Full range of T, so products and sums overflow and must wrap.
    return static_cast<T>(rng());
  }
}

template <class T>
T poison() {
  if constexpr (std::is_floating_point_v<T>) {
    return std::numeric_limits<T>::quiet_NaN();
  } else {
    return static_cast<T>(0x5a);
  }
}

// Expected C for one element, given accessors for op(A), op(B). Floats:
// reference value and the magnitude bound sum |alpha a b| + |beta c| that
// scales the tolerance. Integers: exact wrap-around result.
struct RefValue {
  double value = 0, magnitude = 0;
  uint64_t wrapped = 0;
};

template <class T, class GetA, class GetB>
RefValue reference(int64_t i, int64_t j, int64_t K, T alpha, GetA a, GetB b, T beta, T c_old) {
  RefValue r;
  if constexpr (std::is_floating_point_v<T>) {
    double s = 0, m = 0;
    for (int64_t k = 0; k < K; ++k) {
      double p = static_cast<double>(a(i, k)) * static_cast<double>(b(k, j));
      s += p;
      m += std::fabs(p);
    }
    r.value = static_cast<double>(alpha) * s;
    r.magnitude = std::fabs(static_cast<double>(alpha)) * m;
    if (beta != T(0)) {
      r.value += static_cast<double>(beta) * static_cast<double>(c_old);
      r.magnitude += std::fabs(static_cast<double>(beta) * static_cast<double>(c_old));
    }
  } else {
    auto u = [](T x) { return static_cast<uint64_t>(static_cast<int64_t>(x)); };
    uint64_t s = 0;
    for (int64_t k = 0; k < K; ++k) s += u(a(i, k)) * u(b(k, j));
    s *= u(alpha);
    if (beta != T(0)) s += u(beta) * u(c_old);
    r.wrapped = s;
  }
  return r;
}

template <class T>
bool close_enough(T got, const RefValue& r, int64_t K) {
  if constexpr (std::is_floating_point_v<T>) {
    const double eps = std::numeric_limits<T>::epsilon();
    const double tol = 4 * eps * static_cast<double>(K + 2) * r.magnitude + 1e-30;
    return std::isfinite(static_cast<double>(got)) &&
           std::fabs(static_cast<double>(got) - r.value) <= tol;
  } else {
    return got == static_cast<T>(r.wrapped);
  }
}

// One gemm call with stored operands padded by `pad` columns of poison (so a
// kernel reading past the row width shows up as NaN) and a C whose padding
// must stay untouched. beta == 0 fills C with poison: it must not be read.
template <class T>
void check_gemm(GemmFn<T> fn, bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, T beta,
                int64_t pad, uint32_t seed) {
  SCOPED_TRACE("ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
               " M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               " alpha=" + std::to_string(static_cast<double>(alpha)) + " beta=" +
               std::to_string(static_cast<double>(beta)) + " pad=" + std::to_string(pad));
  std::mt19937 rng(seed);
  const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
  const int64_t b_rows = tb ? N : K, b_cols = tb ? K : N;
  const int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = N + pad;
  auto fill = [&](std::vector<T>& v, int64_t rows, int64_t cols, int64_t ld, bool poisoned) {
    v.assign(static_cast<size_t>(std::max<int64_t>(rows * ld, 1)), poison<T>());
    if (poisoned) return;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) v[r * ld + c] = random_value<T>(rng);
  };
  std::vector<T> A, B, C;
  fill(A, a_rows, a_cols, lda, false);
  fill(B, b_rows, b_cols, ldb, false);
  fill(C, M, N, ldc, beta == T(0));
  const std::vector<T> C0 = C;

  fn(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);

  auto a = [&](int64_t i, int64_t k) { return ta ? A[k * lda + i] : A[i * lda + k]; };
  auto b = [&](int64_t k, int64_t j) { return tb ? B[j * ldb + k] : B[k * ldb + j]; };
  int64_t bad = 0;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      RefValue r = reference<T>(i, j, K, alpha, a, b, beta, C0[i * ldc + j]);
      if (!close_enough(C[i * ldc + j], r, K) && bad++ == 0) {
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << +C[i * ldc + j] << " expected "
                      << r.value << " / " << +static_cast<T>(r.wrapped);
      }
    }
    for (int64_t j = N; j < ldc; ++j) {
      bool same = std::is_floating_point_v<T> ? std::isnan(static_cast<double>(C[i * ldc + j]))
                                              : C[i * ldc + j] == C0[i * ldc + j];
      if (!same && bad++ == 0) ADD_FAILURE() << "padding of C row " << i << " was written";
    }
  }
  EXPECT_EQ(bad, 0);
}

// gemm() itself, then the own kernel in every micro-kernel variant this CPU
// can run (the variant is process-wide state, so each entry switches it).
template <class T>
struct Impl {
  std::string name;
  GemmFn<T> fn;
  const char* isa;
};

template <class T>
std::vector<Impl<T>> implementations() {
  const std::string best = kiln::cpu::detail::gemm_fallback_isa();
  std::vector<Impl<T>> out = {{"gemm", &gemm<T>, nullptr}};
  for (const char* isa : {"avx512", "avx2", "baseline"}) {
    if (!kiln::cpu::detail::set_gemm_fallback_isa(isa)) continue;
    out.push_back({std::string("gemm_fallback/") + isa, &gemm_fallback<T>, isa});
    if (std::is_integral_v<T>) break;  // integer GEMM has a single variant
  }
  kiln::cpu::detail::set_gemm_fallback_isa(best.c_str());
  return out;
}

// Selects the implementation's kernel variant for the scope, then restores the best.
template <class T>
struct UseImpl {
  std::string best = kiln::cpu::detail::gemm_fallback_isa();
  testing::ScopedTrace trace;
  explicit UseImpl(const Impl<T>& impl) : trace(__FILE__, __LINE__, impl.name) {
    if (impl.isa) kiln::cpu::detail::set_gemm_fallback_isa(impl.isa);
  }
  ~UseImpl() { kiln::cpu::detail::set_gemm_fallback_isa(best.c_str()); }
};

template <class T>
void run_size_sweep() {
  const int64_t sizes[] = {1, 7, 33, 100, 257};
  uint32_t seed = 1;
  for (const auto& impl : implementations<T>()) {
    UseImpl<T> use(impl);
    const auto fn = impl.fn;
    for (int t = 0; t < 4; ++t) {
      for (int64_t M : sizes)
        for (int64_t N : sizes)
          for (int64_t K : sizes) {
            // The largest cubes are slow in the naive reference.
            if (M * N * K > 100 * 100 * 257) continue;
            check_gemm<T>(fn, t & 1, t & 2, M, N, K, T(1), T(0), 0, seed++);
          }
    }
  }
}

TEST(CpuGemm, BlasName) {
  std::string name = kiln::cpu::blas_name();
  EXPECT_TRUE(name == "openblas" || name == "kiln") << name;
}

TEST(CpuGemm, FallbackIsaSelection) {
  const std::string best = kiln::cpu::detail::gemm_fallback_isa();
  EXPECT_TRUE(best == "avx512" || best == "avx2" || best == "baseline") << best;
  EXPECT_FALSE(kiln::cpu::detail::set_gemm_fallback_isa("no-such-isa"));
  EXPECT_FALSE(kiln::cpu::detail::set_gemm_fallback_isa(nullptr));
  EXPECT_EQ(kiln::cpu::detail::gemm_fallback_isa(), best);
  EXPECT_TRUE(kiln::cpu::detail::set_gemm_fallback_isa("baseline"));
  EXPECT_STREQ(kiln::cpu::detail::gemm_fallback_isa(), "baseline");
  EXPECT_TRUE(kiln::cpu::detail::set_gemm_fallback_isa(best.c_str()));
}

TEST(CpuGemm, FloatSizesAllTransposes) { run_size_sweep<float>(); }
TEST(CpuGemm, DoubleSizesAllTransposes) { run_size_sweep<double>(); }

template <class T>
void run_alpha_beta_ld() {
  const std::pair<double, double> scalars[] = {{1, 0},    {1, 1},   {0.5, -2},
                                               {-1.5, 0}, {0, 0.5}, {0, 0}};
  uint32_t seed = 100;
  for (const auto& impl : implementations<T>()) {
    UseImpl<T> use(impl);
    const auto fn = impl.fn;
    for (int t = 0; t < 4; ++t)
      for (auto [alpha, beta] : scalars)
        for (int64_t pad : {0, 3})
          for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{33, 100, 7},
                                 {100, 1, 257},
                                 {1, 257, 33},
                                 {257, 33, 1}}) {
            check_gemm<T>(fn, t & 1, t & 2, M, N, K, T(alpha), T(beta), pad, seed++);
          }
  }
}

TEST(CpuGemm, FloatAlphaBetaLeadingDims) { run_alpha_beta_ld<float>(); }
TEST(CpuGemm, DoubleAlphaBetaLeadingDims) { run_alpha_beta_ld<double>(); }

// Shapes that cross the fallback's cache blocks (K > KC, N > NC, several MC
// blocks per thread) and the threading split on columns (few rows).
TEST(CpuGemm, FloatAcrossCacheBlocks) {
  uint32_t seed = 500;
  for (const auto& impl : implementations<float>()) {
    UseImpl<float> use(impl);
    const auto fn = impl.fn;
    check_gemm<float>(fn, false, false, 300, 130, 600, 0.75f, 0.5f, 1, seed++);
    check_gemm<float>(fn, true, true, 45, 70, 1100, 1.0f, 0.0f, 2, seed++);
    check_gemm<float>(fn, false, true, 13, 4200, 20, 1.0f, 2.0f, 0, seed++);
    check_gemm<float>(fn, true, false, 5, 9000, 3, -1.0f, 0.0f, 5, seed++);
    check_gemm<float>(fn, false, false, 2000, 3, 300, 1.0f, 0.0f, 0, seed++);
  }
}

TEST(CpuGemm, DoubleAcrossCacheBlocks) {
  uint32_t seed = 600;
  for (const auto& impl : implementations<double>()) {
    UseImpl<double> use(impl);
    const auto fn = impl.fn;
    check_gemm<double>(fn, false, false, 300, 130, 600, 0.75, 0.5, 1, seed++);
    check_gemm<double>(fn, true, false, 7, 2100, 300, 1.0, 0.0, 0, seed++);
    check_gemm<double>(fn, false, true, 500, 40, 520, 1.0, 1.0, 3, seed++);
  }
}

template <class T>
void run_integer() {
  uint32_t seed = 900;
  const std::pair<int, int> scalars[] = {{1, 0}, {1, 1}, {3, -2}, {-1, 5}, {0, 1}};
  for (const auto& impl : implementations<T>()) {
    UseImpl<T> use(impl);
    const auto fn = impl.fn;
    for (int t = 0; t < 4; ++t)
      for (auto [alpha, beta] : scalars)
        for (auto [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1},
                               {7, 33, 100},
                               {33, 7, 1},
                               {20, 300, 40},
                               {100, 100, 257}}) {
          check_gemm<T>(fn, t & 1, t & 2, M, N, K, static_cast<T>(alpha), static_cast<T>(beta), t,
                        seed++);
        }
  }
}

TEST(CpuGemm, Int64) { run_integer<int64_t>(); }
TEST(CpuGemm, Int32) { run_integer<int32_t>(); }
TEST(CpuGemm, Int16) { run_integer<int16_t>(); }
TEST(CpuGemm, Int8) { run_integer<int8_t>(); }
TEST(CpuGemm, UInt8) { run_integer<uint8_t>(); }

TEST(CpuGemm, EmptyDimensions) {
  for (const auto& impl : implementations<float>()) {
    UseImpl<float> use(impl);
    const auto fn = impl.fn;
    std::vector<float> C = {1, 2, 3, 4, 5, 6};
    // M or N == 0: nothing is touched, even with null operands.
    fn(false, false, 0, 3, 4, 1.f, nullptr, 4, nullptr, 3, 0.f, C.data(), 3);
    fn(false, false, 2, 0, 4, 1.f, nullptr, 4, nullptr, 1, 0.f, C.data(), 3);
    EXPECT_EQ(C, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    // K == 0: C = beta * C, and beta == 0 clears NaN.
    fn(false, false, 2, 3, 0, 1.f, nullptr, 1, nullptr, 3, 2.f, C.data(), 3);
    EXPECT_EQ(C, (std::vector<float>{2, 4, 6, 8, 10, 12}));
    C[4] = std::numeric_limits<float>::quiet_NaN();
    fn(true, true, 2, 3, 0, 1.f, nullptr, 2, nullptr, 1, 0.f, C.data(), 3);
    EXPECT_EQ(C, (std::vector<float>(6, 0.f)));
  }
}

// Inside a kiln parallel region gemm() must still be correct (it switches to
// the single-threaded own kernel there).
TEST(CpuGemm, InsideParallelRegion) {
  std::vector<int> ok(4, 0);
  kiln::parallel_for(0, 4, 1, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t M = 70, N = 90, K = 300;
      std::vector<float> A(M * K), B(K * N), C(M * N);
      for (int64_t i = 0; i < M * K; ++i) A[i] = float((i * 7 + r) % 13) - 6;
      for (int64_t i = 0; i < K * N; ++i) B[i] = float((i * 5 + r) % 11) - 5;
      gemm<float>(false, false, M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, C.data(), N);
      bool good = true;
      for (int64_t i = 0; i < M && good; ++i)
        for (int64_t j = 0; j < N && good; ++j) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += double(A[i * K + k]) * B[k * N + j];
          good = C[i * N + j] == float(s);  // small integers: exact
        }
      ok[r] = good;
    }
  });
  EXPECT_EQ(ok, (std::vector<int>(4, 1)));
}

// gemm_strided over views of bigger buffers: transposed, column-major,
// doubly strided (forces packing), negative and zero (broadcast) strides.
template <class T>
void check_strided(int64_t M, int64_t N, int64_t K, int64_t sa0, int64_t sa1, int64_t sb0,
                   int64_t sb1, int64_t sc0, int64_t sc1, T alpha, T beta, uint32_t seed) {
  SCOPED_TRACE("M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
               " sa=(" + std::to_string(sa0) + "," + std::to_string(sa1) + ") sb=(" +
               std::to_string(sb0) + "," + std::to_string(sb1) + ") sc=(" + std::to_string(sc0) +
               "," + std::to_string(sc1) + ")");
  std::mt19937 rng(seed);
  // Each view gets a buffer big enough for its extreme offsets, with the base
  // pointer placed so negative strides stay in bounds.
  auto span = [](int64_t n0, int64_t s0, int64_t n1, int64_t s1, int64_t& base) {
    int64_t lo = 0, hi = 0;
    for (int64_t off : {(n0 - 1) * s0, (n1 - 1) * s1}) (off < 0 ? lo : hi) += off;
    base = -lo;
    return hi - lo + 1;
  };
  int64_t a_base, b_base, c_base;
  std::vector<T> A(span(M, sa0, K, sa1, a_base)), B(span(K, sb0, N, sb1, b_base));
  std::vector<T> C(span(M, sc0, N, sc1, c_base));
  for (auto& x : A) x = random_value<T>(rng);
  for (auto& x : B) x = random_value<T>(rng);
  for (auto& x : C) x = beta == T(0) ? poison<T>() : random_value<T>(rng);
  std::vector<T> C0 = C;
  const T* a = A.data() + a_base;
  const T* b = B.data() + b_base;
  T* c = C.data() + c_base;
  gemm_strided<T>(M, N, K, alpha, a, sa0, sa1, b, sb0, sb1, beta, c, sc0, sc1);
  auto ga = [&](int64_t i, int64_t k) { return a[i * sa0 + k * sa1]; };
  auto gb = [&](int64_t k, int64_t j) { return b[k * sb0 + j * sb1]; };
  int64_t bad = 0;
  std::vector<char> is_out(C.size(), 0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      const int64_t off = c_base + i * sc0 + j * sc1;
      is_out[off] = 1;
      RefValue r = reference<T>(i, j, K, alpha, ga, gb, beta, C0[off]);
      if (!close_enough(C[off], r, K) && bad++ == 0)
        ADD_FAILURE() << "C(" << i << "," << j << ") = " << +C[off] << " expected " << r.value;
    }
  for (size_t o = 0; o < C.size(); ++o) {
    if (is_out[o]) continue;
    bool same = std::is_floating_point_v<T> && std::isnan(static_cast<double>(C0[o]))
                    ? std::isnan(static_cast<double>(C[o]))
                    : C[o] == C0[o];
    if (!same && bad++ == 0) ADD_FAILURE() << "element outside the C view written at " << o;
  }
  EXPECT_EQ(bad, 0);
}

template <class T>
void run_strided() {
  uint32_t s = 7;
  const int64_t M = 33, N = 20, K = 45;
  // Row-major, transposed A, transposed B, both transposed (unit strides).
  check_strided<T>(M, N, K, K, 1, N, 1, N, 1, T(1), T(0), s++);
  check_strided<T>(M, N, K, 1, M + 2, N, 1, N + 1, 1, T(1), T(1), s++);
  check_strided<T>(M, N, K, K, 1, 1, K + 5, N, 1, T(2), T(0), s++);
  check_strided<T>(M, N, K, 1, M, 1, K, N, 1, T(1), T(-1), s++);
  // Column-major C (computed as C^T = B^T A^T).
  check_strided<T>(M, N, K, K, 1, N, 1, 1, M, T(1), T(0), s++);
  check_strided<T>(M, N, K, 1, M, N, 1, 1, M + 4, T(1), T(2), s++);
  // Non-unit strides everywhere: packed temporaries, C gathered and scattered.
  check_strided<T>(M, N, K, 2 * K, 2, 3 * N, 3, 2 * N, 2, T(1), T(0), s++);
  check_strided<T>(M, N, K, 2 * K, 2, 3 * N, 3, 2 * N, 2, T(1), T(1), s++);
  // Negative strides (flipped views) and a zero stride (broadcast operand).
  check_strided<T>(M, N, K, -K, 1, N, -1, N, 1, T(1), T(0), s++);
  check_strided<T>(M, N, K, 0, 1, N, 1, N, 1, T(1), T(0), s++);
  check_strided<T>(M, N, K, K, 1, 0, 1, N, 1, T(1), T(1), s++);
  // Degenerate shapes: vectors with arbitrary strides in size-1 dimensions.
  check_strided<T>(1, N, K, 999, 1, N, 1, 12345, 1, T(1), T(0), s++);
  check_strided<T>(M, 1, K, K, 1, 7, 999, 3, 999, T(1), T(1), s++);
  check_strided<T>(M, N, 1, 1, 999, 999, 1, N, 1, T(1), T(0), s++);
  check_strided<T>(M, N, 0, 1, 1, 1, 1, N, 1, T(1), T(2), s++);
}

TEST(CpuGemmStrided, Float) { run_strided<float>(); }
TEST(CpuGemmStrided, Double) { run_strided<double>(); }
TEST(CpuGemmStrided, Int32) { run_strided<int32_t>(); }
TEST(CpuGemmStrided, Int8) { run_strided<int8_t>(); }

}  // namespace
