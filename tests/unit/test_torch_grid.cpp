// F.affine_grid and F.grid_sample against PyTorch 1.13: every mode x padding_mode x align_corners for
// 4-D and 5-D input (bicubic: 4-D, as torch), grids reaching outside [-1, 1] and exactly on the borders, non-square
// sizes, float64, a size-1 input axis; values and gradients w.r.t. theta, input and grid. The fixture
// (tests/fixtures/torch_grid.safetensors) was written by tests/fixtures/make_torch_grid_fixture.py.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/nn/functional.h"
#include "tests/unit/torch_fixture.h"

namespace kiln {
namespace {

namespace F = kiln::nn::functional;

using kiln::testing::Outs;

const kiln::testing::TorchCases fixture("torch_grid.safetensors");

// f's value and the gradients of sum(f(xs)^2), as the fixture's value_and_grads(); an input that
// the output does not depend on gets a zero gradient, as torch's kernels give.
Outs value_and_grads(const std::function<Tensor(const Outs&)>& f, Outs xs) {
  for (auto& x : xs) x = x.detach().clone().requires_grad_(true);
  Tensor y = f(xs);
  y.square().sum().backward();
  Outs r{y.detach()};
  for (auto& x : xs) {
    EXPECT_TRUE(x.grad().defined()) << "torch gives a (zeros) gradient";
    r.push_back(x.grad().defined() ? x.grad() : zeros_like(x));
  }
  return r;
}

void check_grid_sample(const std::string& name, const std::string& mode, const std::string& pad, bool ac) {
  fixture.check(name, [&] {
    return value_and_grads([&](const Outs& v) { return F::grid_sample(v[0], v[1], mode, pad, ac); },
                           {fixture.in(name), fixture.in(name, 1)});
  });
}

TEST(TorchGrid, AffineGrid) {
  for (bool ac : {false, true}) {
    std::string t = std::to_string(int(ac));
    fixture.check("affine2d_ac" + t, [&] {
      return value_and_grads(
          [&](const Outs& v) {
            return F::affine_grid(v[0], {2, 3, 4, 5}, ac);
          },
          {fixture.in("affine2d_ac" + t)});
    });
    fixture.check("affine3d_ac" + t, [&] {
      return value_and_grads(
          [&](const Outs& v) {
            return F::affine_grid(v[0], {2, 1, 3, 4, 2}, ac);
          },
          {fixture.in("affine3d_ac" + t)});
    });
  }
  fixture.check("affine2d_one", [] {
    Tensor th = fixture.in("affine2d_one");
    return Outs{F::affine_grid(th, {2, 1, 1, 4}, true), F::affine_grid(th, {2, 1, 3, 1}, false)};
  });
  fixture.check("affine_f64", [] {
    return value_and_grads(
        [](const Outs& v) {
          return F::affine_grid(v[0], {2, 1, 3, 2, 4});
        },
        {fixture.in("affine_f64")});
  });
}

TEST(TorchGrid, GridSampleEveryMode) {
  for (std::string mode : {"bilinear", "nearest", "bicubic"})
    for (std::string pad : {"zeros", "border", "reflection"})
      for (bool ac : {false, true}) {
        std::string suffix = mode + "_" + pad + "_ac" + std::to_string(int(ac));
        check_grid_sample("gs2d_" + suffix, mode, pad, ac);
        if (mode != "bicubic") check_grid_sample("gs3d_" + suffix, mode, pad, ac);
      }
}

TEST(TorchGrid, GridSampleEdgeCases) {
  for (std::string pad : {"zeros", "border", "reflection"}) {
    check_grid_sample("gs_f64_" + pad, "bilinear", pad, false);
    for (bool ac : {false, true})
      check_grid_sample("gs_h1_" + pad + "_ac" + std::to_string(int(ac)), "bilinear", pad, ac);
  }
  // NaN and +-inf coordinates: NaN outputs (zeros, bilinear), clipped to 0 or the border otherwise.
  for (std::string mode : {"bilinear", "nearest", "bicubic"})
    for (std::string pad : {"zeros", "border", "reflection"})
      for (bool ac : {false, true}) {
        std::string name = "gs_nan_" + mode + "_" + pad + "_ac" + std::to_string(int(ac));
        fixture.check(name, [&] { return Outs{F::grid_sample(fixture.in(name), fixture.in(name, 1), mode, pad, ac)}; });
      }
  fixture.check("gs_noncontig", [] {
    return Outs{F::grid_sample(fixture.in("gs_noncontig").transpose(2, 3), fixture.in("gs_noncontig", 1), "bilinear",
                               "zeros", true)};
  });
  fixture.check("stn", [] {
    return value_and_grads(
        [](const Outs& v) {
          return F::grid_sample(v[0], F::affine_grid(v[1], {2, 3, 3, 4}));
        },
        {fixture.in("stn"), fixture.in("stn", 1)});
  });
  // An empty batch and an empty output grid give empty results, as torch.
  Tensor x = randn({0, 2, 3, 4});
  EXPECT_EQ(F::grid_sample(x, zeros({0, 2, 2, 2})).sizes().vec(), (std::vector<int64_t>{0, 2, 2, 2}));
  EXPECT_EQ(F::grid_sample(randn({1, 2, 3, 4}), zeros({1, 0, 5, 2})).sizes().vec(), (std::vector<int64_t>{1, 2, 0, 5}));
}

// Compositions of registered ops: shape inference on the meta device and compile() come with them.
TEST(TorchGrid, MetaAndCompile) {
  TensorOptions meta = TensorOptions().device(Device("meta"));
  Tensor y = F::grid_sample(empty({2, 3, 4, 5}, meta), empty({2, 6, 7, 2}, meta), "bicubic", "reflection");
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 3, 6, 7}));
  EXPECT_EQ(F::affine_grid(empty({2, 3, 4}, meta), {2, 1, 3, 4, 5}).sizes().vec(),
            (std::vector<int64_t>{2, 3, 4, 5, 3}));

  auto body = [](const Tensor& x, const Tensor& th) {
    return F::grid_sample(x, F::affine_grid(th, {2, 3, 3, 4}), "bilinear", "border", true);
  };
  auto f = compile(body);
  Tensor x = fixture.in("stn"), th = fixture.in("stn", 1);
  kiln::testing::expect_same_as_torch(f(x, th), body(x, th), "compiled vs eager");
  EXPECT_EQ(f.stats().graphs_compiled, 1);
}

