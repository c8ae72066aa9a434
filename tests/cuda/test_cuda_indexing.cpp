// CUDA gather/scatter_add against the CPU, the ops built on them, and the out-of-range error.
#include <cmath>
#include <string>
#include <vector>

#include "dispatch/dispatch.h"
#include "tests/cuda/cuda_test.h"
#include "tests/unit/expect_error.h"

namespace kiln {
namespace {

using testing::expect_close;

Tensor indices(std::vector<int64_t> sizes, int64_t high, uint64_t seed) {
  manual_seed(seed);
  return randint(0, high, sizes);
}

TEST(CudaIndexing, GatherAndScatterAddAlongEachDim) {
  KILN_REQUIRE_CUDA();
  manual_seed(1);
  Tensor x = randn({5, 6, 7});
  for (int64_t dim = 0; dim < 3; ++dim) {
    SCOPED_TRACE("dim " + std::to_string(dim));
    std::vector<int64_t> isz = {4, 5, 6};
    Tensor idx = indices(isz, x.size(dim), 2 + dim);
    expect_close(gather(x.cuda(), dim, idx.cuda()), gather(x, dim, idx), 0, 0);
    Tensor src = randn({4, 5, 6});
    expect_close(scatter_add(x.cuda(), dim, idx.cuda(), src.cuda()), scatter_add(x, dim, idx, src), 1e-5, 1e-5);
  }
  // Non-contiguous source and index; int64 scatter_add is exact.
  Tensor xt = x.transpose(0, 2);
  Tensor it = indices({3, 2, 4}, 6, 9).transpose(0, 1);  // xt.size(1) is 6
  expect_close(gather(xt.cuda(), 1, it.cuda()), gather(xt, 1, it), 0, 0);
  Tensor xi = x.round().to(DType::Int64);
  Tensor i2 = indices({5, 6, 7}, 5, 10);
  expect_close(scatter_add(xi.cuda(), 0, i2.cuda(), xi.cuda()), scatter_add(xi, 0, i2, xi), 0, 0);
}

// scatter_reduce on the device (Note [CUDA scatter_reduce]): amax/amin and integer reductions
// exact, floating sum/prod/mean within rounding; with and without self, in several dtypes,
// along each dim, a non-contiguous source, and NaN through amax/amin.
TEST(CudaIndexing, ScatterReduceEveryReductionMatchesCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(21);
  Tensor x = randn({5, 6, 7}), src = randn({5, 6, 7});
  const char* reductions[] = {"sum", "prod", "mean", "amax", "amin"};
  const DType dtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                          DType::Int64,   DType::Int32,   DType::Int16,   DType::UInt8};
  for (DType dt : dtypes) {
    const bool fl = is_floating_point(dt);
    Tensor xd = (fl ? x : (x * 3).round()).to(dt), sd = (fl ? src : (src * 3).round()).to(dt);
    for (int64_t dim = 0; dim < 3; ++dim) {
      Tensor idx = indices({4, 5, 6}, x.size(dim), 30 + dim);
      for (const char* r : reductions) {
        for (bool self : {true, false}) {
          SCOPED_TRACE(std::string(dtype_name(dt)) + " dim " + std::to_string(dim) + " " + r +
                       (self ? " with self" : " without self"));
          const bool exact = !fl || r[0] == 'a';
          const double tol = dt == DType::Float16 || dt == DType::BFloat16 ? 2e-2 : 1e-5;
          expect_close(scatter_reduce(xd.cuda(), dim, idx.cuda(), sd.cuda(), r, self),
                       scatter_reduce(xd, dim, idx, sd, r, self), exact ? 0 : tol, exact ? 0 : tol);
        }
      }
    }
  }
  // A transposed source and NaN, which amax/amin propagate.
  Tensor xn = x.clone();
  xn.index_put_({2}, std::nan(""));
  Tensor st = src.transpose(0, 2).contiguous().transpose(0, 2);
  Tensor idx = indices({5, 6, 7}, 5, 40);
  for (const char* r : {"amax", "amin"})
    for (Tensor s : {st, xn})
      expect_close(scatter_reduce(x.cuda(), 0, idx.cuda(), s.cuda(), r, true), scatter_reduce(x, 0, idx, s, r, true), 0,
                   0);
  Tensor bad = full({1, 6, 7}, 9, TensorOptions(DType::Int64));
  testing::expect_error([&] { (void)scatter_reduce(x.cuda(), 0, bad.cuda(), src.cuda(), "amax", true); },
                        {"index 9 is out of bounds for dimension 0 with size 5"});
}

// histc and bincount on the device: int64 counts by atomics, exact; weighted bincount's sums in the CPU's order.
// histc's edges: the last bin closed, values outside [min, max] and NaN left out, min == max (the input's range,
// staged).
TEST(CudaIndexing, HistcAndBincountMatchCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(22);
  Tensor x = randn({4000}) * 3;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor xd = x.to(dt);
    expect_close(histc(xd.cuda(), 37, -2, 2), histc(xd, 37, -2, 2), 0, 0);
    expect_close(histc(xd.cuda(), 10, 0, 0), histc(xd, 10, 0, 0), 0, 0);
    Tensor edges = tensor<double>({-1, -0.5, 0, 0.25, 0.5, 1, 1.0000001, -1.0000001, std::nan("")}).to(dt);
    expect_close(histc(edges.cuda(), 4, -1, 1), histc(edges, 4, -1, 1), 0, 0);
    expect_close(histc(edges.cuda(), 3, -1, 1), histc(edges, 3, -1, 1), 0, 0);
    Tensor strided = xd.reshape({40, 100}).transpose(0, 1);
    expect_close(histc(strided.cuda(), 64, -5, 5), histc(strided, 64, -5, 5), 0, 0);
    Tensor none = empty({0}, TensorOptions(dt));
    expect_close(histc(none.cuda(), 5, 0, 0), histc(none, 5, 0, 0), 0, 0);
    Tensor same = full({5}, -2.0, TensorOptions(dt));  // min == max of the input too: [min - 1, max + 1]
    expect_close(histc(same.cuda(), 4, 3, 3), histc(same, 4, 3, 3), 0, 0);
    testing::expect_error([&] { (void)histc(edges.cuda(), 4, 0, 0); }, {"histc: range of [nan, nan] is not finite"});
  }
  for (DType dt : {DType::Int64, DType::Int32, DType::Int16, DType::Int8, DType::UInt8}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor v = indices({3000}, 100, 23).to(dt);
    expect_close(bincount(v.cuda()), bincount(v), 0, 0);
    expect_close(bincount(v.cuda(), {}, 250), bincount(v, {}, 250), 0, 0);
    Tensor s = v.reshape({30, 100}).transpose(0, 1).reshape({-1});
    expect_close(bincount(s.cuda()), bincount(s), 0, 0);
    Tensor none = empty({0}, TensorOptions(dt));
    expect_close(bincount(none.cuda(), {}, 3), bincount(none, {}, 3), 0, 0);
  }
  Tensor v = indices({3000}, 100, 24), w = randn({3000});
  // Weighted: the CPU's sums bit for bit (each bin added in input order), float32 or float64.
  for (DType wt : {DType::Float32, DType::Float64, DType::Float16, DType::Int32}) {
    SCOPED_TRACE(std::string("weights ") + std::string(dtype_name(wt)));
    Tensor wd = (wt == DType::Int32 ? (w * 10).round() : w).to(wt);
    expect_close(bincount(v.cuda(), wd.cuda()), bincount(v, wd), 0, 0);
    expect_close(bincount(v.cuda(), wd.cuda(), 300), bincount(v, wd, 300), 0, 0);
  }
  Tensor vs = v.reshape({30, 100}).transpose(0, 1).reshape({-1}),
         ws = w.reshape({100, 30}).transpose(0, 1).reshape({-1});
  expect_close(bincount(vs.cuda(), ws.cuda()), bincount(vs, ws), 0, 0);
  Tensor none = empty({0}, TensorOptions(DType::Int64));
  expect_close(bincount(none.cuda(), empty({0}).cuda(), 4), bincount(none, empty({0}), 4), 0, 0);
  Tensor neg = tensor<int64_t>({1, 4, -3, 2});
  testing::expect_error([&] { (void)bincount(neg.cuda()); },
                        {"bincount only supports 1-d non-negative integral inputs, got the value -3"});
}

