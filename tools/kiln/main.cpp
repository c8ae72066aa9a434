// The kiln command-line tool: kiln info | ops | bench ops.
#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "dispatch/dispatch.h"
#include "kiln/backends.h"
#include "kiln/kiln.h"
#include "kiln/parallel.h"
#include "ops/registry.h"
#include "tools/kiln/commands.h"
#include "tools/kiln/train/train.h"

namespace kiln::cli {

namespace {
std::vector<std::string> kernel_devices(const OpInfo& info) {
  std::vector<std::string> d;
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    // Views only compute metadata: they run wherever a backend exists.
    bool view_here = info.has(VIEW) && info.meta && get_backend(static_cast<DeviceType>(t));
    if (info.kernels[t] || view_here) d.emplace_back(device_type_name(static_cast<DeviceType>(t)));
  }
  return d;
}

std::string flags_str(const OpInfo& info) {
  std::string s;
  auto add = [&](uint32_t f, const char* name) {
    if (info.has(f)) s += (s.empty() ? "" : ",") + std::string(name);
  };
  add(POINTWISE, "pointwise");
  add(REDUCTION, "reduction");
  add(VIEW, "view");
  add(RANDOM, "random");
  add(DATA_DEPENDENT, "data-dependent");
  add(FACTORY, "factory");
  add(MUTATES, "mutates");
  return s;
}
}  // namespace

std::string cpu_info(const std::string& key) {
  if (const Backend* b = get_backend(DeviceType::CPU))
    for (const auto& [k, v] : b->info())
      if (k == key) return v;
  return "?";
}

// The CUDA backend's info() (src/backend/cuda/backend.cpp): "devices" (a count), "status" when
// there are none, one "cuda:N" line per device, "runtime", "cudnn". Empty in a build without CUDA.
std::vector<std::pair<std::string, std::string>> cuda_info() {
  const Backend* b = get_backend(DeviceType::CUDA);
  return b ? b->info() : std::vector<std::pair<std::string, std::string>>{};
}

