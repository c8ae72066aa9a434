#include "compile/codegen/cuda_codegen.h"

#include <algorithm>
#include <sstream>

#include "compile/codegen/loop_emitter.h"
#include "compile/codegen/pointwise_ops.h"

namespace kiln::compiler::codegen {

// Note [Generated CUDA]
// A loop kernel (Note [Loop IR]) becomes one __global__ function of the same statements as
// its C++ (Note [Loop emitters]); the dims map to threads instead of loops:
// - pointwise: a grid-stride loop over the flat iteration space, each point's loop
//   variables recovered by division (the last dim fastest, so consecutive threads touch
//   consecutive elements of a contiguous buffer);
// - reductions: the kept dims flattened into rows, the reduced dims into a row's extent. A
//   row belongs to a group of `group` threads (a launch argument, cuda_launch()): each
//   accumulates a strided share of every pass (Note [Reduction phases]), the group combines
//   (kiln::jit::group_reduce: shuffles within a warp, shared memory across warps), and every
//   thread of the group continues with the row's result, so a multi-pass kernel (softmax,
//   layer norm) keeps its row in one group from the first pass to the last store. Groups of
//   up to 32 share a warp (small rows: layer norm over 64 features, cross entropy over 10
//   classes). Where the innermost loop dim is kept (a bias gradient: a sum over the batch of
//   contiguous rows) the group is a column group: neighbouring threads take neighbouring rows,
//   so a warp reads contiguous memory, and a row's lanes (as many as the GPU needs to be busy)
//   sit in other warps and combine through shared memory (kiln::jit::column_reduce).
// Per-row values are stored by the group's first thread. Buffers are __restrict__ pointers;
// a CPU 0-d input (a scalar the graph computed on the host) is passed by value in the
// pointer's slot. Index arithmetic is 32-bit where every index fits (Note [CUDA index width]).
// Accumulators are the IR's (double for float sums, as on the CPU), so the
// compiled kernels agree with eager within the accuracy rule, pointwise values bit for bit.

namespace {

using lower::Expr;
using lower::ExprKind;
using lower::LoopKernel;

class CudaEmitter : LoopEmitter {
 public:
  CudaEmitter(const LoopKernel& k, const std::vector<bool>& by_value) : LoopEmitter(k), by_value_(by_value) {}

  std::string emit(const std::string& symbol, std::vector<int64_t>* params) {
    name_buffers();
    for (size_t b = 0; b < k_.buffers.size(); ++b) {
      const lower::Buffer& buf = k_.buffers[b];
      const std::string t = cpp_type(buf.dtype), c = buf.output ? "" : "const ", name = bufname_[b];
      if (!buf.output && b < by_value_.size() && by_value_[b])
        os_ << "  const " << t << "* " << name << " = reinterpret_cast<const " << t << "*>(&a.b[" << b << "]);\n";
      else
        os_ << "  " << c << t << "* __restrict__ " << name << " = reinterpret_cast<" << c << t << "*>(a.b[" << b << "]);\n";
    }
    emit_hoisted();
    if (has_reduce_)
      emit_rows();
    else
      emit_pointwise();
    const size_t np = std::max<size_t>(1, params_.size());
    std::ostringstream fn;
    fn << "extern \"C\" __global__ void __launch_bounds__(1024) " << symbol << "(const kiln::jit::Args<"
       << k_.buffers.size() << ", " << np << "> a) {\n";
    // Note [CUDA index width]: 32-bit index arithmetic where every index fits (a 64-bit
    // division is a long instruction sequence on a GPU, a 32-bit one a short one).
    fn << "  using idx_t = " << (fits_32bit() ? "int32_t" : "int64_t") << ";\n";
    for (size_t i = 0; i < params_.size(); ++i) fn << "  const idx_t P" << i << " = static_cast<idx_t>(a.p[" << i << "]);\n";
    fn << body_.str() << "}\n\n";
    if (params) *params = params_;
    return fn.str();
  }

