// kiln::save / kiln::load for training checkpoints.
//
// Note [Checkpoint layout]
// One safetensors file. Tensors: "model.<state_dict key>" and "optimizer.<index>.<state name>"
// (OptimizerStateDict::state keys). __metadata__: "kiln.format" = "kiln.checkpoint.1",
// "kiln.step", "kiln.optimizer" (JSON: name, param_groups options, group_params), and
// "extra.<key>" for the caller's strings. A plain safetensors reader can still list and load
// the model's tensors.
#include "kiln/checkpoint.h"

#include <nlohmann/json.hpp>

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

}  // namespace

void save(const std::string& path, const nn::Module& model, const optim::Optimizer& optimizer, int64_t step,
          const std::map<std::string, std::string>& extra) {
  StateDict tensors;
  add_model(tensors, model);
  optim::OptimizerStateDict osd = optimizer.state_dict();
  for (const auto& [k, t] : osd.state) tensors.insert(std::string(kOptim) + k, t);
  nlohmann::json j = {{"name", optimizer.name()},
                      {"param_groups", osd.param_groups},
                      {"group_params", osd.group_params}};
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

Checkpoint load(const std::string& path, nn::Module& model, optim::Optimizer* optimizer) {
  safetensors::SafeTensorsFile file(path);
  const auto& meta = file.metadata();
  auto get = [&](const std::string& key) -> const std::string* {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  };
  const std::string* format = get("kiln.format");
  KILN_CHECK(format && *format == kFormat, "kiln::load: ", path, " is not a kiln checkpoint (metadata kiln.format is ",
             format ? "'" + *format + "'" : std::string("missing"), ", expected '", kFormat, "')");
  Checkpoint ck;
  const std::string* step = get("kiln.step");
  KILN_CHECK(step, "kiln::load: ", path, ": metadata kiln.step is missing");
  try {
    size_t used = 0;
    ck.step = std::stoll(*step, &used);
    if (used != step->size() || ck.step < 0) throw std::invalid_argument("trailing");
  } catch (const std::logic_error&) {
    KILN_FAIL("kiln::load: ", path, ": bad kiln.step '", *step, "'");
  }

  StateDict model_state, optim_state;
  for (const std::string& key : file.keys()) {
    if (starts_with(key, kModel))
      model_state.insert(key.substr(kModel.size()), file.get(key));
    else if (starts_with(key, kOptim))
      optim_state.insert(key.substr(kOptim.size()), file.get(key));
    else
      KILN_FAIL("kiln::load: ", path, ": unexpected tensor '", key, "' (expected model.* or optimizer.*)");
  }
  model.load_state_dict(model_state, /*strict=*/true);

  if (optimizer) {
    const std::string* oj = get("kiln.optimizer");
    KILN_CHECK(oj, "kiln::load: ", path, " holds no optimizer state, but an optimizer was given");
    optim::OptimizerStateDict osd;
    osd.state = std::move(optim_state);
    std::string name;
    try {
      auto j = nlohmann::json::parse(*oj);
      name = j.at("name").get<std::string>();
      osd.param_groups = j.at("param_groups").get<std::vector<std::map<std::string, double>>>();
      osd.group_params = j.at("group_params").get<std::vector<std::vector<int64_t>>>();
    } catch (const nlohmann::json::exception& e) {
      KILN_FAIL("kiln::load: ", path, ": corrupt optimizer metadata (", e.what(), ")");
    }
    KILN_CHECK(name == optimizer->name(), "kiln::load: ", path, " holds ", name, " state, but the optimizer is ",
               optimizer->name());
    optimizer->load_state_dict(osd);
  }
  for (const auto& [k, v] : meta)
    if (starts_with(k, kExtra)) ck.extra[k.substr(kExtra.size())] = v;
  return ck;
}

}  // namespace kiln
