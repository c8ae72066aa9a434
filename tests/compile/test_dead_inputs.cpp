// Note [Externs into dead inputs]: index_add, index_put, scatter, scatter_add and scatter_reduce write
// into input 0 when the graph's last use of it is theirs and nothing else holds it; the answer is
// eager's whether or not they may (the buffer read again later, a view of it alive, a graph input),
// and where they may, the compiled call allocates one full-size buffer less.
#include <gtest/gtest.h>

#include "kiln/compile.h"
#include "kiln/kiln.h"
#include "kiln/memory.h"
#include "tests/compile/compare.h"
#include "tests/compile/fresh_jit_cache.h"

namespace kiln {
namespace {

class DeadInputs : public testing::FreshJitCache {};

std::vector<CompileOptions> backends() {
  return {{.backend = "aot_eager", .background = false}, {.backend = "inductor", .background = false}};
}

TEST_F(DeadInputs, EveryAliasingGivesEagersAnswer) {
  manual_seed(0);
  Tensor src = randn({6, 5}), idx = tensor<int64_t>({3, 0, 3, 7, 1, 0}, {6});
  Tensor idx2 = tensor<int64_t>({1, 0, 0, 1, 1, 0}, {6, 1});
  Tensor idx5 = tensor<int64_t>({3, 0, 3, 5, 1, 0}, {6});
  auto programs = std::vector<std::function<std::vector<Tensor>(const Tensor&, const Tensor&)>>{
      // dead: the zeros are made for index_add and read by nothing after it
      [&](const Tensor& s, const Tensor&) { return std::vector<Tensor>{zeros({8, 5}).index_add(0, idx, s) * 2}; },
      // alive: the buffer is read again after the write
      [&](const Tensor& s, const Tensor& base) {
        Tensor z = base * 3;
        Tensor y = z.index_add(0, idx, s);
        return std::vector<Tensor>{y, z};
      },
      // a view of the buffer outlives the write
      [&](const Tensor& s, const Tensor& base) {
        Tensor z = base + 1;
        Tensor row = z.select(0, 3);
        Tensor y = z.index_add(0, idx, s);
        return std::vector<Tensor>{y, row * 1};
      },
      // the buffer is a graph input: the caller's tensor must not change
      [&](const Tensor& s, const Tensor& base) { return std::vector<Tensor>{base.index_add(0, idx, s)}; },
      // the source is the buffer itself
      [&](const Tensor&, const Tensor& base) {
        Tensor z = base.narrow(0, 0, 6) * 2;
        return std::vector<Tensor>{z.index_add(0, idx5, z)};
      },
      // scatter_add and index_put into fresh buffers
      [&](const Tensor& s, const Tensor& base) {
        Tensor a = zeros({2, 5}).scatter_add(0, idx2.expand({6, 5}).contiguous(), s);
        Tensor b = index_put(base * 0, {idx}, s, /*accumulate=*/true);
        return std::vector<Tensor>{a, b};
      },
  };
  for (size_t p = 0; p < programs.size(); ++p) {
    for (const CompileOptions& o : backends()) {
      SCOPED_TRACE("program " + std::to_string(p) + " under " + o.backend);
      Tensor base = randn({8, 5}), before = base.clone();
      auto f = compile(programs[p], o);
      std::vector<Tensor> want = programs[p](src, base);
      for (int call = 0; call < 2; ++call) {
        std::vector<Tensor> got = f(src, base);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); ++i) testing::expect_forward_close(got[i], want[i], "output " + std::to_string(i));
        EXPECT_EQ(testing::max_abs(base, before), 0) << "the input changed";
      }
    }
  }
}

// The embedding gradient's shape: zeros of a large table, index_add of a few rows. Writing into
// the zeros saves a table-sized buffer at the peak.
TEST_F(DeadInputs, ScatteringIntoFreshZerosAllocatesNoCopy) {
  manual_seed(1);
  const int64_t rows = 1 << 16, dim = 16;
  Tensor src = randn({32, dim}), idx = randint(0, rows, {32}, TensorOptions(kInt64));
  auto body = [&](const Tensor& s) { return zeros({rows, dim}).index_add(0, idx, s).sum(0); };
  const size_t table = static_cast<size_t>(rows * dim) * sizeof(float);
  for (const CompileOptions& o : backends()) {
    SCOPED_TRACE(o.backend);
    auto f = compile(body, o);
    testing::expect_forward_close(f(src), body(src));
    const size_t at_rest = memory_allocated();
    reset_peak_memory_stats();
    Tensor got = f(src);
    const size_t peak = max_memory_allocated() - at_rest;
    EXPECT_LT(peak, table + table / 2) << "peak " << peak << " bytes over a " << table << "-byte table";
    testing::expect_forward_close(got, body(src));
  }
}

}  // namespace
}  // namespace kiln
