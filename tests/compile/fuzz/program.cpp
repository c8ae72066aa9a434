// Building, running and printing the fuzzer's programs (program.h).
#include "tests/compile/fuzz/program.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

namespace kiln::fuzz {

namespace {
// Samples with more input elements than this are left out: many programs per second matter
// more than large shapes (the op tests cover those).
constexpr int64_t kMaxSampleNumel = 4096;
constexpr int kViewVariants = 7, kInplaceVariants = 5, kBranchVariants = 2;
}  // namespace

Switches switches_from_env() {
  Switches s;
  const char* e = std::getenv("KILN_FUZZ_ENABLE");
  std::string on = e ? e : "";
  auto has = [&](const char* n) {
    return on == "all" || ("," + on + ",").find(std::string(",") + n + ",") != std::string::npos;
  };
  s.aliasing_args = s.aliasing_args || has("aliasing_args");
  s.saved_tensor_versions = s.saved_tensor_versions || has("saved_tensor_versions");
  s.view_strides = s.view_strides || has("view_strides");
  s.detach_outputs = s.detach_outputs || has("detach_outputs");
  s.reads_after_break = s.reads_after_break || has("reads_after_break");
  s.nograd_inplace = s.nograd_inplace || has("nograd_inplace");
  s.pure_detach_constant = s.pure_detach_constant || has("pure_detach_constant");
  s.grads_across_breaks = s.grads_across_breaks || has("grads_across_breaks");
  s.zero_vs_undefined_grads = s.zero_vs_undefined_grads || has("zero_vs_undefined_grads");
  s.as_strided_overlap = s.as_strided_overlap || has("as_strided_overlap");
  s.writes_to_viewed_tensors = s.writes_to_viewed_tensors || has("writes_to_viewed_tensors");
  s.overlapping_writes = s.overlapping_writes || has("overlapping_writes");
  s.unchecked_grads = s.unchecked_grads || has("unchecked_grads");
  s.written_aliased_grad_inputs = s.written_aliased_grad_inputs || has("written_aliased_grad_inputs");
  s.symbols_after_data_dependent = s.symbols_after_data_dependent || has("symbols_after_data_dependent");
  s.copy_aliases_source = s.copy_aliases_source || has("copy_aliases_source");
  s.empty_reduction_grad = s.empty_reduction_grad || has("empty_reduction_grad");
  s.ties_in_full_reductions = s.ties_in_full_reductions || has("ties_in_full_reductions");
  return s;
}

const std::vector<PoolEntry>& sample_pool() {
  static const std::vector<PoolEntry> pool = [] {
    std::vector<PoolEntry> p;
    for (int i = 0; i < kNumOps; ++i) {
      OpId op = static_cast<OpId>(i);
      for (OpSample& s : test::op_samples(op)) {
        int64_t n = 0;
        for (const Tensor& t : s.inputs) n += t.defined() ? t.numel() : 0;
        if (n > kMaxSampleNumel || s.inputs.empty()) continue;
        // Values that are not comparable (uninitialized memory, a nondeterministic order) would
        // flow into every later step; random ops are compared (each run reseeds).
        if (!s.compare_values && !op_info(op).has(RANDOM)) continue;
        p.push_back({op, std::move(s), n});
      }
    }
    return p;
  }();
  return pool;
}

const std::vector<size_t>& samples_of(OpId op) {
  static const std::vector<std::vector<size_t>> by_op = [] {
    std::vector<std::vector<size_t>> v(kNumOps);
    const auto& pool = sample_pool();
    for (size_t i = 0; i < pool.size(); ++i) v[static_cast<int>(pool[i].op)].push_back(i);
    return v;
  }();
  return by_op[static_cast<int>(op)];
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::Transposed:
      return "transposed";
    case Layout::Strided:
      return "strided";
    case Layout::Expanded:
      return "expanded";
  }
  return "?";
}

