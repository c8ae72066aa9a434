// mm and bmm on cuBLAS (cublasGemmStridedBatchedEx), _addmm_bias on cuBLASLt with the bias in
// the epilogue (Note [Bias epilogue]); addmm, baddbmm, linear and matmul are composites over them. float32 computes in float32 unless backends::allow_tf32(true);
// float16/bfloat16 accumulate in float32; float64 in float64.
#include <atomic>
#include <unordered_map>

#include <cstring>
#include <optional>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <tuple>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/launch.h"
#include "kiln/cuda.h"
#include "ops/registry.h"

namespace kiln::backends {
namespace {
std::atomic<bool> g_allow_tf32{false};
}
void allow_tf32(bool on) { g_allow_tf32 = on; }
bool allow_tf32() { return g_allow_tf32; }
}  // namespace kiln::backends

namespace kiln::cuda {
namespace {

void check_cublas(cublasStatus_t st, const char* what) {
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, "CUDA: ", what, " failed: ", cublasGetStatusName(st), ": ",
             cublasGetStatusString(st));
}

// One handle per thread and device (handles are not thread-safe); never destroyed, as
// destroying them during static destruction can race the driver's teardown.
cublasHandle_t handle_for(int device) {
  thread_local std::unordered_map<int, cublasHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasHandle_t h = nullptr;
  check_cublas(cublasCreate(&h), "cublasCreate");
  handles[device] = h;
  return h;
}

// A row-major [rows, cols] matrix (the last two dims of a batch) as cuBLAS sees it: memory
// read column-major is the transpose when rows are dense (op N), the matrix itself when
// columns are (op T).
struct GemmOperand {
  Tensor t;  // keeps a staging copy alive
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

GemmOperand gemm_operand(const Tensor& x) {
  int64_t r = x.size(1), c = x.size(2), sr = x.stride(1), sc = x.stride(2);
  GemmOperand g;
  g.t = x;
  if ((sc == 1 || c == 1) && sr >= std::max<int64_t>(1, c)) {
    g.op = CUBLAS_OP_N;
    g.ld = sr;
  } else if ((sr == 1 || r == 1) && sc >= std::max<int64_t>(1, r)) {
    g.op = CUBLAS_OP_T;
    g.ld = sc;
  } else {
    g.t = make_tensor(x.sizes(), x.dtype(), x.device());
    copy_same_device(g.t, x);
    g.op = CUBLAS_OP_N;
    g.ld = std::max<int64_t>(1, c);
  }
  g.batch_stride = g.t.size(0) == 1 ? 0 : g.t.stride(0);
  g.ptr = g.t.unsafe_impl()->data();
  return g;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::Float32:
      return CUDA_R_32F;
    case DType::Float64:
      return CUDA_R_64F;
    case DType::Float16:
      return CUDA_R_16F;
    case DType::BFloat16:
      return CUDA_R_16BF;
    default:
      KILN_FAIL("mm: not supported yet on cuda for dtype ", t, " (floating dtypes only)");
  }
}

// out[b] = a[b] @ bm[b] (+ out[b] when accumulate) for 3-D a [B, m, k], bm [B, k, n], out [B, m, n]
// (contiguous when accumulating). out may be float32 where a and bm are float16/bfloat16.
// float32 runs on TF32 tensor cores where `tf32` (default: backends::allow_tf32()).
void bmm_cublas(const Tensor& a, const Tensor& bm, const Tensor& out, bool accumulate = false,
                std::optional<bool> tf32 = std::nullopt) {
  const DType t = a.dtype(), to = out.dtype();
  KILN_CHECK(to == t || (to == DType::Float32 && (t == DType::Float16 || t == DType::BFloat16)),
             "internal: bmm_cublas: a ", t, " product into a ", to, " output");
  cudaDataType_t ct = cuda_type(t), cto = cuda_type(to);
  int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  if (out.numel() == 0) return;
  int d = out.device().index;
  DeviceGuard g(d);
  cudaStream_t s = current_cuda_stream(d);
  Tensor c = out.is_contiguous() ? out : make_tensor(out.sizes(), to, out.device());
  KILN_CHECK(!accumulate || c.is_same(out), "internal: bmm_cublas accumulates into contiguous outputs only");
  if (k == 0) {
    if (accumulate) return;
    launch_fill(make_elementwise_args({&c}), 0.0, 0, true, s);
  } else {
    KILN_CHECK(m < (int64_t(1) << 31) && n < (int64_t(1) << 31) && k < (int64_t(1) << 31) && batch < (int64_t(1) << 31),
               "mm: sizes beyond 2^31 are not supported yet on cuda");
    // Row-major C = A B is column-major C^T = B^T A^T.
    GemmOperand ga = gemm_operand(a), gb = gemm_operand(bm);
    cublasHandle_t h = handle_for(d);
    check_cublas(cublasSetStream(h, s), "cublasSetStream");
    const bool use_tf32 = t == DType::Float32 && tf32.value_or(backends::allow_tf32());
    cublasComputeType_t compute = t == DType::Float64 ? CUBLAS_COMPUTE_64F
                                  : use_tf32          ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                      : CUBLAS_COMPUTE_32F;
    double one_d = 1.0, beta_d = accumulate ? 1.0 : 0.0;
    float one_f = 1.0f, beta_f = accumulate ? 1.0f : 0.0f;
    const void* alpha = t == DType::Float64 ? static_cast<const void*>(&one_d) : &one_f;
    const void* beta = t == DType::Float64 ? static_cast<const void*>(&beta_d) : &beta_f;
    check_cublas(
        cublasGemmStridedBatchedEx(h, gb.op, ga.op, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                                   alpha, gb.ptr, ct, static_cast<int>(gb.ld), gb.batch_stride, ga.ptr, ct,
                                   static_cast<int>(ga.ld), ga.batch_stride, beta, c.unsafe_impl()->data(), cto,
                                   static_cast<int>(n), m * n, static_cast<int>(batch), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
  }
  if (!c.is_same(out)) copy_same_device(out, c);
}

// 2-D operands as a batch of one (a stride-0 batch dim costs nothing).
Tensor as_batch(const Tensor& t) {
  Shape sizes{1}, strides{0};
  sizes.insert(sizes.end(), t.sizes().begin(), t.sizes().end());
  strides.insert(strides.end(), t.strides().begin(), t.strides().end());
  return make_view(t, sizes, strides, t.storage_offset());
}

void mm_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  bmm_cublas(as_batch(c.in(0)), as_batch(c.in(1)), as_batch(outs[0]));
}
KILN_REGISTER_KERNEL(mm, CUDA, mm_kernel);

void bmm_kernel(const OpCall& c, std::vector<Tensor>& outs) { bmm_cublas(c.in(0), c.in(1), outs[0]); }
KILN_REGISTER_KERNEL(bmm, CUDA, bmm_kernel);

// ---- _addmm_bias on cuBLASLt (Note [Bias epilogue]) ----
void check_lt(cublasStatus_t st, const char* what) {
  KILN_CHECK(st == CUBLAS_STATUS_SUCCESS, "CUDA: ", what, " failed: ", cublasGetStatusName(st), ": ",
             cublasGetStatusString(st));
}

cublasLtHandle_t lt_handle_for(int device) {
  thread_local std::unordered_map<int, cublasLtHandle_t> handles;
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasLtHandle_t h = nullptr;
  check_lt(cublasLtCreate(&h), "cublasLtCreate");
  handles[device] = h;
  return h;
}

// cuBLASLt's workspace: what its heuristics assume by default on Hopper-class GPUs is more, but
// the bias GEMMs of linear layers find their algorithms within this.
constexpr size_t kLtWorkspace = size_t(4) << 20;

// A GEMM's descriptors and its algorithm, made once per shape, layout and dtype (the heuristic
// query costs tens of microseconds) and kept per thread with the handle they belong to.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
};
using LtKey = std::tuple<int, int, bool, int64_t, int64_t, int64_t, int, int, int64_t, int64_t, int, int, int>;

// The largest power of two (up to 256, cuBLASLt's default assumption) dividing p's address: the
// heuristic must only offer algorithms that take the operands where they are (views may start
// anywhere).
int alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  int r = 256;
  while (r > 1 && a % static_cast<uintptr_t>(r) != 0) r /= 2;
  return r;
}
struct LtKeyHash {
  size_t operator()(const LtKey& k) const {
    size_t h = 0;
    std::apply([&](const auto&... f) { ((h = h * 1000003u ^ std::hash<std::decay_t<decltype(f)>>{}(f)), ...); }, k);
    return h;
  }
};

