// kiln::save / kiln::load for training checkpoints and plain state_dicts.
//
// Note [Checkpoint layout]
// One safetensors file. Tensors: "model.<state_dict key>" and "optimizer.<index>.<state name>"
// (OptimizerStateDict::state keys). __metadata__: "kiln.format" = "kiln.checkpoint.1",
// "kiln.step", "kiln.optimizer" (JSON: name, param_groups options, group_params), and
// "extra.<key>" for the caller's strings. A plain safetensors reader can still list and load
// the model's tensors.
#include "kiln/checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "core/tensor_impl.h"
#include "kiln/io.h"

namespace kiln {

namespace {

constexpr const char* kFormat = "kiln.checkpoint.1";
constexpr std::string_view kModel = "model.";
constexpr std::string_view kOptim = "optimizer.";
constexpr std::string_view kExtra = "extra.";

bool starts_with(const std::string& s, std::string_view prefix) { return s.rfind(prefix, 0) == 0; }

std::map<std::string, std::string> base_metadata(int64_t step, const std::map<std::string, std::string>& extra) {
  std::map<std::string, std::string> meta{{"kiln.format", kFormat}, {"kiln.step", std::to_string(step)}};
  for (const auto& [k, v] : extra) meta[std::string(kExtra) + k] = v;
  return meta;
}

void add_model(StateDict& out, const nn::Module& model) {
  for (const auto& [k, t] : model.state_dict()) out.insert(std::string(kModel) + k, t);
}

// At most `limit` names, then how many more: a mismatch of two architectures can list hundreds.
std::string key_list(const std::vector<std::string>& keys, size_t limit = 20) {
  std::string out;
  for (size_t i = 0; i < keys.size() && i < limit; ++i) out += (i ? ", " : "") + keys[i];
  if (keys.size() > limit) out += ", ... (" + std::to_string(keys.size() - limit) + " more)";
  return out;
}

// The file's keys as the model names them: strip_prefix removed where present, then add_prefix.
StateDict map_keys(const StateDict& in, const LoadOptions& o, const std::string& where) {
  if (o.strip_prefix.empty() && o.add_prefix.empty()) return in;
  StateDict out;
  std::map<std::string, std::string> source;  // mapped key -> file key, to name a collision
  for (const auto& [key, t] : in) {
    std::string k = starts_with(key, o.strip_prefix) ? key.substr(o.strip_prefix.size()) : key;
    k = o.add_prefix + k;
    auto [it, added] = source.emplace(k, key);
    KILN_CHECK(added, where, ": keys '", it->second, "' and '", key, "' both become '", k, "' after strip_prefix '",
               o.strip_prefix, "' / add_prefix '", o.add_prefix, "'");
    out.insert(k, t);
  }
  return out;
}

// The first dotted component shared by every key ("module." from DataParallel), or "".
std::string common_prefix(const std::vector<std::string>& keys) {
  if (keys.empty()) return "";
  size_t dot = keys[0].find('.');
  if (dot == std::string::npos) return "";
  std::string p = keys[0].substr(0, dot + 1);
  for (const auto& k : keys)
    if (!starts_with(k, p)) return "";
  return p;
}

// Checks `state` against the model's keys, shapes and dtypes, as torch's load_state_dict, and
// lists every problem at once. Changes nothing.
nn::LoadResult check_model_state(const std::string& where, const nn::Module& model, const StateDict& state,
                                 bool strict) {
  const StateDict mine = model.state_dict();
  nn::LoadResult r;
  std::vector<std::string> bad;
  for (const auto& [key, t] : mine) {
    const Tensor* src = state.find(key);
    if (!src) {
      r.missing_keys.push_back(key);
      continue;
    }
    if (src->sizes() != t.sizes())
      bad.push_back("size mismatch for " + key + ": " + shape_str(src->sizes()) + " in the file, " +
                    shape_str(t.sizes()) + " in the model");
    // Floating point converts (as torch's copy_); anything else would change values silently.
    else if (src->dtype() != t.dtype() && !(is_floating_point(src->dtype()) && is_floating_point(t.dtype())))
      bad.push_back("dtype mismatch for " + key + ": " + std::string(dtype_name(src->dtype())) + " in the file, " +
                    std::string(dtype_name(t.dtype())) + " in the model");
  }
  for (const auto& [key, t] : state)
    if (!mine.contains(key)) r.unexpected_keys.push_back(key);
  bool fail = !bad.empty() || (strict && (!r.missing_keys.empty() || !r.unexpected_keys.empty()));
  if (!fail) return r;
  std::string msg = where + ": error(s) loading the state_dict into " + model.type_name() + ":";
  if (strict && !r.missing_keys.empty()) msg += "\n  missing keys: " + key_list(r.missing_keys);
  if (strict && !r.unexpected_keys.empty()) {
    msg += "\n  unexpected keys: " + key_list(r.unexpected_keys);
    std::string p = common_prefix(r.unexpected_keys);
    if (!p.empty() && common_prefix(mine.keys()) != p)
      msg += "\n  (every unexpected key starts with '" + p + "': try LoadOptions{.strip_prefix = \"" + p + "\"})";
  }
  for (const auto& b : bad) msg += "\n  " + b;
  KILN_FAIL(msg);
}

}  // namespace

void save(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer, int64_t step,
          const std::map<std::string, std::string>& extra) {
  StateDict tensors;
  add_model(tensors, model);
  optim::OptimizerStateDict osd = optimizer.state_dict();
  for (const auto& [k, t] : osd.state) tensors.insert(std::string(kOptim) + k, t);
  nlohmann::json j = {
      {"name", optimizer.name()}, {"param_groups", osd.param_groups}, {"group_params", osd.group_params}};
  auto meta = base_metadata(step, extra);
  meta["kiln.optimizer"] = j.dump();
  safetensors::save_file(tensors, path, meta);
}

void save(const std::string& path, const nn::Module& model, int64_t step,
          const std::map<std::string, std::string>& extra) {
  StateDict tensors;
  add_model(tensors, model);
  safetensors::save_file(tensors, path, base_metadata(step, extra));
}

Checkpoint load(const std::string& path, nn::Module& model, optim::Optimizer* optimizer, const LoadOptions& options) {
  const std::string where = "kiln::load('" + path + "')";
  safetensors::SafeTensorsFile file(path);
  const auto& meta = file.metadata();
  auto get = [&](const std::string& key) -> const std::string* {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  };
  const std::string* format = get("kiln.format");
  Checkpoint ck;
  if (!format) {
    // A plain state_dict (safetensors.torch.save_file, or safetensors::save_file of a state_dict).
    KILN_CHECK(!optimizer, where,
               ": the file is a plain state_dict with no optimizer state, but an optimizer was given");
    StateDict plain;
    for (const std::string& key : file.keys()) plain.insert(key, file.get(key));
    StateDict state = map_keys(plain, options, where);
    nn::LoadResult r = check_model_state(where, model, state, options.strict);
    model.load_state_dict(state, /*strict=*/false);
    ck.missing_keys = std::move(r.missing_keys);
    ck.unexpected_keys = std::move(r.unexpected_keys);
    return ck;
  }
  KILN_CHECK(*format == kFormat, where, ": metadata kiln.format is '", *format, "', expected '", kFormat,
             "' (a checkpoint of another kiln version?)");
  const std::string* step = get("kiln.step");
  KILN_CHECK(step, where, ": metadata kiln.step is missing");
  try {
    size_t used = 0;
    ck.step = std::stoll(*step, &used);
    if (used != step->size() || ck.step < 0) throw std::invalid_argument("trailing");
  } catch (const std::logic_error&) {
    KILN_FAIL(where, ": bad kiln.step '", *step, "'");
  }

  StateDict model_state, optim_state;
  for (const std::string& key : file.keys()) {
    if (starts_with(key, kModel))
      model_state.insert(key.substr(kModel.size()), file.get(key));
    else if (starts_with(key, kOptim))
      optim_state.insert(key.substr(kOptim.size()), file.get(key));
    else
      KILN_FAIL(where, ": unexpected tensor '", key, "' (expected model.* or optimizer.*)");
  }
  model_state = map_keys(model_state, options, where);
  nn::LoadResult r = check_model_state(where, model, model_state, options.strict);
  model.load_state_dict(model_state, /*strict=*/false);
  ck.missing_keys = std::move(r.missing_keys);
  ck.unexpected_keys = std::move(r.unexpected_keys);

  if (optimizer) {
    const std::string* oj = get("kiln.optimizer");
    KILN_CHECK(oj, where, ": the checkpoint holds no optimizer state, but an optimizer was given");
    optim::OptimizerStateDict osd;
    osd.state = std::move(optim_state);
    std::string name;
    try {
      auto j = nlohmann::json::parse(*oj);
      name = j.at("name").get<std::string>();
      osd.param_groups = j.at("param_groups").get<std::vector<std::map<std::string, double>>>();
      osd.group_params = j.at("group_params").get<std::vector<std::vector<int64_t>>>();
    } catch (const nlohmann::json::exception& e) {
      KILN_FAIL(where, ": corrupt optimizer metadata (", e.what(), ")");
    }
    KILN_CHECK(name == optimizer->name(), where, ": the checkpoint holds ", name, " state, but the optimizer is ",
               optimizer->name());
    optimizer->load_state_dict(osd);
  }
  for (const auto& [k, v] : meta)
    if (starts_with(k, kExtra)) ck.extra[k.substr(kExtra.size())] = v;
  return ck;
}

}  // namespace kiln