int Program::num_inputs() const {
  int n = 0;
  for (const Step& s : steps)
    if (s.kind == StepKind::Op) n += static_cast<int>(sample_pool()[s.sample].sample.inputs.size());
  return n;
}

namespace {

// `v`'s values laid out as `l` asks (Expanded repeats the first slice along a dim of size > 1),
// in new memory: contiguous() may return its argument, and programs write into their inputs
// (the pool's samples must never change).
Tensor lay_out(const Tensor& src, Layout l) {
  const Tensor v = src.clone();
  const int64_t d = v.dim();
  switch (l) {
    case Layout::Contiguous:
      return v.contiguous().clone();
    case Layout::Transposed:
      if (d < 2) return v.clone();
      return v.transpose(0, d - 1).contiguous().transpose(0, d - 1);
    case Layout::Strided: {
      if (d < 1) return v.clone();
      std::vector<int64_t> big = v.sizes().vec();
      big.back() *= 2;
      Tensor b = zeros(SymIntArrayRef(big), v.options());
      b.slice(d - 1, 0, big.back(), 2).copy_(v);
      return b.slice(d - 1, 0, big.back(), 2);
    }
    case Layout::Expanded:
      for (int64_t i = 0; i < d; ++i)
        if (v.sizes()[i] > 1) return v.narrow(i, 0, 1).contiguous().expand(v.sym_sizes());
      return v.clone();
  }
  return v;
}

Tensor fresh(const Tensor& base, const Arg& a, double scale) {
  Tensor t;
  {
    NoGradGuard g;
    Tensor v = base.detach();
    if (v.is_floating_point() && scale != 1.0) v = v * scale;
    t = lay_out(v, a.layout).detach();
  }
  if (a.requires_grad && t.is_floating_point()) t.requires_grad_(true);
  return t;
}

bool same_meta(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.dtype() == b.dtype() && a.sizes().vec() == b.sizes().vec();
}

// Whether two elements of `t` share one memory location (a dim of stride 0, sliding windows).
bool overlaps_itself(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of dims with size > 1
  for (int64_t i = 0; i < t.dim(); ++i)
    if (t.sizes()[i] > 1) dims.emplace_back(t.strides()[i], t.sizes()[i]);
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;  // the largest offset the smaller-stride dims reach
  for (auto [stride, size] : dims) {
    if (stride <= reach) return true;
    reach += stride * (size - 1);
  }
  return false;
}

// Whether `t` shares storage with another tensor in `others`.
bool shares_storage(const Tensor& t, const std::vector<Tensor>& others) {
  for (const Tensor& o : others)
    if (o.defined() && !o.is_same(t) && o.has_storage() && t.has_storage() && o.is_alias_of(t)) return true;
  return false;
}

Tensor apply_view(const Tensor& v, int variant) {
  const int64_t d = v.dim();
  switch (variant % kViewVariants) {
    case 0:
      return d >= 2 ? v.transpose(0, d - 1) : v.unsqueeze(0);
    case 1:
      return d >= 1 ? v.slice(d - 1, 0, v.sizes()[d - 1], 2) : v.unsqueeze(0);
    case 2:
      return d >= 1 && v.sizes()[0] > 0 ? v.select(0, v.sizes()[0] - 1) : v.unsqueeze(-1);
    case 3:
      return v.reshape({-1});
    case 4:
      return v.view({-1});
    case 5: {
      std::vector<int64_t> s = v.sizes().vec();
      s.insert(s.begin(), 2);
      return v.unsqueeze(0).expand(SymIntArrayRef(s));
    }
    default: {
      if (d < 1) return v.unsqueeze(0);
      int64_t n = v.sizes()[0], k = n > 0 ? 1 : 0;
      return v.narrow(0, k, n - k);
    }
  }
}

void apply_inplace(Tensor& v, const Tensor* other, int variant) {
  if (v.dtype() == kBool) {
    v.zero_();
    return;
  }
  switch (variant % kInplaceVariants) {
    case 0:
      v.mul_(2);
      break;
    case 1:
      v.add_(1);
      break;
    case 2:
      v.zero_();
      break;
    case 3:
      if (other && same_meta(*other, v))
        v.copy_(*other);
      else
        v.mul_(-1);
      break;
    default:
      v.masked_fill_(v > 0, 0);
      break;
  }
}

Tensor apply_branch_size(const Tensor& v, int variant) {
  if (v.dtype() == kBool) return v.logical_not();
  bool big = variant % kBranchVariants == 0 ? (v.dim() > 0 && v.size(0) > 2) : v.numel() % 2 == 0;
  return big ? v * 2 : v - 1;
}

// The value branch compares the sum with numel / pi, not with 0: many ops' outputs sum to exactly
// 0 or to an integer by construction (layer_norm rows, a variance of equal values, a log_softmax
// gradient, softmax rows), so the sign of such a sum is rounding noise, and a compiled kernel that
// rounds differently within tolerance would take the other branch (seeds 10025176, 11014800,
// 11015072). numel / pi is no such structural value.
constexpr double kBranchPerElement = 0.31830988618379067;

Tensor apply_branch_value(const Tensor& v) {
  if (v.dtype() == kBool) return v.logical_not();
  double s = v.to(kFloat64).sum().item<double>();  // reads values: a graph break under capture
  return s > kBranchPerElement * static_cast<double>(v.numel()) ? v * 2 : v - 1;
}

// Runs the program, returning every value by id (fresh inputs are ids <= -2: -2 - slot).
std::map<int, Tensor> run_values(const Program& p, const TensorList& in) {
  std::map<int, Tensor> vals;
  auto get = [&](int id) -> const Tensor* {
    if (id <= -2) {
      size_t slot = static_cast<size_t>(-2 - id);
      return slot < in.size() && in[slot].defined() ? &in[slot] : nullptr;
    }
    auto it = vals.find(id);
    return it == vals.end() ? nullptr : &it->second;
  };
  size_t slot = 0;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    const int id = static_cast<int>(k) * kMaxOutputs;
    if (s.kind == StepKind::Op) {
      const OpSample& sample = sample_pool()[s.sample].sample;
      const size_t n = sample.inputs.size();
      if (s.enabled) {
        TensorList args(in.begin() + slot, in.begin() + slot + n);
        for (size_t i = 0; i < n && i < s.args.size(); ++i) {
          const Tensor* c = s.args[i].value == -1 ? nullptr : get(s.args[i].value);
          if (c && same_meta(*c, args[i])) args[i] = *c;  // chained; else the fresh input
        }
        std::optional<NoGradGuard> g;
        if (s.no_grad) g.emplace();
        TensorList r = sample.fn(args);
        for (size_t j = 0; j < r.size() && j < static_cast<size_t>(kMaxOutputs); ++j)
          if (r[j].defined()) vals[id + static_cast<int>(j)] = r[j];
      }
      slot += n;
      continue;
    }
    const Tensor* src = s.enabled ? get(s.src) : nullptr;
    if (!src) continue;
    std::optional<NoGradGuard> g;
    if (s.no_grad) g.emplace();
    Tensor v = *src;
    switch (s.kind) {
      case StepKind::View:
        vals[id] = apply_view(v, s.variant);
        break;
      case StepKind::Inplace:
        apply_inplace(v, get(s.src2), s.variant);
        break;
      case StepKind::Detach:
        vals[id] = v.detach();
        break;
      case StepKind::BranchSize:
        vals[id] = apply_branch_size(v, s.variant);
        break;
      case StepKind::BranchValue:
        vals[id] = apply_branch_value(v);
        break;
      case StepKind::Random:
        vals[id] = v.is_floating_point() ? v * (rand_like(v) > 0.5) : v + (rand_like(v.to(kFloat32)) > 0.5);
        break;
      case StepKind::Op:
        break;
    }
  }
  return vals;
}

}  // namespace