 private:
  // The product of the sizes of dims `dims`.
  std::string extent(const std::vector<size_t>& dims) {
    std::string s;
    for (size_t d : dims) {
      if (k_.sizes[d] == 1) continue;
      s += (s.empty() ? "" : " * ") + num(k_.sizes[d]);
    }
    return s.empty() ? "idx_t(1)" : s;
  }

  // Declares the loop variables of `dims` from the flat index `flat` (the last dim fastest).
  void unflatten(const std::vector<size_t>& dims, const std::string& flat, const std::string& ind) {
    if (dims.empty()) return;
    os_ << ind << "idx_t q_ = " << flat << ";\n";
    for (size_t j = dims.size(); j-- > 1;) {
      const size_t d = dims[j];
      if (k_.sizes[d] == 1) {
        os_ << ind << "const idx_t " << vars_[d] << " = 0;\n";
        continue;
      }
      const std::string n = num(k_.sizes[d]);
      os_ << ind << "const idx_t " << vars_[d] << " = q_ % " << n << ";\n";
      os_ << ind << "q_ /= " << n << ";\n";
    }
    os_ << ind << "const idx_t " << vars_[dims[0]] << " = q_;\n";
    for (size_t d : dims) os_ << ind << "(void)" << vars_[d] << ";\n";
  }

  void emit_pointwise() {
    std::vector<size_t> all;
    for (size_t d = 0; d < k_.sizes.size(); ++d) all.push_back(d);
    std::vector<int> stores;
    for (size_t s = 0; s < k_.stores.size(); ++s) stores.push_back(static_cast<int>(s));
    os_ << "  const idx_t n_ = " << extent(all) << ";\n";
    if (cuda_vectorizable(k_)) emit_vectorized(all, stores);
    os_ << "  for (idx_t x_ = blockIdx.x * idx_t(blockDim.x) + threadIdx.x; x_ < n_; x_ += idx_t(gridDim.x) * "
           "blockDim.x) {\n";
    unflatten(all, "x_", "    ");
    emit_exprs(closure(pass_roots({}, stores)), "    ", {});
    emit_stores(stores, "    ");
    os_ << "  }\n";
  }

  // Note [Vectorized CUDA kernels]: when the launch says so (a.group == kVector: the innermost
  // size and every vector buffer's other strides and offset are multiples of kVector and its
  // address is aligned, cuda_launch() and the run time check), each thread computes kVector
  // consecutive points along the innermost dim: the loads and stores that step through it one
  // element at a time are single aligned vector accesses (16 bytes for float), the others are
  // read per lane. The scalar loop after it then has nothing left to do.
  void emit_vectorized(const std::vector<size_t>& all, const std::vector<int>& stores) {
    const size_t last = all.back();
    const std::string base = "ib_", inner = vars_[last];
    os_ << "  if (a.group == kiln::jit::kVector) {\n";
    os_ << "    for (idx_t x_ = blockIdx.x * idx_t(blockDim.x) + threadIdx.x; x_ < n_ / kiln::jit::kVector; "
           "x_ += idx_t(gridDim.x) * blockDim.x) {\n";
    vars_[last] = base;  // the vector's first point
    unflatten(all, "x_ * kiln::jit::kVector", "      ");
    load_override_.assign(k_.exprs.size(), "");
    const std::vector<bool> need = closure(pass_roots({}, stores));
    for (size_t e = 0; e < k_.exprs.size(); ++e) {
      const Expr& x = k_.exprs[e];
      // A vector load steps through the innermost dim; another load of the same buffer (a
      // broadcast along it) is read per lane.
      if (!need[e] || x.kind != ExprKind::Load || x.index.coeffs[last] != 1) continue;
      const std::string t = cpp_type(x.dtype);
      os_ << "      const kiln::jit::Vec<" << t << "> V" << e << " = *reinterpret_cast<const kiln::jit::Vec<" << t
          << ">*>(&" << bufname_[static_cast<size_t>(x.buffer)] << "[" << index_expr(x.index) << "]);\n";
      load_override_[e] = "V" + std::to_string(e) + ".v[j_]";
    }
    for (int st : stores)
      os_ << "      kiln::jit::Vec<" << cpp_type(k_.buffers[static_cast<size_t>(k_.stores[static_cast<size_t>(st)].buffer)].dtype)
          << "> S" << st << ";\n";
    os_ << "      #pragma unroll\n";
    os_ << "      for (int j_ = 0; j_ < kiln::jit::kVector; ++j_) {\n";
    vars_[last] = inner;
    os_ << "        const idx_t " << inner << " = " << base << " + j_;\n";
    os_ << "        (void)" << inner << ";\n";
    emit_exprs(need, "        ", {});
    for (int st : stores) os_ << "        S" << st << ".v[j_] = " << name(k_.stores[static_cast<size_t>(st)].expr) << ";\n";
    os_ << "      }\n";
    vars_[last] = base;
    for (int st : stores) {
      const lower::Store& s = k_.stores[static_cast<size_t>(st)];
      const std::string t = cpp_type(k_.buffers[static_cast<size_t>(s.buffer)].dtype);
      os_ << "      *reinterpret_cast<kiln::jit::Vec<" << t << ">*>(&" << bufname_[static_cast<size_t>(s.buffer)] << "["
          << index_expr(s.index) << "]) = S" << st << ";\n";
    }
    vars_[last] = inner;
    load_override_.clear();
    os_ << "    }\n";
    os_ << "    return;\n";
    os_ << "  }\n";
  }

