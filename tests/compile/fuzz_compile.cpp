// The differential compile fuzzer of issue 27: random programs built from the op table's samples
// (tests/compile/fuzz/program.h) run eagerly and under kiln::compile ("eager", "aot_eager",
// "aot_eager" with assume_pure, and "inductor" on every Nth program, since it compiles C++ per
// graph); outputs, writes into inputs, gradients and errors must agree (fuzz/differ.h). A
// mismatch is shrunk and printed as a reproducer.
//
// ctest runs seeds 1, 2, ... (at most 2800) for KILN_FUZZ_SECONDS (default 20; 60 in
// scripts/test). By hand, scripts/fuzz-compile SECONDS SEED, or (one command line):
//   KILN_FUZZ_SECONDS=600 KILN_FUZZ_SEED=1000000 KILN_FUZZ_KEEP_GOING=1
//     build/tests/kiln_fuzz_compile --gtest_filter=FuzzCompile.*
// Other knobs: KILN_FUZZ_PROGRAMS (stop after N), KILN_FUZZ_INDUCTOR_EVERY (default 8, 0: never),
// KILN_FUZZ_VARIANTS=eager,aot_eager,aot_eager+pure,inductor, KILN_FUZZ_STEPS (default 6),
// KILN_FUZZ_ENABLE=aliasing_args,... (known bug classes, Switches in fuzz/program.h),
// KILN_FUZZ_PRINT=1 (print every program).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "kiln/compile.h"
#include "tests/compile/fuzz/differ.h"

namespace kiln::fuzz {
namespace {

double env_num(const char* name, double def) {
  const char* e = std::getenv(name);
  return e && *e ? std::atof(e) : def;
}
std::string env_str(const char* name, const char* def) {
  const char* e = std::getenv(name);
  return e && *e ? e : def;
}

// Inductor needs a C++ compiler at run time (KILN_CXX or CXX); without one it is skipped.
bool inductor_works() {
  try {
    CompileOptions o;
    o.backend = "inductor";
    o.background = false;
    auto f = compile([](const Tensor& x) { return x * 2 + 1; }, o);
    f(ones({3}));
    return true;
  } catch (const std::exception& e) {
    std::cout << "[fuzz] inductor skipped: " << e.what() << "\n";
    return false;
  }
}

// What identifies a bug class in a shrunk program: the variant, the kind of mismatch, and the
// ops and step kinds left.
std::string signature(const Program& p, const Mismatch& m) {
  std::set<std::string> parts;
  for (const Step& s : p.steps) {
    if (!s.enabled) continue;
    if (s.kind == StepKind::Op)
      parts.insert(op_name(sample_pool()[s.sample].op));
    else
      parts.insert("step" + std::to_string(static_cast<int>(s.kind)));
  }
  std::string sig = m.variant + "/" + m.kind;
  for (const std::string& s : parts) sig += " " + s;
  return sig;
}

TEST(FuzzCompile, FixedSeeds) {
  const double seconds = env_num("KILN_FUZZ_SECONDS", 20);
  const auto max_programs = static_cast<long>(env_num("KILN_FUZZ_PROGRAMS", 0));
  const auto seed0 = static_cast<uint64_t>(env_num("KILN_FUZZ_SEED", 1));
  const auto inductor_every = static_cast<long>(env_num("KILN_FUZZ_INDUCTOR_EVERY", 8));
  const bool keep_going = env_num("KILN_FUZZ_KEEP_GOING", 0) != 0;
  const bool print = env_num("KILN_FUZZ_PRINT", 0) != 0;
  const std::string which = env_str("KILN_FUZZ_VARIANTS", "eager,aot_eager,aot_eager+pure,inductor");
  GenOptions gen;
  gen.max_steps = static_cast<int>(env_num("KILN_FUZZ_STEPS", 6));
  gen.switches = switches_from_env();

  const auto t0 = std::chrono::steady_clock::now();
  const size_t pool = sample_pool().size();
  const bool inductor = which.find("inductor") != std::string::npos && inductor_every > 0 && inductor_works();
  std::vector<Variant> base, with_inductor;
  for (const Variant& v : all_variants()) {
    if (("," + which + ",").find("," + v.name + ",") == std::string::npos) continue;
    if (v.name != "inductor") base.push_back(v);
    if (v.name != "inductor" || inductor) with_inductor.push_back(v);
  }
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::cout << "[fuzz] " << pool << " samples of the op table, ready in " << elapsed() << " s\n";

  long programs = 0, inductor_programs = 0, mismatches = 0;
  std::set<std::string> seen;
  std::map<std::string, long> known;  // switch name -> mismatches of that known class
  for (uint64_t seed = seed0; elapsed() < seconds && (max_programs == 0 || programs < max_programs); ++seed) {
    Program p = generate(seed, gen);
    const bool use_inductor = inductor && inductor_every > 0 && seed % inductor_every == 0;
    if (print) std::cout << to_string(p);
    std::optional<Mismatch> m;
    try {
      m = check(p, use_inductor ? with_inductor : base);
    } catch (const std::exception& e) {
      m = Mismatch{"(harness)", "exception", e.what()};
    }
    ++programs;
    inductor_programs += use_inductor;
    if (!m) continue;
    const std::string cls = known_class(p, *m, gen.switches);
    // A known class does not fail the test; by hand (KILN_FUZZ_KEEP_GOING) its first program is
    // shrunk and printed, in ctest only its seed (shrinking takes seconds).
    if (!cls.empty() && known[cls]++ > 0) continue;
    if (!cls.empty() && !keep_going) {
      std::cout << "[fuzz] known class '" << cls << "', seed " << seed << ": " << m->variant << ": " << m->detail
                << "\n";
      continue;
    }
    if (cls.empty()) ++mismatches;
    Variant v;
    for (const Variant& c : all_variants())
      if (c.name == m->variant) v = c;
    auto same = [&](const Program& q, const Mismatch& mq) {
      return mq.kind == m->kind && known_class(q, mq, gen.switches) == cls;
    };
    Program small = v.name.empty() ? p : shrink(p, v, same, v.name == "inductor" ? 40 : 300);
    std::optional<Mismatch> ms = v.name.empty() ? m : check(small, {v});
    if (!ms) ms = m;
    const std::string sig = signature(small, *ms);
    std::ostringstream report;
    report << "[fuzz] mismatch, seed " << seed << ", " << ms->variant << ": " << ms->kind << "\n"
           << ms->detail << "\nminimal program:\n"
           << to_string(small) << "(signature: " << sig << ")\n";
    if (!cls.empty())
      std::cout << "[fuzz] known class '" << cls << "' (KILN_FUZZ_ENABLE=" << cls << " to fail on it):\n"
                << report.str();
    else if (seen.insert(sig).second)
      ADD_FAILURE() << report.str();
    if (cls.empty() && !keep_going) break;
  }
  const double s = elapsed();
  std::cout << "[fuzz] " << programs << " programs (" << inductor_programs << " also under inductor) in " << s
            << " s: " << programs / s << " programs/s; " << mismatches << " new mismatches (" << seen.size()
            << " distinct)\n";
  for (auto& [cls, n] : known) std::cout << "[fuzz] known class " << cls << ": " << n << " programs\n";
  EXPECT_GT(programs, 0);
}

}  // namespace
}  // namespace kiln::fuzz