// unique/unique_consecutive without a dim on the device (Note [CUDA unique]): values, inverse and
// counts equal the CPU's, with NaN (each its own value), -0 and +0 (one value: the first's bits),
// ties, a strided input; with a dim and empty inputs they are staged.
TEST(CudaIndexing, UniqueMatchesCpu) {
  KILN_REQUIRE_CUDA();
  auto check = [](const Tensor& x) {
    for (bool inv : {false, true})
      for (bool cnt : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(x.dtype())) + (inv ? " inverse" : "") + (cnt ? " counts" : ""));
        auto [v, i, n] = unique(x.cuda(), true, inv, cnt);
        auto [wv, wi, wn] = unique(x, true, inv, cnt);
        expect_close(v, wv, 0, 0);
        expect_close(i, wi, 0, 0);
        expect_close(n, wn, 0, 0);
        auto [cv, ci, cn] = unique_consecutive(x.cuda(), inv, cnt);
        auto [cwv, cwi, cwn] = unique_consecutive(x, inv, cnt);
        expect_close(cv, cwv, 0, 0);
        expect_close(ci, cwi, 0, 0);
        expect_close(cn, cwn, 0, 0);
      }
  };
  Tensor r = indices({6, 500}, 40, 25);
  for (DType dt : {DType::Int64, DType::Int32, DType::Int16, DType::UInt8, DType::Bool, DType::Float32, DType::Float64,
                   DType::Float16, DType::BFloat16})
    check(r.to(dt));
  check(r.transpose(0, 1));
  check(std::get<0>(sort(r, 1)).to(DType::Float32));  // long runs for unique_consecutive
  Tensor special = tensor<double>({3, -0.0, std::nan(""), 0.0, 1, std::nan(""), -0.0, 3, -1, 0.0});
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16}) {
    Tensor sd = special.to(dt);
    check(sd);
    auto [v, i, n] = unique(sd.cuda());
    EXPECT_EQ(std::signbit(v.cpu().to(DType::Float64).to_vector<double>()[1]),
              std::signbit(std::get<0>(unique(sd)).to(DType::Float64).to_vector<double>()[1]));
  }
  check(empty({0, 3}));
  auto [dv, di, dn] = unique(r.cuda(), true, true, true, 1);
  auto [wdv, wdi, wdn] = unique(r, true, true, true, 1);
  expect_close(dv, wdv, 0, 0);
  expect_close(di, wdi, 0, 0);
  expect_close(dn, wdn, 0, 0);
}