  void emit_rows() {
    std::vector<size_t> kept, red;
    for (size_t d = 0; d < k_.sizes.size(); ++d) (k_.reduced[d] ? red : kept).push_back(d);
    std::vector<std::vector<int>> in_phase;
    std::vector<int> after;
    split_stores(in_phase, after);
    os_ << "  const idx_t rows_ = " << extent(kept) << ", extent_ = " << extent(red) << ";\n";
    // A row's lanes: group_ > 0, consecutive threads (a row group); group_ < 0, threads rows_per
    // apart (a column group).
    os_ << "  const int group_ = static_cast<int>(a.group), lanes_ = group_ > 0 ? group_ : -group_;\n";
    os_ << "  const idx_t per_block_ = blockDim.x / lanes_;\n";
    os_ << "  const int lane_ = group_ > 0 ? threadIdx.x % lanes_ : threadIdx.x / per_block_;\n";
    // Uniform over the block: every thread takes part in every group reduction.
    os_ << "  for (idx_t base_ = blockIdx.x * per_block_; base_ < rows_; base_ += gridDim.x * per_block_) {\n";
    std::string ind = "    ";
    os_ << ind << "const idx_t row_ = base_ + (group_ > 0 ? threadIdx.x / lanes_ : threadIdx.x % per_block_);\n";
    os_ << ind << "const bool active_ = row_ < rows_;\n";
    os_ << ind << "{\n";
    // A row past the end reads row 0 (valid) and stores nothing.
    unflatten(kept, "active_ ? row_ : 0", ind + "  ");
    for (int p = 0; p < k_.num_phases(); ++p) emit_pass(p, in_phase[static_cast<size_t>(p)], red, ind + "  ");
    if (!after.empty()) {
      os_ << ind << "  if (active_ && lane_ == 0) {\n";
      for (size_t d : red) os_ << ind << "    const idx_t " << vars_[d] << " = 0; (void)" << vars_[d] << ";\n";
      emit_exprs(closure(pass_roots({}, after)), ind + "    ", {});
      emit_stores(after, ind + "    ");
      os_ << ind << "  }\n";
    }
    os_ << ind << "}\n";
    os_ << "  }\n";
  }

