// The table-driven op tests (Note [Op samples]): each op of ops.def registers
// sample inputs with an independent reference; the generated tests run every
// sample, compare with the reference, gradcheck differentiable ops, and check
// that bad inputs throw kiln::Error. An op without samples fails the suite.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "ops/registry.h"
#include "tests/ops/ref.h"

namespace kiln::test {

using TensorList = std::vector<Tensor>;
using OpFn = std::function<TensorList(const TensorList&)>;

struct OpSample {
  std::string name;    // what the case covers, e.g. "broadcast float32 [3,1]x[4]"
  TensorList inputs;
  OpFn fn;             // calls the public kiln function(s) under test
  OpFn reference;      // independent fp64 / naive-loop result, in the expected dtypes
  double atol = 0, rtol = 0;  // 0: the defaults for the output dtype
  bool check_grad = true;     // gradcheck (float64) when the op is differentiable
  std::vector<size_t> grad_inputs;  // inputs to differentiate (empty: every floating input)
  // For random or data-dependent ops whose values cannot be compared: only
  // shapes and dtypes are compared, and `check` (if set) validates outputs.
  std::function<void(const TensorList& outputs)> check;
  bool compare_values = true;
};

struct ErrorSample {
  std::string name;
  std::function<void()> call;
  std::string expect;  // a substring the kiln::Error message must contain
};

// Two computations of one result in another order (compiled against eager, kiln against torch):
// the accuracy rule's tolerances (BENCHMARKS.md: 1e-4 for fp32 forward values), exact for
// integers and bools.
inline void accuracy_tolerance(DType t, double& atol, double& rtol) {
  switch (t) {
    case DType::Float16: atol = 1e-3; rtol = 2e-3; break;
    case DType::BFloat16: atol = 1e-2; rtol = 1.6e-2; break;
    case DType::Float32: atol = 1e-5; rtol = 1e-4; break;
    case DType::Float64: atol = 1e-10; rtol = 1e-7; break;
    default: atol = rtol = 0; break;
  }
}

using SampleFn = std::vector<OpSample> (*)();
using ErrorFn = std::vector<ErrorSample> (*)();
bool register_samples(OpId op, SampleFn samples, ErrorFn errors = nullptr);

// Every sample registered for `op`, from all the files that register it
// (empty when none); the op tests and the meta tests (meta_tests.cpp) run them.
std::vector<OpSample> op_samples(OpId op);

// The samples the compile tests run (each graph compiles code): the first two of each dtype of
// the first defined input, which cover every dtype and the layout kinds the first samples do.
inline std::vector<bool> first_two_of_each_dtype(const std::vector<OpSample>& samples) {
  std::vector<bool> keep;
  std::map<int, int> per_dtype;
  for (const OpSample& s : samples) {
    int key = -1;
    for (const Tensor& t : s.inputs)
      if (t.defined()) {
        key = static_cast<int>(t.dtype());
        break;
      }
    keep.push_back(per_dtype[key]++ < 2);
  }
  return keep;
}
std::vector<ErrorSample> op_error_samples(OpId op);

}  // namespace kiln::test

#define KILN_OP_SAMPLES(op, samples, errors) \
  [[maybe_unused]] static const bool KILN_CONCAT(kiln_samples_, op) = ::kiln::test::register_samples(::kiln::OpId::op, samples, errors)
