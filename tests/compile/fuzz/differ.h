// Runs a fuzz program eagerly and under kiln::compile and compares everything a user can see:
// outputs, the inputs after the call (writes), every gradient, and error against no error.
// Tolerances: BENCHMARKS.md's accuracy rule (fp32: 1e-4 forward, 1e-3 gradients).
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/compile.h"
#include "tests/compile/fuzz/program.h"

namespace kiln::fuzz {

// One way of compiling: a backend and its options. `exact`: eager's kernels in eager's order,
// so the results must be bit for bit eager's.
struct Variant {
  std::string name;
  CompileOptions options;
  bool exact = false;
};
// "eager", "aot_eager", "aot_eager+pure" (assume_pure), "inductor".
std::vector<Variant> all_variants();

struct Mismatch {
  std::string variant;
  std::string kind;    // "error", "output", "input", "backward error", "gradient": what the shrinker keeps
  std::string detail;  // the first differences, readable
  bool second_call = false;
};

// The name of the switch (Switches in program.h) of the known bug class `m` belongs to, when that
// switch is off; else "" (a new mismatch: a failure).
std::string known_class(const Program& p, const Mismatch& m, const Switches& s);

// Each variant's compiled function is called twice: with the inputs eager saw, then with other
// values of the same metadata (guards, trace replay and assume_pure's replay must notice).
std::optional<Mismatch> check(const Program& p, const std::vector<Variant>& variants);

// Drops steps, chains, layouts, grad flags and no_grad regions, and swaps samples for smaller
// ones, while `variant` still mismatches the same way (`same`: the kind of mismatch and its
// known class, so that shrinking does not drift into another bug); at most `budget` checks.
Program shrink(Program p, const Variant& variant, const std::function<bool(const Program&, const Mismatch&)>& same,
               int budget);

}  // namespace kiln::fuzz