TensorList make_inputs(const Program& p, double scale) {
  TensorList out;
  for (const Step& s : p.steps) {
    if (s.kind != StepKind::Op) continue;
    const OpSample& sample = sample_pool()[s.sample].sample;
    for (size_t i = 0; i < sample.inputs.size(); ++i) {
      const Tensor& base = sample.inputs[i];
      Arg a = i < s.args.size() ? s.args[i] : Arg{};
      if (!base.defined()) {
        out.push_back(base);
      } else if (a.alias_of >= 0 && static_cast<size_t>(a.alias_of) < out.size() && same_meta(out[a.alias_of], base)) {
        out.push_back(out[a.alias_of]);
      } else {
        out.push_back(fresh(base, a, scale));
      }
    }
  }
  return out;
}

TensorList run_program(const Program& p, const TensorList& in) {
  TensorList out;
  for (auto& [id, t] : run_values(p, in)) out.push_back(t);
  return out;
}

bool uses_random(const Program& p) {
  for (const Step& s : p.steps) {
    if (!s.enabled) continue;
    if (s.kind == StepKind::Random) return true;
    if (s.kind == StepKind::Op && op_info(sample_pool()[s.sample].op).has(RANDOM)) return true;
  }
  return false;
}

namespace {
std::string value_name(int id) {
  if (id <= -2) return "in" + std::to_string(-2 - id);
  return "v" + std::to_string(id / kMaxOutputs) + (id % kMaxOutputs ? "_" + std::to_string(id % kMaxOutputs) : "");
}
}  // namespace

