// Standalone check and benchmark of kiln's tensor-core attention kernels (src/backend/cuda/
// flash_mma.cuh), built with nvcc alone so the kernels can be tried on a GPU machine in seconds:
//   nvcc -O3 -std=c++20 -arch=sm_90 -I src bench/cuda/flash_attention.cu -o flash_attention && ./flash_attention
// Each case compares forward (out, logsumexp) and backward (dq, dk, dv) with float32 reference
// kernels computed from the same rounded inputs, then times forward and backward at the zoo's
// attention shapes and prints TFLOP/s (forward 4 N L S E flops, halved when causal; backward 2.5x).
// Exit status 1 when a case is outside tolerance.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cuda/flash_mma.cuh"

using kiln::cuda::flash::Problem;

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                       \
    }                                                                                     \
  } while (0)

template <class T>
__global__ void to_float(const T* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = float(x[i]);
}

__device__ bool keeps(const Problem& p, int64_t i, int64_t j) { return !p.causal || j <= i; }
__device__ float dotf(const float* a, const float* b, int E) {
  float s = 0;
  for (int e = 0; e < E; ++e) s += a[e] * b[e];
  return s;
}

// Reference, one thread per row: lse and out.
__global__ void ref_forward(Problem p, const float* q, const float* k, const float* v, float* out, float* lse) {
  int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= p.N * p.L) return;
  int64_t n = r / p.L, i = r % p.L;
  float m = -INFINITY;
  for (int64_t j = 0; j < p.S; ++j)
    if (keeps(p, i, j)) m = fmaxf(m, dotf(q + r * p.E, k + (n * p.S + j) * p.E, p.E) * p.scale);
  float l = 0;
  for (int e = 0; e < p.E; ++e) out[r * p.E + e] = 0;
  for (int64_t j = 0; j < p.S; ++j) {
    if (!keeps(p, i, j)) continue;
    float w = expf(dotf(q + r * p.E, k + (n * p.S + j) * p.E, p.E) * p.scale - m);
    l += w;
    for (int e = 0; e < p.E; ++e) out[r * p.E + e] += w * v[(n * p.S + j) * p.E + e];
  }
  for (int e = 0; e < p.E; ++e) out[r * p.E + e] /= l;
  lse[r] = m + logf(l);
}

// Reference gradients, one thread per row of q (dq) or of k (dk, dv); delta from the reference out.
__global__ void ref_dq(Problem p, const float* go, const float* q, const float* k, const float* v, const float* lse,
                       const float* delta, float* dq) {
  int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= p.N * p.L) return;
  int64_t n = r / p.L, i = r % p.L;
  for (int e = 0; e < p.E; ++e) dq[r * p.E + e] = 0;
  for (int64_t j = 0; j < p.S; ++j) {
    if (!keeps(p, i, j)) continue;
    const float* kr = k + (n * p.S + j) * p.E;
    float w = expf(dotf(q + r * p.E, kr, p.E) * p.scale - lse[r]);
    float ds = w * (dotf(go + r * p.E, v + (n * p.S + j) * p.E, p.E) - delta[r]);
    for (int e = 0; e < p.E; ++e) dq[r * p.E + e] += ds * kr[e] * p.scale;
  }
}
__global__ void ref_dkdv(Problem p, const float* go, const float* q, const float* k, const float* v, const float* lse,
                         const float* delta, float* dk, float* dv) {
  int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= p.N * p.S) return;
  int64_t n = r / p.S, j = r % p.S;
  for (int e = 0; e < p.E; ++e) dk[r * p.E + e] = dv[r * p.E + e] = 0;
  for (int64_t i = 0; i < p.L; ++i) {
    if (!keeps(p, i, j)) continue;
    int64_t qr = n * p.L + i;
    float w = expf(dotf(q + qr * p.E, k + r * p.E, p.E) * p.scale - lse[qr]);
    float ds = w * (dotf(go + qr * p.E, v + r * p.E, p.E) - delta[qr]);
    for (int e = 0; e < p.E; ++e) {
      dk[r * p.E + e] += ds * q[qr * p.E + e] * p.scale;
      dv[r * p.E + e] += w * go[qr * p.E + e];
    }
  }
}
__global__ void ref_delta(int64_t rows, int E, const float* go, const float* o, float* d) {
  int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r < rows) d[r] = dotf(go + r * E, o + r * E, E);
}