void expect_error(const std::function<void()>& f, const std::string& what) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one saying " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(TorchGrid, Errors) {
  Tensor th = randn({2, 2, 3});
  expect_error([&] { F::affine_grid(th.to(kInt64), {2, 1, 3, 3}); }, "floating point");
  expect_error([&] { F::affine_grid(th, {2, 1, 3, 3, 3}); }, "Nx3x4");
  expect_error([&] { F::affine_grid(randn({2, 3, 4}), {2, 1, 3, 3}); }, "Nx2x3");
  expect_error([&] { F::affine_grid(th, {2, 3}); }, "only supports 4D and 5D sizes");
  expect_error([&] { F::affine_grid(th, {2, 1, 0, 3}); }, "non-zero, positive output size");
  expect_error([&] { F::affine_grid(th, {3, 1, 2, 3}); }, "batch size");

  Tensor x = randn({2, 3, 4, 5}), g = randn({2, 3, 3, 2});
  expect_error([&] { F::grid_sample(x, g, "linear"); }, "expected mode");
  expect_error([&] { F::grid_sample(x, g, "bilinear", "wrap"); }, "expected padding_mode");
  expect_error(
      [&] {
        F::grid_sample(randn({1, 2, 2, 2, 2}), randn({1, 1, 1, 1, 3}), "bicubic");
      },
      "bicubic interpolation only supports 4D input");
  expect_error([&] { F::grid_sample(x, g.to(kFloat64)); }, "same dtype");
  expect_error([&] { F::grid_sample(x, randn({2, 3, 2})); }, "4D or 5D input");
  expect_error([&] { F::grid_sample(randn({2, 3, 4}), randn({2, 3, 2})); }, "4D or 5D input");
  expect_error([&] { F::grid_sample(x, randn({1, 3, 3, 2})); }, "same batch size");
  expect_error([&] { F::grid_sample(x, randn({2, 3, 3, 3})); }, "size 2 in last dimension");
  expect_error([&] { F::grid_sample(randn({2, 3, 0, 5}), g); }, "non-empty spatial dimensions");
  expect_error([&] { F::grid_sample(x.to(kInt64), g.to(kInt64)); }, "floating-point");
}

}  // namespace
}  // namespace kiln