std::string shape_str(const Tensor& t) {
  std::ostringstream o;
  o << dtype_name(t.dtype()) << "[";
  for (int64_t i = 0; i < t.dim(); ++i) o << (i ? "," : "") << t.sizes()[i];
  return o.str() + "]";
}

namespace {
const char* kViewText[kViewVariants] = {"dim() >= 2 ? x.transpose(0, -1) : x.unsqueeze(0)",
                                        "x.slice(-1, 0, end, 2)",
                                        "x.select(0, size(0) - 1)",
                                        "x.reshape({-1})",
                                        "x.view({-1})",
                                        "x.unsqueeze(0).expand({2, ...})",
                                        "x.narrow(0, 1, size(0) - 1)"};
const char* kInplaceText[kInplaceVariants] = {"x.mul_(2)", "x.add_(1)", "x.zero_()", "x.copy_(y)",
                                              "x.masked_fill_(x > 0, 0)"};
}  // namespace

std::string to_string(const Program& p) {
  std::ostringstream o;
  TensorList in = make_inputs(p);
  o << "// fuzz program, seed " << p.seed << "\n";
  // The inputs an enabled step reads: its own, and those named by id (views, in-place, chains).
  std::vector<bool> used(in.size(), false);
  auto use = [&](int id) {
    if (id <= -2 && static_cast<size_t>(-2 - id) < used.size()) used[-2 - id] = true;
  };
  size_t slot = 0;
  for (const Step& s : p.steps) {
    size_t n = s.kind == StepKind::Op ? sample_pool()[s.sample].sample.inputs.size() : 0;
    if (s.enabled) {
      use(s.src);
      use(s.src2);
      for (size_t i = 0; i < n; ++i) {
        used[slot + i] = true;
        use(s.args[i].value);
        if (s.args[i].alias_of >= 0) used[s.args[i].alias_of] = true;
      }
    }
    slot += n;
  }
  slot = 0;
  for (const Step& s : p.steps) {
    if (s.kind != StepKind::Op) continue;
    const PoolEntry& e = sample_pool()[s.sample];
    for (size_t i = 0; i < e.sample.inputs.size(); ++i, ++slot) {
      if (!used[slot] || !in[slot].defined()) continue;
      const Arg& a = s.args[i];
      o << "Tensor in" << slot << " = " << shape_str(in[slot]) << " /* input " << i << " of " << op_name(e.op)
        << " sample \"" << e.sample.name << "\" */";
      if (a.layout != Layout::Contiguous) o << ", " << layout_name(a.layout);
      if (a.alias_of >= 0) o << ", SAME TENSOR AS in" << a.alias_of;
      if (in[slot].requires_grad()) o << ", requires_grad";
      if (in[slot].numel() <= 8) o << " = " << in[slot].detach().to_string();
      o << ";\n";
    }
  }
  o << "auto fn = [](TensorList in) {\n";
  slot = 0;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    const std::string out = value_name(static_cast<int>(k) * kMaxOutputs);
    size_t n = s.kind == StepKind::Op ? sample_pool()[s.sample].sample.inputs.size() : 0;
    if (!s.enabled) {
      slot += n;
      continue;
    }
    o << "  ";
    if (s.no_grad) o << "{ NoGradGuard g; ";
    switch (s.kind) {
      case StepKind::Op: {
        const PoolEntry& e = sample_pool()[s.sample];
        o << "auto " << out << " = " << op_name(e.op) << "[sample \"" << e.sample.name << "\"](";
        for (size_t i = 0; i < n; ++i) {
          int v = s.args[i].value;
          o << (i ? ", " : "")
            << (v == -1 ? value_name(-2 - static_cast<int>(slot + i))
                        : value_name(v) + " /*if shape matches, else in" + std::to_string(slot + i) + "*/");
        }
        o << ");";
        slot += n;
        break;
      }
      case StepKind::View:
        o << "Tensor " << out << " = " << kViewText[s.variant % kViewVariants] << ";";
        break;
      case StepKind::Inplace:
        o << kInplaceText[s.variant % kInplaceVariants] << ";";
        if (s.variant % kInplaceVariants == 3) o << "  // y = " << value_name(s.src2);
        break;
      case StepKind::Detach:
        o << "Tensor " << out << " = x.detach();";
        break;
      case StepKind::BranchSize:
        o << "Tensor " << out << " = "
          << (s.variant % kBranchVariants == 0 ? "(x.dim() > 0 && x.size(0) > 2)" : "x.numel() % 2 == 0")
          << " ? x * 2 : x - 1;";
        break;
      case StepKind::BranchValue:
        o << "Tensor " << out << " = x.to(kFloat64).sum().item<double>() > x.numel() / pi ? x * 2 : x - 1;";
        break;
      case StepKind::Random:
        o << "Tensor " << out << " = x * (rand_like(x) > 0.5);";
        break;
    }
    if (s.kind != StepKind::Op) o << "  // x = " << value_name(s.src);
    if (s.no_grad) o << " }";
    o << "\n";
  }
  o << "  return every value above;\n};\n";
  return o.str();
}