TEST(CudaIndexing, OutOfRangeIndexIsAnError) {
  KILN_REQUIRE_CUDA();
  Tensor x = ones({3, 4}).cuda();
  Tensor bad = full({3, 1}, 9, TensorOptions(DType::Int64)).cuda();
  testing::expect_error([&] { (void)gather(x, 1, bad); },
                        {"gather: index 9 is out of bounds for dimension 1 with size 4"});
  expect_close(x.sum(), full({}, 12.0), 0, 0);  // the device is still usable
}

TEST(CudaIndexing, EmbeddingIndexSelectCrossEntropy) {
  KILN_REQUIRE_CUDA();
  manual_seed(3);
  Tensor w = randn({10, 4}), logits = randn({6, 10});
  Tensor ids = indices({2, 3}, 10, 4), target = indices({6}, 10, 5);
  expect_close(embedding(w.cuda(), ids.cuda()), embedding(w, ids), 0, 0);
  expect_close(index_select(w.cuda(), 0, ids.reshape({-1}).cuda()), index_select(w, 0, ids.reshape({-1})), 0, 0);
  expect_close(cross_entropy(logits.cuda(), target.cuda()), cross_entropy(logits, target), 1e-5, 1e-6);
  // Along an inner dim, and x[idx] with negative indices (which wrap).
  expect_close(index_select(w.cuda(), 1, remainder(target, 4).cuda()), index_select(w, 1, remainder(target, 4)), 0, 0);
  Tensor neg = target - 10;
  expect_close(w.cuda()[neg.cuda()], w[neg], 0, 0);
}