  void emit_pass(int p, const std::vector<int>& stores, const std::vector<size_t>& red, const std::string& ind) {
    const std::vector<int> reds = reduces_of_phase(p);
    if (reds.empty() && stores.empty()) return;
    for (int e : reds) {
      const Reducer r = reducer(k_.exprs[static_cast<size_t>(e)]);
      os_ << ind << r.acc_type << " acc" << e << " = " << r.init << ";\n";
    }
    os_ << ind << "{\n";
    const std::vector<int> roots = pass_roots(reds, stores);
    const std::vector<bool> pre = per_point(roots);
    emit_exprs(pre, ind + "  ", {});
    os_ << ind << "  for (idx_t e_ = lane_; active_ && e_ < extent_; e_ += lanes_) {\n";
    unflatten(red, "e_", ind + "    ");
    emit_exprs(closure(roots), ind + "    ", pre);
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      os_ << ind << "    " << reducer(x).step("acc" + std::to_string(e), name(x.args[0])) << "\n";
    }
    emit_stores(stores, ind + "    ");
    os_ << ind << "  }\n";
    os_ << ind << "}\n";
    for (int e : reds) {
      const Expr& x = k_.exprs[static_cast<size_t>(e)];
      const Reducer r = reducer(x);
      const std::string acc = "acc" + std::to_string(e);
      os_ << ind << acc << " = kiln::jit::lanes_reduce(" << acc << ", group_, " << r.acc_type << "(" << r.init
          << "), [](" << r.acc_type << " x_, " << r.acc_type << " y_) { " << r.combine("x_", "y_") << " return x_; });\n";
      os_ << ind << "const " << cpp_type(x.dtype) << " " << name(e) << " = " << r.result(acc) << ";\n";
    }
  }

  // Whether every index value fits in 32 bits with room to spare: the iteration space (and a
  // grid-stride loop's step past its end) and every buffer's furthest element.
  bool fits_32bit() const {
    constexpr int64_t kLimit = int64_t(1) << 30;
    if (k_.numel() >= kLimit) return false;
    auto fits = [&](const lower::Index& ix) {
      int64_t far = ix.offset < 0 ? -ix.offset : ix.offset;
      for (size_t d = 0; d < ix.coeffs.size(); ++d) {
        const int64_t c = ix.coeffs[d] < 0 ? -ix.coeffs[d] : ix.coeffs[d];
        if (c >= kLimit) return false;
        if (k_.sizes[d] > 0) far += c * (k_.sizes[d] - 1);  // both below 2^30: no overflow
        if (far >= kLimit) return false;
      }
      return true;
    };
    for (const Expr& e : k_.exprs)
      if (e.kind == ExprKind::Load && !fits(e.index)) return false;
    for (const lower::Store& st : k_.stores)
      if (!fits(st.index)) return false;
    return true;
  }