Program generate(uint64_t seed, const GenOptions& opt) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  Program p;
  p.seed = seed;
  const auto& pool = sample_pool();
  // Ops that have samples, so that every op is drawn equally often.
  std::vector<OpId> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (!samples_of(static_cast<OpId>(i)).empty()) ops.push_back(static_cast<OpId>(i));
  const size_t want = 1 + pick(opt.max_steps);
  std::map<int, Tensor> vals;  // the values so far (dry run), with fresh inputs as ids <= -2
  TensorList ran;              // the dry run's inputs (what `vals` may alias)
  for (int attempt = 0; attempt < static_cast<int>(want) * 4 && p.steps.size() < want; ++attempt) {
    const TensorList& in = ran;
    std::vector<int> ids;
    for (auto& [id, t] : vals) ids.push_back(id);
    for (size_t i = 0; i < in.size(); ++i)
      if (in[i].defined()) ids.push_back(-2 - static_cast<int>(i));
    auto value_of = [&](int id) { return id <= -2 ? in[-2 - id] : vals[id]; };
    Step s;
    s.no_grad = chance(0.15);
    double r = std::uniform_real_distribution<double>(0, 1)(rng);
    if (ids.empty() || r < 0.5) {
      s.kind = StepKind::Op;
      OpId op = ops[pick(ops.size())];
      const auto& cands = samples_of(op);
      s.sample = cands[pick(cands.size())];
      const OpSample& sample = pool[s.sample].sample;
      const size_t base_slot = in.size();
      for (size_t i = 0; i < sample.inputs.size(); ++i) {
        Arg a;
        const Tensor& t = sample.inputs[i];
        if (t.defined()) {
          double lr = std::uniform_real_distribution<double>(0, 1)(rng);
          a.layout = lr < 0.55   ? Layout::Contiguous
                     : lr < 0.75 ? Layout::Transposed
                     : lr < 0.9  ? Layout::Strided
                                 : Layout::Expanded;
          a.requires_grad = t.is_floating_point() && chance(0.7) && (sample.check_grad || opt.switches.unchecked_grads);
          if (chance(0.5)) {
            std::vector<int> match;
            for (int id : ids)
              if (same_meta(value_of(id), t)) match.push_back(id);
            if (!match.empty()) a.value = match[pick(match.size())];
          }
          if (opt.switches.aliasing_args && a.value == -1 && chance(0.2))
            for (size_t j = 0; j < base_slot + i; ++j)
              if (j < in.size() && same_meta(in[j], t)) a.alias_of = static_cast<int>(j);
        }
        s.args.push_back(a);
      }
    } else {
      s.src = ids[pick(ids.size())];
      double k = (r - 0.5) / 0.5;
      s.kind = k < 0.35  ? StepKind::View
               : k < 0.6 ? StepKind::Inplace
               : k < 0.7 ? StepKind::Detach
               : k < 0.8 ? StepKind::BranchSize
               : k < 0.9 ? StepKind::BranchValue
                         : StepKind::Random;
      s.variant = static_cast<int>(pick(16));
      if (s.kind == StepKind::Detach && !opt.switches.detach_outputs) continue;
      if (s.kind == StepKind::Inplace) s.src2 = ids[pick(ids.size())];
    }
    // A write under NoGradGuard (an in-place step, or an op that mutates its input).
    const bool writes =
        s.kind == StepKind::Inplace || (s.kind == StepKind::Op && op_info(pool[s.sample].op).has(MUTATES));
    if (writes && !opt.switches.nograd_inplace) s.no_grad = false;
    if (writes && (!opt.switches.writes_to_viewed_tensors || !opt.switches.overlapping_writes)) {
      // The tensor written: the in-place step's source, or the mutating op's first input.
      Tensor target;
      if (s.kind == StepKind::Inplace) {
        target = value_of(s.src);
      } else if (!s.args.empty()) {
        const Tensor& own = pool[s.sample].sample.inputs[0];
        target = s.args[0].value != -1 && same_meta(value_of(s.args[0].value), own) ? value_of(s.args[0].value)
                 : s.args[0].layout == Layout::Expanded                             ? lay_out(own, Layout::Expanded)
                                                                                    : Tensor();
      }
      if (target.defined()) {
        std::vector<Tensor> live(in.begin(), in.end());
        for (auto& [id, t] : vals) live.push_back(t);
        if (!opt.switches.overlapping_writes && overlaps_itself(target)) continue;
        if (!opt.switches.writes_to_viewed_tensors && shares_storage(target, live)) continue;
      }
    }
    p.steps.push_back(s);
    try {
      TensorList fin = make_inputs(p);
      vals = run_values(p, fin);
      ran = std::move(fin);
    } catch (const std::exception&) {
      // Mostly drop a step that fails eagerly; keep a few, as tests of error against error.
      if (chance(0.9)) {
        p.steps.pop_back();
        continue;
      }
      break;
    }
  }
  return p;
}

}  // namespace kiln::fuzz