// Note [Fused cross_entropy]: [N, C] logits with class indices on CUDA run the one-pass kernels;
// the loss and the logits' gradient equal the CPU decomposition's, at a language model head's row
// length, with ignored rows, label smoothing and class weights; a bad target raises the
// decomposition's message and leaves the device usable.
TEST(CudaIndexing, FusedCrossEntropyAsTheCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(8);
  const int64_t N = 24, C = 5003;
  Tensor logits = randn({N, C}) * 3, target = indices({N}, C, 9), w = rand({C}) + 0.5;
  target.index_put_({Tensor(tensor({2, 7}, kInt64))}, full({2}, -100, TensorOptions(kInt64)));
  for (double ls : {0.0, 0.1})
    for (bool weighted : {false, true})
      for (std::string red : {"mean", "sum", "none"}) {
        Tensor gx = logits.cuda().requires_grad_(true), cx = logits.clone().requires_grad_(true);
        Tensor gl = cross_entropy(gx, target.cuda(), weighted ? w.cuda() : Tensor(), -100, red, ls);
        Tensor cl = cross_entropy(cx, target, weighted ? w : Tensor(), -100, red, ls);
        expect_close(gl, cl, 1e-5, 1e-5);
        (gl * gl).sum().backward();
        (cl * cl).sum().backward();
        expect_close(gx.grad(), cx.grad(), 1e-4, 1e-7);
      }
  // bf16/fp16 logits are read as they are and computed in float32: under autocast the float32
  // loss of the cast path and its gradient rounded once to the logits' dtype (one ulp apart where
  // the CPU's and the GPU's float32 round differently), with no cast kernel on the logits or their
  // gradient; without autocast the same loss rounded to the logits' dtype.
  std::vector<uint32_t> counts(kNumOps, 0);
  for (DType low : {DType::BFloat16, DType::Float16}) {
    const double rt = low == DType::BFloat16 ? 8e-3 : 1e-3;
    const Tensor lx = logits.to(low);
    for (double ls : {0.0, 0.1})
      for (bool weighted : {false, true})
        for (std::string red : {"mean", "sum", "none"}) {
          SCOPED_TRACE(::testing::Message() << low << " ls " << ls << " weighted " << weighted << " " << red);
          Tensor gx = lx.cuda().requires_grad_(true), cx = lx.to(kFloat32).requires_grad_(true);
          Tensor gl;
          {
            autocast ac(Device("cuda"), low);
            set_op_call_counts(&counts);
            gl = cross_entropy(gx, target.cuda(), weighted ? w.cuda() : Tensor(), -100, red, ls);
            set_op_call_counts(nullptr);
          }
          EXPECT_EQ(counts[static_cast<size_t>(OpId::to)], 0u);
          Tensor cl = cross_entropy(cx, target, weighted ? w : Tensor(), -100, red, ls);
          ASSERT_EQ(gl.dtype(), kFloat32);
          expect_close(gl, cl, 1e-5, 1e-5);
          set_op_call_counts(&counts);
          (gl * gl).sum().backward();
          set_op_call_counts(nullptr);
          EXPECT_EQ(counts[static_cast<size_t>(OpId::to)], 0u);
          (cl * cl).sum().backward();
          ASSERT_EQ(gx.grad().dtype(), low);
          expect_close(gx.grad(), cx.grad().to(low), rt, 1e-7);
          Tensor pl = cross_entropy(lx.cuda(), target.cuda(), weighted ? w.cuda() : Tensor(), -100, red, ls);
          ASSERT_EQ(pl.dtype(), low);
          expect_close(pl, cl.to(low), rt, 1e-5);
        }
  }
  Tensor bad = target.clone();
  bad.index_put_({Tensor(tensor({5}, kInt64))}, full({1}, C, TensorOptions(kInt64)));
  testing::expect_error([&] { (void)cross_entropy(logits.cuda(), bad.cuda()); },
                        {"cross_entropy: target 5003 is out of bounds"});
  // The backward op checks its own target (called directly, as the fuzzer does): a negative one
  // that is not ignore_index.
  bad.index_put_({Tensor(tensor({5}, kInt64))}, full({1}, -3, TensorOptions(kInt64)));
  testing::expect_error(
      [&] {
        (void)call_op1(OpId::_fused_cross_entropy_backward,
                       {ones({N}).cuda(), logits.cuda(), bad.cuda(), Tensor(), zeros({N}).cuda(), Tensor()},
                       {int64_t(-100), 0.0});
      },
      {"cross_entropy: target -3 is out of bounds: expected class indices in [0, 5003) or ignore_index -100"});
  expect_close(logits.cuda().sum(), logits.sum(), 1e-5, 1e-3);
}