int cmd_info(bool json) {
  bool cuda = get_backend(DeviceType::CUDA) != nullptr;
  auto cinfo = cuda_info();
  nlohmann::json cuda_devices = nlohmann::json::array();
  std::string cuda_status, cuda_runtime, cudnn;
  for (const auto& [k, v] : cinfo) {
    if (k.rfind("cuda:", 0) == 0)
      cuda_devices.push_back({{"device", k}, {"properties", v}});
    else if (k == "status")
      cuda_status = v;
    else if (k == "runtime")
      cuda_runtime = v;
    else if (k == "cudnn")
      cudnn = v;
  }
  nlohmann::json j = {
      {"version", version()},
      {"compiler", KILN_COMPILER},
      {"blas", cpu_info("blas")},
      {"cuda", cuda},
      {"threads", get_num_threads()},
      {"onednn",
       {{"available", backends::onednn::is_available()},
        {"enabled", backends::onednn::enabled()},
        {"version", backends::onednn::version()},
        {"isa", backends::onednn::isa()}}},
      {"devices", cuda ? std::vector<std::string>{"cpu", "cuda"} : std::vector<std::string>{"cpu"}},
      {"cuda_devices", cuda_devices},
      {"cudnn", cudnn},
      {"ops", kNumOps},
  };
  if (json) {
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::printf("kiln %s\n", version());
  std::printf("  compiler : %s\n", KILN_COMPILER);
  std::printf("  blas     : %s\n", cpu_info("blas").c_str());
  std::printf("  threads  : %d (KILN_NUM_THREADS; BLAS threads outside parallel regions: %s)\n", get_num_threads(),
              cpu_info("blas_threads").c_str());
  if (backends::onednn::is_available())
    std::printf("  onednn   : %s, isa %s, %s\n", backends::onednn::version().c_str(), backends::onednn::isa().c_str(),
                backends::onednn::enabled() ? "used for float convolutions" : "off (KILN_ONEDNN=0)");
  else
    std::printf("  onednn   : not built in (libdnnl-dev): kiln's conv kernels\n");
  std::printf("  devices  : cpu%s\n", cuda ? ", cuda" : " (built without CUDA)");
  if (cuda) {
    std::printf("  cuda     : runtime %s, %zu device%s%s%s\n", cuda_runtime.c_str(), cuda_devices.size(),
                cuda_devices.size() == 1 ? "" : "s", cuda_status.empty() ? "" : ": ", cuda_status.c_str());
    for (const auto& d : cuda_devices)
      std::printf("    %s : %s\n", d["device"].get<std::string>().c_str(), d["properties"].get<std::string>().c_str());
    std::printf("  cudnn    : %s\n", cudnn.c_str());
  }
  std::printf("  ops      : %d in the op table\n", kNumOps);
  return 0;
}

int cmd_ops(bool json) {
  nlohmann::json arr = nlohmann::json::array();
  for (int i = 0; i < kNumOps; ++i) {
    const OpInfo& info = op_info(static_cast<OpId>(i));
    nlohmann::json o = {
        {"name", info.name},
        {"kind", info.kind == OpKind::Prim ? "prim" : "composite"},
        {"differentiable", info.differentiable()},
        {"devices", kernel_devices(info)},
        {"decomposition", info.decomp != nullptr},
        {"flags", flags_str(info)},
        {"signature", info.signature},
    };
    arr.push_back(o);
  }
  if (json) {
    std::cout << arr.dump() << "\n";
    return 0;
  }
  std::printf("%-34s %-9s %-5s %-9s %-6s %s\n", "op", "kind", "grad", "kernels", "decomp", "flags");
  for (const auto& o : arr) {
    std::string devs;
    for (const auto& d : o["devices"]) devs += (devs.empty() ? "" : ",") + d.get<std::string>();
    std::printf("%-34s %-9s %-5s %-9s %-6s %s\n", o["name"].get<std::string>().c_str(),
                o["kind"].get<std::string>().c_str(), o["differentiable"].get<bool>() ? "yes" : "no",
                devs.empty() ? "-" : devs.c_str(), o["decomposition"].get<bool>() ? "yes" : "no",
                o["flags"].get<std::string>().c_str());
  }
  std::printf("%d ops\n", kNumOps);
  return 0;
}

namespace {

// A whole number in [0, hi], checked on the text before CLI11 converts it, so a
// value out of range (--steps 99999999999999999999, --seed -1) is a usage error
// instead of saturating or wrapping around in the conversion.
CLI::Validator whole_number(uint64_t hi) {
  std::string range = "[0, " + std::to_string(hi) + "]";
  return CLI::Validator(
      [hi, range](std::string& s) -> std::string {
        uint64_t v = 0;
        const char *b = s.data(), *e = s.data() + s.size();
        auto [p, ec] = std::from_chars(b, e, v);
        if (ec == std::errc() && p == e && v <= hi) return "";
        return "expected a whole number in " + range + ", got '" + s + "'";
      },
      "UINT in " + range);
}
constexpr uint64_t kMaxCount = 1'000'000'000;  // steps, batch, intervals: more is a typo, not a plan

// "kiln nope": name the valid subcommands of the command that was given.
std::string subcommand_names(const CLI::App* app) {
  std::string names;
  for (const CLI::App* s : app->get_subcommands([](const CLI::App*) { return true; }))
    names += (names.empty() ? "" : ", ") + s->get_name();
  return names;
}

int run(int argc, char** argv) {
  CLI::App app{"kiln: a C++ deep-learning framework with eager and compiled modes"};
  app.require_subcommand(1);
  bool json = false;

  auto* train = app.add_subcommand("train", "train a built-in task: digits (a CNN) or chars (a character GPT)");
  kiln::train::Options to;
  bool no_bar = false, bar = false;
  train->add_option("--task", to.task, "digits | chars")->capture_default_str();
  train->add_option("--steps", to.steps, "training steps (default: the task's)")->check(whole_number(kMaxCount));
  train->add_option("--batch", to.batch, "batch size (default: the task's)")->check(whole_number(kMaxCount));
  train->add_option("--lr", to.lr, "AdamW learning rate (default: the task's)");
  train->add_option("--seed", to.seed, "random seed (initialisation, batch order)")
      ->capture_default_str()
      ->check(whole_number(UINT64_MAX));
  train->add_option("--device", to.device, "cpu or cuda")->capture_default_str();
  train->add_option("--checkpoint", to.checkpoint_dir, "directory for checkpoint.safetensors (saved at the end)");
  train->add_option("--checkpoint-every", to.checkpoint_every, "also save every N steps")
      ->check(whole_number(kMaxCount));
  train->add_flag("--resume", to.resume, "continue from the checkpoint in --checkpoint DIR");
  train->add_option("--log-every", to.log_every, "steps per logged interval (default: the task's)")
      ->check(whole_number(kMaxCount));
  train->add_option("--data-dir", to.data_dir, "where digits.u8 / tinyshakespeare.txt are");
  train->add_flag("--progress", bar, "always draw the live progress bar");
  train->add_flag("--no-progress", no_bar, "plain lines even on a terminal");
  train->add_flag("--json", to.json, "end with one line holding a JSON summary");
  train->add_flag("--compile", to.compile, "run each training step through kiln::compile");
  train->add_option("--backend", to.backend, "compile backend: aot_eager | eager (with --compile)")
      ->capture_default_str();

  auto* info = app.add_subcommand("info", "version, compiler, BLAS, threads, devices");
  info->add_flag("--json", json, "print one JSON object");
  auto* ops = app.add_subcommand("ops", "every op in the op table");
  ops->add_flag("--json", json, "print one JSON array");
  auto* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  auto* bench_ops = bench->add_subcommand("ops", "CPU kernels against their hardware bounds");
  kiln::cli::BenchOptions bo;
  bench_ops->add_option("--repeat", bo.repeat, "timed repetitions per case (median reported)")
      ->check(whole_number(INT32_MAX));
  bench_ops->add_flag("--json", bo.json, "print one JSON object");
  auto* bench_zoo = bench->add_subcommand("zoo", "one eager training step of each BENCHMARKS.md workload");
  kiln::cli::ZooOptions zo;
  bench_zoo->add_option("--models", zo.models, "comma-separated: mlp,gpt_nano,gpt2,resnet18,mobilenet_v2,dlrm")
      ->capture_default_str();
  bench_zoo->add_option("--iters", zo.iters, "timed steps per model (median reported)")
      ->capture_default_str()
      ->check(whole_number(INT32_MAX));
  bench_zoo->add_option("--device", zo.device, "cpu (BENCHMARKS.md's CPU sizes) or cuda (its GPU sizes)")
      ->capture_default_str();
  bench_zoo->add_option("--precision", zo.precision, "fp32 or bf16 (autocast, as torch_zoo.py)")->capture_default_str();
  bench_zoo->add_flag("--json", zo.json, "one JSON line per model (keys as torch_zoo.py's)");
  bench_zoo->add_flag("--compiled", zo.compiled, "eager against kiln::compile: training step and inference");
  bench_zoo->add_flag("--profile", zo.profile, "CUDA: print each op's GPU time over 3 more steps (stderr)");
  bench_zoo->add_option("--backend", zo.backend, "compile backend with --compiled")->capture_default_str();
  bench_zoo
      ->add_option("--phases", zo.phases,
                   "with --compiled: train (forward and loss compiled), step (the whole training step, "
                   "AdamW included, compiled), infer")
      ->capture_default_str();
  auto* bench_compile = bench->add_subcommand("compile", "capture and AOT autograd (aot_eager) on each zoo model");
  kiln::cli::ZooOptions co;
  co.iters = 5;
  bench_compile->add_option("--models", co.models, "comma-separated: mlp,gpt_nano,gpt2,resnet18,mobilenet_v2,dlrm")
      ->capture_default_str();
  bench_compile->add_option("--iters", co.iters, "timed steps per model (median reported)")
      ->capture_default_str()
      ->check(whole_number(INT32_MAX));
  bench_compile->add_flag("--json", co.json, "one JSON line per model");
  bench_compile->add_flag("--cold", co.cold,
                          "also time recording warm (a call right after another) and cold (after sweeping a "
                          "buffer larger than the last-level cache)");
  auto* bench_launch = bench->add_subcommand("launch", "per-op cost of tiny eager ops (a one-element add loop)");
  kiln::cli::LaunchOptions lo;
  bench_launch->add_option("--device", lo.device, "cuda or cpu")->capture_default_str();
  bench_launch->add_option("--iters", lo.iters, "ops per timed loop (at least 1)")
      ->capture_default_str()
      ->check(whole_number(INT32_MAX));
  bench_launch->add_flag("--json", lo.json, "print one JSON object");
  auto* bench_memory = bench->add_subcommand("memory", "bandwidth of memory-bound CUDA ops against a device copy");
  kiln::cli::MemoryOptions mo;
  bench_memory->add_option("--device", mo.device, "a CUDA device")->capture_default_str();
  bench_memory->add_flag("--json", mo.json, "print one JSON object");

  // Wrong usage: one line naming the problem, the usage line, exit code 2.
  auto usage_error = [&](const std::string& msg, const CLI::App* sub) {
    std::fprintf(stderr, "kiln: %s\n", msg.c_str());
    std::string name;  // the subcommand path, e.g. " bench zoo"
    for (const CLI::App* a = sub; a && a != &app; a = a->get_parent()) name = " " + a->get_name() + name;
    std::fprintf(stderr, "usage: kiln%s [OPTIONS] (see kiln%s --help)\n", name.c_str(), name.c_str());
    return 2;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const CLI::App* sub = app.get_subcommands().empty() ? nullptr : app.get_subcommands().front();
    // The deepest subcommand given names the usage line (`kiln bench zoo`, not `kiln bench`).
    while (sub && !sub->get_subcommands().empty()) sub = sub->get_subcommands().front();
    // A missing or unknown subcommand (`kiln`, `kiln nope`, `kiln bench nope`): list the valid ones.
    const CLI::App* parent = sub ? sub : &app;
    bool wants_sub = parent->get_require_subcommand_min() > 0 && parent->get_subcommands().empty();
    if (wants_sub) {
      std::vector<std::string> extra = parent->remaining();
      std::string msg = extra.empty() ? "a command is required" : "unknown command '" + extra.front() + "'";
      return usage_error(msg + " (valid: " + subcommand_names(parent) + ")", sub);
    }
    return usage_error(e.what(), sub);
  }
  try {
    if (*train) {
      if (bar && no_bar) return usage_error("--progress and --no-progress exclude each other", train);
      if (bar) to.progress_bar = true;
      if (no_bar) to.progress_bar = false;
      try {
        kiln::train::validate(to);
      } catch (const kiln::Error& e) {
        return usage_error(e.what(), train);
      }
      kiln::train::Summary s = kiln::train::run(to, std::cout);
      if (to.json) std::cout << kiln::train::summary_json(s) << "\n";
      return 0;
    }
    if (*info) return kiln::cli::cmd_info(json);
    if (*ops) return kiln::cli::cmd_ops(json);
    if (*bench_ops) return kiln::cli::cmd_bench_ops(bo);
    if (*bench_zoo) {
      try {
        kiln::cli::validate_zoo(zo);
      } catch (const kiln::Error& e) {
        return usage_error(e.what(), bench_zoo);
      }
      return kiln::cli::cmd_bench_zoo(zo);
    }
    if (*bench_launch) {
      if (lo.iters < 1) return usage_error("--iters: expected at least 1", bench_launch);
      return kiln::cli::cmd_bench_launch(lo);
    }
    if (*bench_memory) return kiln::cli::cmd_bench_memory(mo);
    if (*bench_compile) {
      try {
        kiln::cli::validate_zoo(co);
      } catch (const kiln::Error& e) {
        return usage_error(e.what(), bench_compile);
      }
      return kiln::cli::cmd_bench_compile(co);
    }
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "kiln: %s\n", e.what());
    return 1;
  }
  return 0;
}

// One line on stderr, never more: messages of some exceptions span lines.
void print_error(const std::string& msg) {
  std::string line = msg;
  for (char& ch : line)
    if (ch == '\n') ch = ' ';
  std::fprintf(stderr, "kiln: %s\n", line.c_str());
}

}  // namespace
}  // namespace kiln::cli

// Never aborts: every exception (a checkpoint path that cannot be created, an
// allocation that fails, ...) becomes one line on stderr and exit code 1, and a
// failed write to stdout (a full disk, a closed pipe) is an error too.
int main(int argc, char** argv) {
  int rc = 1;
  try {
    rc = kiln::cli::run(argc, argv);
  } catch (const std::bad_alloc&) {
    kiln::cli::print_error("out of memory (std::bad_alloc): try a smaller --batch or model");
    rc = 1;
  } catch (const std::exception& e) {
    kiln::cli::print_error(e.what());
    rc = 1;
  } catch (...) {
    kiln::cli::print_error("unknown error");
    rc = 1;
  }
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    kiln::cli::print_error("error writing to stdout");
    if (rc == 0) rc = 1;
  }
  return rc;
}
