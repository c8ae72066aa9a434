// mm and bmm on cuBLAS (cublasGemmStridedBatchedEx); addmm, baddbmm, linear and matmul are
// composites over them. float32 computes in float32 unless backends::allow_tf32(true);
// float16/bfloat16 accumulate in float32; float64 in float64.
#include <atomic>
#include <unordered_map>

#include <cublas_v2.h>

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

// out[b] = a[b] @ bm[b] for 3-D a [B, m, k], bm [B, k, n], out [B, m, n].
void bmm_cublas(const Tensor& a, const Tensor& bm, const Tensor& out) {
  DType t = out.dtype();
  cudaDataType_t ct = cuda_type(t);
  int64_t batch = out.size(0), m = out.size(1), n = out.size(2), k = a.size(2);
  if (out.numel() == 0) return;
  int d = out.device().index;
  DeviceGuard g(d);
  cudaStream_t s = current_cuda_stream(d);
  Tensor c = out.is_contiguous() ? out : make_tensor(out.sizes(), t, out.device());
  if (k == 0) {
    launch_fill(make_elementwise_args({&c}), 0.0, 0, true, s);
  } else {
    KILN_CHECK(m < (int64_t(1) << 31) && n < (int64_t(1) << 31) && k < (int64_t(1) << 31) && batch < (int64_t(1) << 31),
               "mm: sizes beyond 2^31 are not supported yet on cuda");
    // Row-major C = A B is column-major C^T = B^T A^T.
    GemmOperand ga = gemm_operand(a), gb = gemm_operand(bm);
    cublasHandle_t h = handle_for(d);
    check_cublas(cublasSetStream(h, s), "cublasSetStream");
    cublasComputeType_t compute = t == DType::Float64                               ? CUBLAS_COMPUTE_64F
                                  : (t == DType::Float32 && backends::allow_tf32()) ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                    : CUBLAS_COMPUTE_32F;
    double one_d = 1.0, zero_d = 0.0;
    float one_f = 1.0f, zero_f = 0.0f;
    const void* alpha = t == DType::Float64 ? static_cast<const void*>(&one_d) : &one_f;
    const void* beta = t == DType::Float64 ? static_cast<const void*>(&zero_d) : &zero_f;
    check_cublas(
        cublasGemmStridedBatchedEx(h, gb.op, ga.op, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                                   alpha, gb.ptr, ct, static_cast<int>(gb.ld), gb.batch_stride, ga.ptr, ct,
                                   static_cast<int>(ga.ld), ga.batch_stride, beta, c.unsafe_impl()->data(), ct,
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

}  // namespace
}  // namespace kiln::cuda