TEST(CudaIndexing, IndexPutAndEmbeddingBackward) {
  KILN_REQUIRE_CUDA();
  manual_seed(6);
  Tensor w = randn({10, 4});
  Tensor ids = indices({3, 5}, 10, 7);  // duplicates: the backward accumulates
  Tensor gw = w.cuda().detach().requires_grad_(true), cw = w.clone().requires_grad_(true);
  (embedding(gw, ids.cuda()) * 2).sum().backward();
  (embedding(cw, ids) * 2).sum().backward();
  expect_close(gw.grad(), cw.grad(), 1e-6, 1e-6);
  // Plain stores with distinct indices; a broadcast value.
  Tensor x = zeros({6, 3}), idx = arange(0, 6, 2, TensorOptions(DType::Int64));
  Tensor g = x.cuda();
  g.index_put_({idx.cuda()}, full({3}, 4.0).cuda());
  x.index_put_({idx}, full({3}, 4.0));
  expect_close(g, x, 0, 0);
}

// Note [CUDA advanced indexing]: several index tensors, adjacent or not, a 2-d bool mask,
// negative indices, and index_put with accumulate (duplicates) and its gradient.
TEST(CudaIndexing, SeveralIndexTensorsAndMasks) {
  KILN_REQUIRE_CUDA();
  using namespace indexing;
  manual_seed(11);
  Tensor x = randn({4, 5, 6});
  Tensor i = tensor({0, 3, -1, 2}, kInt64), j = tensor({1, 1, 4, -5}, kInt64);
  expect_close(x.cuda().index({i.cuda(), j.cuda()}), x.index({i, j}), 0, 0);                    // adjacent: [4, 6]
  expect_close(x.cuda().index({i.cuda(), Slice(), j.cuda()}), x.index({i, Slice(), j}), 0, 0);  // apart: [4, 5]
  expect_close(x.transpose(0, 2).cuda().index({Slice(), j.cuda(), i.cuda()}), x.transpose(0, 2).index({Slice(), j, i}),
               0, 0);
  Tensor mask = gt(x.select(2, 0), Scalar(0.0));  // [4, 5]
  expect_close(x.cuda().index({mask.cuda()}), x.index({mask}), 0, 0);
  Tensor rows = tensor({1, 1, 0}, kInt64), cols = tensor({2, 2, 2}, kInt64);
  Tensor v = randn({3, 6});
  Tensor g = x.cuda();
  g.index_put_({rows.cuda(), cols.cuda()}, v.cuda());
  Tensor c = x.clone();
  c.index_put_({rows, cols}, v);
  // Duplicate stores keep one of the values: compare the rows stored once.
  expect_close(g.index({Slice(0, 1)}), c.index({Slice(0, 1)}), 0, 0);
  // Accumulate with index tensors apart (x[rows, :, cols] += w): atomics, so within rounding.
  Tensor w = randn({3, 5});
  expect_close(index_put(x.cuda(), {rows.cuda(), Tensor(), cols.cuda()}, w.cuda(), true),
               index_put(x, {rows, Tensor(), cols}, w, true), 1e-6, 1e-6);
  // The gradient of x[i, :, j] accumulates over duplicates.
  Tensor gx = x.cuda().requires_grad_(true), cx = x.clone().requires_grad_(true);
  Tensor dup = tensor({2, 2, 0}, kInt64);
  (gx.index({dup.cuda(), Slice(), dup.cuda()}) * 3).sum().backward();
  (cx.index({dup, Slice(), dup}) * 3).sum().backward();
  expect_close(gx.grad(), cx.grad(), 1e-6, 1e-6);
  testing::expect_error(
      [&] {
        (void)x.cuda().index({tensor({4}, kInt64).cuda(), j.cuda()});
      },
      {"index 4 is out of bounds for dimension 0 with size 4"});
}

}  // namespace
}  // namespace kiln
