// F.ctc_loss and nn::CTCLoss against PyTorch 1.13: several shapes, repeated labels, zero-length
// targets, impossible alignments with and without zero_infinity, every reduction, padded and
// concatenated targets, a non-zero blank, unbatched input, float64, and the gradients w.r.t.
// log_probs (torch's, see Note [CTC gradient as torch's]) and w.r.t. logits through log_softmax.
// The fixture (tests/fixtures/torch_ctc.safetensors) was written by
// tests/fixtures/make_torch_ctc_fixture.py.
//
// Deliberate differences: an input length of 0 gives 0 (empty target) or inf where torch 1.13
// reads alpha[-1]; negative lengths and out-of-range target labels are errors where torch reads
// out of bounds.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

namespace F = nn::functional;
using kiln::testing::expect_error;
const std::vector<std::string> kReductions = {"none", "mean", "sum"};

using kiln::testing::Outs;
using kiln::testing::operator+;

const kiln::testing::TorchCases fixture("torch_ctc.safetensors");

// The gradient of sum(f(x)^2) (or of sum(f(x))), as the fixture's grad().
Tensor grad(const std::function<Tensor(const Tensor&)>& f, const Tensor& x0, bool square = true) {
  Tensor x = x0.detach().clone().requires_grad_(true);
  Tensor y = f(x);
  (square ? y.square() : y).sum().backward();
  return x.grad();
}

// The fixture's ctc_all: every reduction with and without zero_infinity, then each reduction's gradient.
Outs ctc_all(const Tensor& lp, const Tensor& t, const Tensor& il, const Tensor& tl, int64_t blank = 0) {
  Outs o;
  for (bool z : {false, true})
    for (const auto& r : kReductions) o.push_back(F::ctc_loss(lp, t, il, tl, blank, r, z));
  for (const auto& r : kReductions)
    o.push_back(grad([&](const Tensor& x) { return F::ctc_loss(x, t, il, tl, blank, r, true); }, lp));
  return o;
}

std::vector<int64_t> values(const Tensor& t) { return t.to(kInt64).to_vector<int64_t>(); }

TEST(TorchCtc, PaddedAndConcatenatedTargets) {
  fixture.check("basic", [] {
    Tensor lp = fixture.in("basic"), t = fixture.in("basic", 1), c = fixture.in("basic", 2),
           il = fixture.in("basic", 3), tl = fixture.in("basic", 4);
    return ctc_all(lp, t, il, tl) + ctc_all(lp, c, il, tl);
  });
}

TEST(TorchCtc, LengthsAsVectorsAndNonContiguousInput) {
  fixture.check("basic", [] {
    Tensor lp = fixture.in("basic").transpose(0, 1).contiguous().transpose(0, 1);  // same values, strided
    EXPECT_FALSE(lp.is_contiguous());
    Tensor t = fixture.in("basic", 1), c = fixture.in("basic", 2);
    std::vector<int64_t> il = values(fixture.in("basic", 3)), tl = values(fixture.in("basic", 4));
    Outs o;
    for (const Tensor& tg : {t, c}) {
      for (bool z : {false, true})
        for (const auto& r : kReductions) o.push_back(F::ctc_loss(lp, tg, il, tl, 0, r, z));
      for (const auto& r : kReductions)
        o.push_back(grad([&](const Tensor& x) { return F::ctc_loss(x, tg, il, tl, 0, r, true); }, lp));
    }
    return o;
  });
}

TEST(TorchCtc, ImpossibleAlignments) {
  // inf without zero_infinity (and torch's NaN gradient over those frames), 0 and a zero gradient with it.
  fixture.check("impossible", [] {
    Tensor lp = fixture.in("impossible"), t = fixture.in("impossible", 1), il = fixture.in("impossible", 2),
           tl = fixture.in("impossible", 3);
    return ctc_all(lp, t, il, tl) +
           Outs{grad([&](const Tensor& x) { return F::ctc_loss(x, t, il, tl, 0, "sum"); }, lp, false)};
  });
}