// D [n x m] = op(A) [n x k] op(B) [k x m] + bias, column-major: the row-major out [m, n] =
// a [m, k] @ b [k, n] read as its transpose, so A is b's memory and B is a's (as bmm_cublas).
const LtPlan& lt_plan(int device, DType t, const GemmOperand& ga, const GemmOperand& gb, const void* out, int64_t m,
                      int64_t n, int64_t k) {
  const bool tf32 = t == DType::Float32 && backends::allow_tf32();
  const int align_a = alignment(gb.ptr), align_b = alignment(ga.ptr), align_d = alignment(out);
  LtKey key{device, static_cast<int>(t), tf32, m, n, k, static_cast<int>(gb.op), static_cast<int>(ga.op), gb.ld, ga.ld,
            align_a, align_b, align_d};
  thread_local std::unordered_map<LtKey, LtPlan, LtKeyHash> plans;
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  LtPlan p;
  const cudaDataType_t ct = cuda_type(t);
  check_lt(cublasLtMatmulDescCreate(&p.desc, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F),
           "cublasLtMatmulDescCreate");
  const cublasOperation_t opa = gb.op, opb = ga.op;
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "cublasLt TRANSA");
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "cublasLt TRANSB");
  check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "cublasLt EPILOGUE");
  const bool an = opa == CUBLAS_OP_N, bn = opb == CUBLAS_OP_N;
  check_lt(cublasLtMatrixLayoutCreate(&p.a, ct, an ? n : k, an ? k : n, gb.ld), "cublasLtMatrixLayoutCreate");
  check_lt(cublasLtMatrixLayoutCreate(&p.b, ct, bn ? k : m, bn ? m : k, ga.ld), "cublasLtMatrixLayoutCreate");
  check_lt(cublasLtMatrixLayoutCreate(&p.d, ct, n, m, n), "cublasLtMatrixLayoutCreate");
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const size_t ws = kLtWorkspace;
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
           "cublasLt workspace preference");
  const uint32_t aa = static_cast<uint32_t>(align_a), ab = static_cast<uint32_t>(align_b),
                 ad = static_cast<uint32_t>(align_d);
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa),
           "cublasLt alignment preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab),
           "cublasLt alignment preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad),
           "cublasLt alignment preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad),
           "cublasLt alignment preference");
  cublasLtMatmulHeuristicResult_t r{};
  int count = 0;
  // No algorithm (a layout cuBLASLt does not take with this epilogue) leaves found false: the
  // caller then adds the bias through cuBLAS's beta instead.
  if (cublasLtMatmulAlgoGetHeuristic(lt_handle_for(device), p.desc, p.a, p.b, p.d, p.d, pref, 1, &r, &count) ==
          CUBLAS_STATUS_SUCCESS &&
      count > 0) {
    p.algo = r.algo;
    p.found = true;
  }
  cublasLtMatmulPreferenceDestroy(pref);
  return plans.emplace(key, p).first->second;
}