unsigned grid(int64_t n) { return unsigned((n + 127) / 128); }

struct Buf {
  float* p = nullptr;
  int64_t n = 0;
  explicit Buf(int64_t n_) : n(n_) { CHECK(cudaMalloc(&p, std::max<int64_t>(n, 1) * 4)); }
  ~Buf() { cudaFree(p); }
  std::vector<float> host() const {
    std::vector<float> h(n);
    CHECK(cudaMemcpy(h.data(), p, n * 4, cudaMemcpyDeviceToHost));
    return h;
  }
};
template <class T>
struct TBuf {
  T* p = nullptr;
  int64_t n = 0;
  explicit TBuf(int64_t n_) : n(n_) { CHECK(cudaMalloc(&p, std::max<int64_t>(n, 1) * sizeof(T))); }
  ~TBuf() { cudaFree(p); }
  void random(std::mt19937& g, float scale) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<T> h(n);
    for (auto& x : h) x = T(d(g));
    CHECK(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  Buf as_float() const {
    Buf b(n);
    if (n) to_float<T><<<grid(n), 128>>>(p, b.p, n);
    return b;
  }
};

// max |a - b| / max(max |b|, 1e-3)
double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 1e-3;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) && a[i] != b[i]) return INFINITY;
    d = std::max(d, double(std::fabs(a[i] - b[i])));
    m = std::max(m, double(std::fabs(b[i])));
  }
  return d / m;
}

template <class T>
bool check(const char* tname, int64_t N, int64_t L, int64_t S, int E, bool causal) {
  Problem p = Problem::dense(N, L, S, E, causal, 1.0f / std::sqrt(float(E)));
  std::mt19937 gen(1234 + L + S + E + causal);
  TBuf<T> q(N * L * E), k(N * S * E), v(N * S * E), go(N * L * E), out(N * L * E), dq(N * L * E), dk(N * S * E),
      dv(N * S * E);
  q.random(gen, 1.0f);
  k.random(gen, 1.0f);
  v.random(gen, 1.0f);
  go.random(gen, 1.0f);
  Buf lse(N * L), delta(N * L);
  CHECK(kiln::cuda::flash::launch_forward<T>(p, q.p, k.p, v.p, out.p, lse.p, 0));
  CHECK(kiln::cuda::flash::launch_backward<T>(p, go.p, q.p, k.p, v.p, out.p, lse.p, nullptr, delta.p, dq.p, dk.p,
                                              dv.p, 0));
  Buf qf = q.as_float(), kf = k.as_float(), vf = v.as_float(), gf = go.as_float();
  Buf ro(N * L * E), rl(N * L), rd(N * L), rdq(N * L * E), rdk(N * S * E), rdv(N * S * E);
  ref_forward<<<grid(N * L), 128>>>(p, qf.p, kf.p, vf.p, ro.p, rl.p);
  ref_delta<<<grid(N * L), 128>>>(N * L, E, gf.p, ro.p, rd.p);
  ref_dq<<<grid(N * L), 128>>>(p, gf.p, qf.p, kf.p, vf.p, rl.p, rd.p, rdq.p);
  ref_dkdv<<<grid(N * S), 128>>>(p, gf.p, qf.p, kf.p, vf.p, rl.p, rd.p, rdk.p, rdv.p);
  CHECK(cudaDeviceSynchronize());
  double eo = rel_err(out.as_float().host(), ro.host()), el = rel_err(lse.host(), rl.host()),
         eq = rel_err(dq.as_float().host(), rdq.host()), ek = rel_err(dk.as_float().host(), rdk.host()),
         ev = rel_err(dv.as_float().host(), rdv.host());
  const double tol = sizeof(T) == 4 ? 1e-4 : 2e-2;
  bool ok = eo < tol && el < tol && eq < tol && ek < tol && ev < tol;
  std::printf("check %-9s N=%ld L=%ld S=%ld E=%d causal=%d: out %.2e lse %.2e dq %.2e dk %.2e dv %.2e %s\n", tname,
              long(N), long(L), long(S), E, int(causal), eo, el, eq, ek, ev, ok ? "ok" : "FAIL");
  return ok;
}