  const std::vector<bool>& by_value_;
};

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace

std::vector<bool> cuda_vector_buffers(const lower::LoopKernel& k) {
  std::vector<bool> vec(k.buffers.size(), false);
  if (k.sizes.empty()) return vec;
  const size_t last = k.sizes.size() - 1;
  for (const Expr& e : k.exprs)
    if (e.kind == ExprKind::Load && e.index.coeffs[last] == 1) vec[static_cast<size_t>(e.buffer)] = true;
  for (const lower::Store& s : k.stores) vec[static_cast<size_t>(s.buffer)] = true;
  return vec;
}

bool cuda_vectorizable(const lower::LoopKernel& k) {
  if (k.sizes.empty() || k.num_reduced() > 0 || k.stores.empty()) return false;
  const size_t last = k.sizes.size() - 1;
  for (const lower::Store& s : k.stores)
    if (s.index.coeffs[last] != 1) return false;
  return true;
}

bool cuda_vector_aligned(const lower::LoopKernel& k, const std::vector<uint64_t>& addresses) {
  constexpr int64_t v = 4;  // kiln::jit::kVector
  if (!cuda_vectorizable(k) || k.sizes.back() % v != 0) return false;
  const std::vector<bool> vec = cuda_vector_buffers(k);  // their addresses: aligned
  auto aligned = [&](const lower::Index& ix) {
    for (size_t d = 0; d + 1 < ix.coeffs.size(); ++d)
      if (ix.coeffs[d] % v != 0) return false;
    return ix.offset % v == 0;
  };
  for (const Expr& e : k.exprs)
    if (e.kind == ExprKind::Load && e.index.coeffs.back() == 1 && !aligned(e.index)) return false;
  for (const lower::Store& s : k.stores)
    if (!aligned(s.index)) return false;
  for (size_t b = 0; b < k.buffers.size(); ++b)
    if (vec[b] && addresses[b] % (static_cast<uint64_t>(itemsize(k.buffers[b].dtype)) * v) != 0) return false;
  return true;
}

std::string cuda_source_prelude() {
  return "// Generated by kiln's CUDA code generator (Note [Generated CUDA]).\n"
         "#include \"compile/codegen/cuda_device.h\"\n\n";
}

std::string generate_cuda_kernel(const lower::LoopKernel& k, const std::string& symbol,
                                 const std::vector<bool>& by_value, std::vector<int64_t>* params) {
  return CudaEmitter(k, by_value).emit(symbol, params);
}

CudaLaunch cuda_launch(const lower::LoopKernel& k, int multiprocessors) {
  // Enough blocks to fill every multiprocessor several times over; the grid-stride loops
  // take the rest.
  const int64_t max_grid = std::max(1, multiprocessors) * int64_t(32);
  int64_t rows = 1, extent = 1;
  for (size_t d = 0; d < k.sizes.size(); ++d) (k.reduced[d] ? extent : rows) *= k.sizes[d];
  CudaLaunch l;
  if (k.num_reduced() == 0) {
    const int64_t n = rows;
    if (n == 0) return l;
    l.block = static_cast<int>(std::min<int64_t>(256, (n + 31) / 32 * 32));
    l.grid = std::min(max_grid, (n + l.block - 1) / l.block);
    return l;
  }
  if (rows == 0) return l;
  // Threads per row. Where the innermost dim is kept (a bias gradient: the sum over a batch of
  // contiguous rows), neighbouring threads take neighbouring rows; with too few rows to fill the
  // GPU a row also gets lanes in other warps (a column group) splitting its extent. Otherwise a
  // warp slice for short rows, up to a block of 1024 for long ones (about 32 elements a thread).
  constexpr int64_t kBusy = 128 * 1024;  // threads that keep a GPU's memory system busy
  if (!k.reduced.back()) {
    int64_t lanes = 1;
    while (lanes < 32 && rows * lanes * 2 <= kBusy && extent >= lanes * 2 * 8) lanes *= 2;
    l.block = 256;
    l.group = -static_cast<int>(lanes);
    const int64_t per_block = l.block / lanes;
    l.grid = std::min(max_grid, (rows + per_block - 1) / per_block);
    return l;
  }
  int64_t group;
  if (extent <= 32)
    group = pow2_at_least(std::max<int64_t>(extent, 1));
  else if (extent <= 2048)
    group = 32;
  else
    group = std::min<int64_t>(1024, pow2_at_least((extent + 31) / 32));
  l.group = static_cast<int>(group);
  l.block = group <= 32 ? 256 : static_cast<int>(group);
  const int64_t per_block = l.block / group;
  l.grid = std::min(max_grid, (rows + per_block - 1) / per_block);
  return l;
}

std::vector<uint64_t> cuda_args(const std::vector<uint64_t>& buffers, const std::vector<int64_t>& params, int group) {
  std::vector<uint64_t> a(buffers);
  for (int64_t p : params) a.push_back(static_cast<uint64_t>(p));
  if (params.empty()) a.push_back(0);
  a.push_back(static_cast<uint64_t>(group));
  return a;
}

}  // namespace kiln::compiler::codegen
