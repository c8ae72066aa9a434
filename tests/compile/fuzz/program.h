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

// Bug classes the fuzzer finds but leaves out until they are fixed, so that the CI test passes:
// issue 27's known cases, and the classes this fuzzer found (listed in the issue). Each is a
// named switch; env KILN_FUZZ_ENABLE=name,name (or "all") turns it on. Fixed classes are on
// by default (their regression tests are in tests/compile/test_fuzz_found.cpp). Some keep the generator
// from writing such programs; the others let a mismatch of that class pass as "known"
// (counted and printed once, differ.h: known_class).
struct Switches {
  // Issue 27 case 2 (generator): two arguments of one call sharing storage. Fixed: Note
  // [Aliased inputs] (synthetic bases); written aliased inputs requiring grad are the clear
  // error of written_aliased_grad_inputs below. On since branch fz27c (3,416 programs, seeds 1..,
  // no aliasing mismatch).
  bool aliasing_args = true;  // fixed: on
  // Issue 27 case 1 (and 7's div): eager's backward raises "modified by an in-place operation",
  // compiled's does not (the saved tensor's version is taken after the write).
  // Fixed within one graph (Note [Saved tracer versions]); then eager saved operands PyTorch does
  // not (conv's bias, mul's operand for its own gradient, index_add's source, max_pool3d's
  // result), and a write after a graph break into what eager saved was not seen by a compiled
  // backward that kept something else. Fixed: Note [Saving what the VJP reads] (save rules) and
  // Note [Versions eager would check].
  bool saved_tensor_versions = true;  // fixed: on
  // Issue 27 case 6: compiled raises "view size ... is not compatible with input tensor's size"
  // (a view sees other strides than eager's).
  bool view_strides = true;  // fixed: on
  // Found by the fuzzer (generator): `detach()` inside an aot_eager graph is not eager's alias
  // without grad: `y.detach()` returned beside y requires grad (a backward through both counts
  // the gradient twice), may be returned without storage ("never made real", after quantile),
  // and does not see later in-place writes to y. Off: no detach steps.
  bool detach_outputs = true;  // fixed: on
  // Found by the fuzzer: reading values (item()) of a tensor made after a graph break raises
  // "cannot read the values of a tensor without storage" under aot_eager.
  bool reads_after_break = true;  // fixed: on
  // Found by the fuzzer (generator): an in-place write under NoGradGuard into a tensor whose view
  // (or itself) is an output: the compiled backward differentiates the write (eager does not).
  // Fixed: such a graph keeps eager's autograd (Note [No-grad writes]).
  bool nograd_inplace = true;  // fixed: on
  // Found by the fuzzer: under assume_pure, `arg.detach()` of a tensor argument is captured as
  // a constant, so the guard-only replay (second call, other values) computes with the first
  // call's values (`return in[0].detach() * 2;` returns 2 for ones, then 2 again for fives).
  bool pure_detach_constant = true;  // fixed: on
  // Found by the fuzzer: gradients of outputs of graphs on both sides of a graph break (and a
  // view of one) taken together with autograd::grad lose one output's share under aot_eager.
  // Fixed: the engine ordered a node twice when two roots shared it (autograd::grad).
  bool grads_across_breaks = true;  // fixed: on
  // Found by the fuzzer: a leaf used only under NoGradGuard inside a compiled call gets a
  // defined (zero) gradient where eager's autograd::grad(allow_unused) gives an undefined one.
  // Fixed: Note [No-grad nodes] (and no edge for an input the backward gives no gradient).
  bool zero_vs_undefined_grads = true;  // fixed: on
  // Found by the fuzzer: as_strided of an expanded input requiring grad raises "not supported
  // yet" under aot_eager; eager runs it. Fixed: its derivative shares each storage position's
  // gradient among the input's elements there (PyTorch's as_strided_backward), eagerly and compiled.
  bool as_strided_overlap = true;  // fixed: on
  // Found by the fuzzer (generator), two bugs: eager's autograd does not rebase views after an
  // in-place write to their base (`v = a.unsqueeze(0); a.mul_(2)`: v's gradient uses the old a;
  // PyTorch and aot_eager rebase it), and under aot_eager a view of an argument taken before a
  // graph break does not see a write to the argument after the break. Off: no in-place write
  // to a tensor sharing storage with another live value.
  // Issue 27, turned on by hand: fixed the write-back into an expanded input written through a
  // one-row view (seed 73), writes without grad into a no-grad view or a detach()ed alias of a
  // tensor that requires grad (Note [No-grad writes]; seeds 2683, 3080, 100638, 1016017), and
  // writes into overlapping as_strided windows now raise everywhere (seed 100211).
  // Fixed: a view of a tensor zero_ took the history from loses its history too (seed 3314,
  // Note [View rebase]; views of a leaf that is itself a view of a root without grad keep
  // theirs, seeds 2559, 2798, 4556), a traced `v.copy_(v)` into a stride-0 view raises eager's
  // error (seed 1234), and a strided input written whole keeps its strides under
  // functionalization, so as_strided of it reads eager's elements (seed 3685).
  // (Seeds before the _addmm_bias samples were added; the pool's size moves the programs.)
  bool writes_to_viewed_tensors = true;  // fixed: on
  // (generator) In-place writes into internally overlapping memory (an expanded input,
  // as_strided windows): PyTorch raises, kiln's eager writes with an order-dependent result.
  // Now: eager raises for a stride-0 dim (Note [Overlapping writes] in dispatch.cpp) and every
  // backend raises the same error (FuzzFound.WritesIntoOverlappingMemoryRaiseEagersError).
  // as_strided windows share storage with their source, so writes_to_viewed_tensors (off)
  // still keeps writes into them out.
  bool overlapping_writes = true;  // on
  // Found by the fuzzer: after a data-dependent op (masked_select, nonzero, unique_consecutive,
  // index with a mask), the second call (same sizes) raises under every backend: a size of the
  // data-dependent output is matched to another tensor's size ("sub: the size of tensor a (0)
  // must match the size of tensor b (4)", "compiled graph output 2 has shape [0] where the
  // trace said [2]"), e.g. masked_select(bool[3,4], mask) then median(float64[4,5]).
  // Fixed: the empty graph before the data-dependent op is dropped and the next one takes its
  // index; the symbols it made are retired (SymTable::retire_graph).
  bool symbols_after_data_dependent = true;  // fixed: on
  // Found by the fuzzer: `a.copy_(b); b.zero_(); return a;` returns zeros under aot_eager (the
  // functionalized copy_ makes a an alias of b).
  bool copy_aliases_source = true;  // fixed: on
  // Found by the fuzzer: the gradient of nanmedian over all elements of an empty tensor
  // ([2, 0, 3]): eager's output requires grad, aot_eager's does not.
  // Fixed: composites with a VJP of their own stay one node (Note [Composites with their own
  // derivative]).
  bool empty_reduction_grad = true;  // fixed: on
  // Found by the fuzzer: the gradient of median/nanmedian over all elements with ties (an
  // expanded input): eager (as PyTorch) spreads it evenly over the tied elements, aot_eager gives
  // it all to one element. Fixed as empty_reduction_grad.
  bool ties_in_full_reductions = true;  // fixed: on
  // Was a documented limit (Note [Aliased inputs]): a graph that writes one of several inputs
  // sharing a storage, one of which requires grad, was refused with "not supported yet" (after a
  // graph break: an in-place op on a view whose base is also an input). Fixed: such a graph keeps
  // eager's autograd and computes its values over a synthetic base (seeds 3001989, 1016588,
  // 1014834, 1007182, 32145, 1578, 42032, 935, 100087; FuzzFound.Write*AliasOf*, *WrittenAlias,
  // WriteWithGradIntoAViewInputOfAnotherInput).
  bool written_aliased_grad_inputs = true;  // fixed: on
  // Samples that opt out of gradcheck (saturated or special values: inf, nan) keep their
  // inputs' requires_grad off; on, they are differentiated too (aot_eager's prim VJPs then
  // differ from eager's at those points, e.g. softplus(inf), binary_cross_entropy at 0 and 1).
  bool unchecked_grads = false;
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