TEST(TorchCtc, NonZeroBlankInt32AndJunkPadding) {
  fixture.check("blank5", [] {
    return ctc_all(fixture.in("blank5"), fixture.in("blank5", 1), fixture.in("blank5", 2), fixture.in("blank5", 3), 5);
  });
}

TEST(TorchCtc, Float64) {
  fixture.check("float64", [] {
    return ctc_all(fixture.in("float64"), fixture.in("float64", 1), fixture.in("float64", 2), fixture.in("float64", 3));
  });
}

TEST(TorchCtc, Unbatched) {
  fixture.check("unbatched", [] {
    Tensor lp = fixture.in("unbatched"), t = fixture.in("unbatched", 1), il = fixture.in("unbatched", 2),
           tl = fixture.in("unbatched", 3);
    Outs o;
    for (const auto& r : kReductions) o.push_back(F::ctc_loss(lp, t, il, tl, 0, r));
    o.push_back(grad([&](const Tensor& x) { return F::ctc_loss(x, t, il, tl, 0, "none"); }, lp));
    return o;
  });
}

TEST(TorchCtc, LogitsGradientAndModule) {
  fixture.check("logits", [] {
    Tensor x = fixture.in("logits"), t = fixture.in("logits", 1), il = fixture.in("logits", 2),
           tl = fixture.in("logits", 3);
    nn::CTCLoss loss(0, "sum", true);
    return Outs{grad([&](const Tensor& z) { return F::ctc_loss(log_softmax(z, 2), t, il, tl); }, x),
                loss(log_softmax(x, 2), t, il, tl)};
  });
  nn::CTCLoss by_vectors(0, "sum", true);
  Tensor x = fixture.in("logits");
  kiln::testing::expect_same_as_torch(by_vectors(log_softmax(x, 2), fixture.in("logits", 1),
                                                 values(fixture.in("logits", 2)), values(fixture.in("logits", 3))),
                                      fixture.out("logits", 1), "CTCLoss with vector lengths");
  expect_error([] { nn::CTCLoss(0, "batchmean"); }, "CTCLoss: 'batchmean' is not a valid value for reduction");
}

TEST(TorchCtc, GradcheckThroughLogSoftmax) {
  // Through log_softmax torch's extra exp(lp) term cancels (Note [CTC gradient as torch's]): the
  // gradient w.r.t. the logits is the true one, checked against finite differences in float64.
  manual_seed(0);
  Tensor x = randn({6, 3, 5}, kFloat64).requires_grad_();
  Tensor t = tensor<int64_t>({1, 1, 2, 3, 4, 0, 2, 2, 2}, {3, 3});  // sample 2 (2 2 2 in 4 frames) is impossible
  for (const auto& r : kReductions)
    EXPECT_TRUE(gradcheck(
        [&](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{F::ctc_loss(log_softmax(in[0], 2), t, std::vector<int64_t>{6, 5, 4},
                                                 std::vector<int64_t>{3, 2, 3}, 0, r, true)};
        },
        {x}))
        << r;
}

TEST(TorchCtc, ZeroInputLength) {
  // torch 1.13 reads alpha[-1] here; no frames make the empty target certain and any other impossible.
  Tensor lp = log_softmax(randn({3, 2, 4}), 2);
  Tensor l = F::ctc_loss(lp, tensor<int64_t>({1, 2, 0, 0}, {2, 2}), std::vector<int64_t>{0, 0},
                         std::vector<int64_t>{0, 2}, 0, "none");
  EXPECT_EQ(l.to_vector<float>(), (std::vector<float>{0.0f, std::numeric_limits<float>::infinity()}));
}

