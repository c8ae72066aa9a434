// Random programs for the differential compile fuzzer (issue 27, tests/compile/fuzz_compile.cpp).
//
// A program is a list of steps over values. Op steps call one op-table sample (Note [Op samples]:
// every op of ops.def registers samples, so a new op is fuzzed without touching this code) on
// its own inputs or on earlier values of the same shape and dtype; other steps take views,
// write in place, detach, branch on sizes or values (graph breaks) and draw random numbers.
// Steps are disabled, never erased, so value ids stay stable while the shrinker works.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "tests/ops/op_samples.h"

namespace kiln::fuzz {

using test::OpSample;
using test::TensorList;

// Bug classes of issue 27 that the fuzzer can generate but leaves out until they are fixed, so
// that the CI test passes; each is a named switch (env KILN_FUZZ_ENABLE=name,name turns it on).
struct Switches {
  // Case 2: two arguments of one call sharing storage (the same tensor passed twice).
  bool aliasing_args = false;
  // Case 1 (and 7's div): an in-place write to a value an earlier step already read, so that a
  // tensor saved for backward may be overwritten inside the compiled call.
  bool inplace_on_read_values = false;
  // Case 6: view()/reshape-as-view on a value that an op produced (the compiled graph may give it
  // other strides than eager; fresh or chained views of inputs stay on).
  bool views_of_op_results = false;
};
Switches switches_from_env();

// The samples the fuzzer draws from: every sample of every op, built once per process.
struct PoolEntry {
  OpId op;
  OpSample sample;
  int64_t numel = 0;  // of all its inputs, for the shrinker's "smaller sample"
};
const std::vector<PoolEntry>& sample_pool();
// Indices into sample_pool() of op's samples.
const std::vector<size_t>& samples_of(OpId op);

// How an op step's fresh input is laid out in memory; the values are the sample's either way.
enum class Layout : uint8_t { Contiguous, Transposed, Strided, Expanded };
const char* layout_name(Layout l);

struct Arg {
  int value = -1;  // an earlier value (used when its shape and dtype match), or -1: the fresh input
  Layout layout = Layout::Contiguous;
  bool requires_grad = false;
  int alias_of = -1;  // Switches::aliasing_args: pass this earlier fresh input (by slot) instead
};

enum class StepKind : uint8_t { Op, View, Inplace, Detach, BranchSize, BranchValue, Random };

struct Step {
  StepKind kind = StepKind::Op;
  bool enabled = true;
  bool no_grad = false;   // runs under NoGradGuard
  size_t sample = 0;      // Op: index into sample_pool()
  std::vector<Arg> args;  // Op: one per sample input
  int src = -1;           // other kinds: the value they read
  int src2 = -1;          // Inplace copy_: the value copied (same shape and dtype, else skipped)
  int variant = 0;        // which view / in-place op / branch
};

// Value ids: step index * kMaxOutputs + output index.
constexpr int kMaxOutputs = 16;

struct Program {
  uint64_t seed = 0;
  std::vector<Step> steps;
  int num_inputs() const;  // fresh inputs: one per tensor of every op step's sample (disabled ones too)
};

// The program's fresh inputs (new tensors every call); `scale` multiplies floating values (a
// second call with other values of the same metadata).
TensorList make_inputs(const Program& p, double scale = 1.0);
// Runs the program on `in` (as built by make_inputs): returns every value the steps made.
TensorList run_program(const Program& p, const TensorList& in);
// The same program as readable C++-like text.
std::string to_string(const Program& p);
// "float32[3,4]".
std::string shape_str(const Tensor& t);
// Facts the differ needs.
bool uses_random(const Program& p);

struct GenOptions {
  int max_steps = 6;
  Switches switches;
};
// A random program; the generator runs it eagerly as it goes and keeps mostly steps that run.
Program generate(uint64_t seed, const GenOptions& o);

}  // namespace kiln::fuzz