// out = bias broadcast over the rows, for the GEMM to accumulate into.
void fill_with_bias(const Tensor& out, const Tensor& bias) {
  copy_same_device(out, make_view(bias, out.sizes(), {0, bias.stride(0)}, bias.storage_offset()));
}

void addmm_bias_kernel(const OpCall& c, std::vector<Tensor>& outs) {
  const Tensor &bias = c.in(0), &a = c.in(1), &b = c.in(2), &out = outs[0];
  const int64_t m = out.size(0), n = out.size(1), k = a.size(1);
  if (out.numel() == 0) return;
  const int d = out.device().index;
  DeviceGuard g(d);
  const DType t = out.dtype();
  if (k == 0) return fill_with_bias(out, bias);
  if (t != DType::Float64 && m < (int64_t(1) << 31) && n < (int64_t(1) << 31) && k < (int64_t(1) << 31)) {
    GemmOperand ga = gemm_operand(as_batch(a)), gb = gemm_operand(as_batch(b));
    // The epilogue reads the bias in vectors: a view at an odd offset is copied.
    Tensor bias_d = dense_as(bias, t);
    if (alignment(bias_d.unsafe_impl()->data()) < 16) {
      bias_d = make_tensor(bias.sizes(), t, bias.device());
      copy_same_device(bias_d, bias);
    }
    const LtPlan& p = lt_plan(d, t, ga, gb, out.unsafe_impl()->data(), m, n, k);
    if (p.found) {
      const void* bp = bias_d.unsafe_impl()->data();
      check_lt(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp),
               "cublasLt BIAS_POINTER");
      Tensor ws = make_tensor({static_cast<int64_t>(kLtWorkspace)}, DType::UInt8, out.device());
      const float one = 1.0f, zero = 0.0f;
      void* dp = out.unsafe_impl()->data();
      check_lt(cublasLtMatmul(lt_handle_for(d), p.desc, &one, gb.ptr, p.a, ga.ptr, p.b, &zero, dp, p.d, dp, p.d, &p.algo,
                              ws.unsafe_impl()->data(), kLtWorkspace, current_cuda_stream(d)),
               "cublasLtMatmul");
      return;
    }
  }
  // float64 (cuBLASLt's epilogues are for float types) or no algorithm: the bias, then the GEMM
  // accumulating onto it.
  fill_with_bias(out, bias);
  bmm_cublas(as_batch(a), as_batch(b), as_batch(out), /*accumulate=*/true);
}
KILN_REGISTER_KERNEL(_addmm_bias, CUDA, addmm_bias_kernel);

}  // namespace

void gemm_batched(const Tensor& a, const Tensor& b, const Tensor& out, bool accumulate, bool tf32) {
  bmm_cublas(a, b, out, accumulate, tf32);
}
}  // namespace kiln::cuda