TEST(TorchCtc, Compiled) {
  // The lengths are read on the host (Note [CTC lengths are read]); the compiled function agrees with eager.
  Tensor lp = fixture.in("basic"), t = fixture.in("basic", 1), il = fixture.in("basic", 3), tl = fixture.in("basic", 4);
  auto fn = [&](const Tensor& x) { return F::ctc_loss(x, t, il, tl); };
  auto f = compile(fn);
  for (int i = 0; i < 2; ++i) kiln::testing::expect_same_as_torch(f(lp), fixture.out("basic", 1), "compiled mean");
  EXPECT_EQ(f.stats().graphs_compiled, 1);  // the second call reuses the graph
}

TEST(TorchCtc, Errors) {
  Tensor lp = log_softmax(randn({5, 2, 4}), 2);
  Tensor t = tensor<int64_t>({1, 2, 3, 3}, {2, 2});
  Tensor il = tensor<int64_t>({5, 3}), tl = tensor<int64_t>({2, 2});
  using V = std::vector<int64_t>;
  expect_error([&] { F::ctc_loss(lp, t, V{6, 1}, V{2, 2}); }, "ctc_loss: expected input_lengths in [0, 5]");
  expect_error([&] { F::ctc_loss(lp, t, V{-1, 1}, V{2, 2}); }, "ctc_loss: expected input_lengths in [0, 5]");
  expect_error([&] { F::ctc_loss(lp, t, V{5, 1}, V{2, -1}); }, "ctc_loss: expected non-negative target_lengths");
  expect_error([&] { F::ctc_loss(lp, t, V{5, 1}, V{3, 2}); }, "ctc_loss: expected padded targets of shape [2, >= 3]");
  expect_error(
      [&] {
        F::ctc_loss(lp, flatten(t).narrow(0, 0, 3), V{5, 1}, V{2, 2});
      },
      "ctc_loss: expected concatenated targets of size sum(target_lengths) = 4");
  expect_error([&] { F::ctc_loss(lp, t, V{5}, V{2, 2}); }, "ctc_loss: input_lengths must be of size batch_size (2)");
  expect_error([&] { F::ctc_loss(tensor(1.0), t, V{1}, V{1}); }, "ctc_loss: expected log_probs of shape [T, N, C]");
  expect_error([&] { F::ctc_loss(lp, t, V{5, 1}, V{2}); }, "ctc_loss: target_lengths must be of size batch_size (2)");
  expect_error([&] { F::ctc_loss(lp, t, il, tl, 4); }, "ctc_loss: blank must be in label range [0, 4), got 4");
  expect_error([&] { F::ctc_loss(lp, t, il, tl, -1); }, "ctc_loss: blank must be in label range");
  expect_error([&] { F::ctc_loss(lp, t + 2, il, tl); }, "ctc_loss: target value 4 at flat position 1 is out of range");
  expect_error([&] { F::ctc_loss(lp, t, il.to(kFloat32), tl); }, "ctc_loss: input_lengths must be integral");
  expect_error([&] { F::ctc_loss(lp, t, il, tl.to(kBool)); }, "ctc_loss: target_lengths must be integral");
  expect_error([&] { F::ctc_loss(lp.to(kInt32), t, il, tl); }, "ctc_loss: expected floating log_probs");
  expect_error([&] { F::ctc_loss(lp.select(1, 0).select(1, 0), t, il, tl); },
               "ctc_loss: expected log_probs of shape [T, N, C] or [T, C]");
  expect_error([&] { F::ctc_loss(lp, t.unsqueeze(0), il, tl); }, "ctc_loss: expected targets of shape [N, S]");
  expect_error([&] { F::ctc_loss(lp, t, il, tl, 0, "batchmean"); }, "ctc_loss: reduction must be");
  // torch casts floating targets to int64, as here.
  EXPECT_TRUE(allclose(F::ctc_loss(lp, t.to(kFloat32), il, tl), F::ctc_loss(lp, t, il, tl)));
}

}  // namespace
}  // namespace kiln
