// Hand tests of CUDA paths the op samples reach only at small sizes: the block scan for long
// lines, sort/topk over long rows with NaN, -0 and ties, and pooling/convolution at model shapes.
#include <cmath>
#include <limits>
#include <tuple>

#include "tests/cuda/cuda_test.h"

namespace kiln {
namespace {

using testing::expect_close;

TEST(CudaNn, LongScansUseTheBlockScan) {
  KILN_REQUIRE_CUDA();
  manual_seed(21);
  Tensor x = randn({3, 5000}, kFloat64);
  expect_close(cumsum(x.cuda(), 1), cumsum(x, 1), 1e-10, 1e-10);
  Tensor f = randn({2, 9000});
  expect_close(cumsum(f.cuda(), -1), cumsum(f, -1), 1e-4, 1e-4);
  Tensor p = (rand({2, 3000}, kFloat64) * 0.02 + 0.99);
  expect_close(cumprod(p.cuda(), 1), cumprod(p, 1), 1e-9, 1e-12);
  Tensor i = randint(-1000, 1000, {2, 7000});  // wrapping int64 sums are exact in any order
  expect_close(cumsum(i.cuda(), 1), cumsum(i, 1), 0, 0);
}

TEST(CudaNn, SortAndTopkOrderAsTheCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(22);
  Tensor x = randint(0, 50, {4, 3000}).to(kFloat32);  // many ties
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x.index_put_({Tensor(tensor({0, 1, 2}, kInt64)), Tensor(tensor({5, 7, 9}, kInt64))}, tensor({nan, -0.0f, nan}));
  for (bool desc : {false, true}) {
    auto [v, i] = sort(x.cuda(), 1, desc, true);
    auto [cv, ci] = sort(x, 1, desc, true);
    expect_close(v, cv, 0, 0);
    expect_close(i, ci, 0, 0);
  }
  auto [tv, ti] = topk(x.cuda(), 17, 1);
  auto [ctv, cti] = topk(x, 17, 1);
  expect_close(tv, ctv, 0, 0);
  expect_close(ti, cti, 0, 0);
  Tensor h = randn({5, 300}).to(kFloat16);
  auto [hv, hi] = sort(h.cuda(), 0);
  auto [chv, chi] = sort(h, 0);
  expect_close(hv, chv, 0, 0);
  expect_close(hi, chi, 0, 0);
}

TEST(CudaNn, ConvAndPoolAtResnetShapes) {
  KILN_REQUIRE_CUDA();
  manual_seed(23);
  Tensor x = randn({2, 3, 64, 64}), w = randn({16, 3, 7, 7}) * 0.1, b = randn({16});
  Tensor gx = x.cuda().requires_grad_(true), gw = w.cuda().requires_grad_(true), gb = b.cuda().requires_grad_(true);
  Tensor cx = x.clone().requires_grad_(true), cw = w.clone().requires_grad_(true), cb = b.clone().requires_grad_(true);
  Tensor gy = max_pool2d(conv2d(gx, gw, gb, {2}, {3}), {3}, {2}, {1});
  Tensor cy = max_pool2d(conv2d(cx, cw, cb, {2}, {3}), {3}, {2}, {1});
  expect_close(gy, cy, 1e-4, 1e-4);
  (gy * gy).sum().backward();
  (cy * cy).sum().backward();
  expect_close(gx.grad(), cx.grad(), 1e-3, 1e-3);
  expect_close(gw.grad(), cw.grad(), 1e-3, 1e-2);
  expect_close(gb.grad(), cb.grad(), 1e-3, 1e-2);
}

TEST(CudaNn, SearchsortedAsTheCpu) {
  KILN_REQUIRE_CUDA();
  manual_seed(24);
  Tensor seq = std::get<0>(sort(randn({3, 40}), 1)), v = randn({3, 25});
  for (bool right : {false, true}) {
    expect_close(searchsorted(seq.cuda(), v.cuda(), false, right), searchsorted(seq, v, false, right), 0, 0);
    expect_close(searchsorted(seq[0].cuda(), v.cuda(), true, right), searchsorted(seq[0], v, true, right), 0, 0);
  }
  Tensor un = randn({3, 40});
  Tensor order = argsort(un, 1);
  expect_close(searchsorted(un.cuda(), v.cuda(), false, false, std::nullopt, order.cuda()),
               searchsorted(un, v, false, false, std::nullopt, order), 0, 0);
}

TEST(CudaNn, NonzeroAndMaskedSelect) {
  KILN_REQUIRE_CUDA();
  manual_seed(25);
  Tensor x = randint(-1, 2, {7, 9, 11}).to(kFloat32);  // a third zeros
  const float nan = std::numeric_limits<float>::quiet_NaN();
  x.index_put_({Tensor(tensor({0, 1}, kInt64)), Tensor(tensor({0, 2}, kInt64)), Tensor(tensor({0, 3}, kInt64))},
               tensor({nan, -0.0f}));
  expect_close(nonzero(x.cuda()), nonzero(x), 0, 0);
  expect_close(nonzero(x.to(kInt8).cuda()), nonzero(x.to(kInt8)), 0, 0);
  expect_close(nonzero(zeros({0, 3}).cuda()), nonzero(zeros({0, 3})), 0, 0);
  Tensor m = gt(randn({9, 1}), Scalar(0.0));  // broadcast against [7, 9, 11]
  expect_close(masked_select(x.cuda(), m.cuda()), masked_select(x, m), 0, 0);
  Tensor y = randn({5, 6}).to(kFloat64), ym = gt(y, Scalar(0.2));
  expect_close(masked_select(y.cuda(), ym.cuda()), masked_select(y, ym), 0, 0);
  expect_close(y.cuda().index({ym.cuda()}), y.index({ym}), 0, 0);  // a 2-d mask: nonzero, then two index tensors
}

}  // namespace
}  // namespace kiln