template <class T>
void bench(const char* name, int64_t N, int64_t L, int E, bool causal) {
  Problem p = Problem::dense(N, L, L, E, causal, 1.0f / std::sqrt(float(E)));
  std::mt19937 gen(7);
  TBuf<T> q(N * L * E), k(N * L * E), v(N * L * E), go(N * L * E), out(N * L * E), dq(N * L * E), dk(N * L * E),
      dv(N * L * E);
  q.random(gen, 1.0f);
  k.random(gen, 1.0f);
  v.random(gen, 1.0f);
  go.random(gen, 1.0f);
  Buf lse(N * L), delta(N * L);
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  auto time = [&](auto&& fn) {
    for (int i = 0; i < 3; ++i) fn();
    std::vector<float> ms;
    for (int i = 0; i < 20; ++i) {
      CHECK(cudaEventRecord(a));
      fn();
      CHECK(cudaEventRecord(b));
      CHECK(cudaEventSynchronize(b));
      float t;
      CHECK(cudaEventElapsedTime(&t, a, b));
      ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  float fwd = time([&] { CHECK(kiln::cuda::flash::launch_forward<T>(p, q.p, k.p, v.p, out.p, lse.p, 0)); });
  float bwd = time([&] {
    CHECK(kiln::cuda::flash::launch_backward<T>(p, go.p, q.p, k.p, v.p, out.p, lse.p, nullptr, delta.p, dq.p, dk.p,
                                                dv.p, 0));
  });
  double flops = 4.0 * N * L * L * E * (causal ? 0.5 : 1.0);
  std::printf("bench %-9s %-10s N=%ld L=%ld E=%d causal=%d: forward %.3f ms (%.1f TFLOP/s), backward %.3f ms (%.1f "
              "TFLOP/s)\n",
              name, std::is_same_v<T, float> ? "float32" : std::is_same_v<T, __half> ? "float16" : "bfloat16", long(N), long(L), E,
              int(causal), fwd, flops / fwd * 1e-9, bwd, 2.5 * flops / bwd * 1e-9);
}

int main(int argc, char** argv) {
  // --bench: timings only (one launch per kernel under a profiler is then easy to pick).
  const bool bench_only = argc > 1 && std::string(argv[1]) == "--bench";
  bool ok = true;
  for (bool causal : {false, true}) {
    if (bench_only) break;
    ok &= check<__nv_bfloat16>("bfloat16", 3, 128, 128, 64, causal);
    ok &= check<__nv_bfloat16>("bfloat16", 2, 70, 130, 64, causal);
    ok &= check<__nv_bfloat16>("bfloat16", 2, 130, 70, 128, causal);
    ok &= check<__nv_bfloat16>("bfloat16", 2, 200, 200, 32, causal);
    ok &= check<__nv_bfloat16>("bfloat16", 1, 33, 257, 96, causal);
    ok &= check<__half>("float16", 2, 256, 256, 64, causal);
    ok &= check<__half>("float16", 2, 100, 90, 128, causal);
    ok &= check<__half>("float16", 1, 1, 1, 16, causal);
    ok &= check<float>("float32", 3, 128, 128, 64, causal);
    ok &= check<float>("float32", 2, 70, 130, 64, causal);
    ok &= check<float>("float32", 2, 130, 70, 32, causal);
    ok &= check<float>("float32", 1, 33, 257, 40, causal);
  }
  bench<__nv_bfloat16>("gpt2", 96, 1024, 64, true);
  bench<__nv_bfloat16>("gpt_nano", 192, 256, 64, true);
  bench<__half>("gpt2", 96, 1024, 64, true);
  bench<float>("gpt2", 96, 1024, 64, true);
  bench<float>("gpt_nano", 192, 256, 64, true);
  bench<__nv_bfloat16>("E128", 16, 2048, 128, false);
  bench<__nv_bfloat16>("E128c", 16, 2048, 128, true);
  std::printf("%s\n", ok ? "all checks passed" : "SOME CHECKS FAILED");
  return ok ? 0 : 1;
}
