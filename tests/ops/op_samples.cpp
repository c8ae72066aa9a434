// The sample registry of Note [Op samples], in its own file so that other test
// binaries (the compile fuzzer, tests/compile/fuzz_compile.cpp) can link the samples.
#include "tests/ops/op_samples.h"

#include <map>

namespace kiln::test {

namespace {
// An op may register samples from several files (sum: reductions and views):
// all of them run.
struct Registered {
  std::vector<SampleFn> samples;
  std::vector<ErrorFn> errors;
};
std::map<OpId, Registered>& registry() {
  static std::map<OpId, Registered> r;
  return r;
}
}  // namespace

std::vector<OpSample> op_samples(OpId op) {
  std::vector<OpSample> samples;
  auto it = registry().find(op);
  if (it == registry().end()) return samples;
  for (SampleFn f : it->second.samples) {
    std::vector<OpSample> part = f();
    if (part.empty()) ADD_FAILURE() << "op '" << op_name(op) << "' registered an empty sample list";
    for (OpSample& s : part) samples.push_back(std::move(s));
  }
  return samples;
}

std::vector<ErrorSample> op_error_samples(OpId op) {
  std::vector<ErrorSample> all;
  auto it = registry().find(op);
  if (it == registry().end()) return all;
  for (ErrorFn f : it->second.errors)
    for (ErrorSample& e : f()) all.push_back(std::move(e));
  return all;
}

bool register_samples(OpId op, SampleFn samples, ErrorFn errors) {
  auto& r = registry()[op];
  if (samples) r.samples.push_back(samples);
  if (errors) r.errors.push_back(errors);
  return true;
}

}  // namespace kiln::test
