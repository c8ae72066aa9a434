// kiln::save / kiln::load for training checkpoints and plain state_dicts.
//
// Note [Checkpoint layout]
// One safetensors file. Tensors: "model.<state_dict key>" and "optimizer.<index>.<state name>"
// (OptimizerStateDict::state keys). __metadata__: "kiln.format" = "kiln.checkpoint.2",
// "kiln.step", "kiln.optimizer" (JSON: name, param_groups options, group_params), "extra.<key>"
// for the caller's strings, and "kiln.checksum" (Note [Checkpoint checksum]). A plain
// safetensors reader can still list and load the model's tensors. Version 1 (no checksum) is
// still read.
//
// Note [Checkpoint checksum]
// "crc32:<8 hex digits>" over the other metadata (sorted: key, NUL, value, NUL) and then every
// tensor in name order (name, NUL, dtype name, NUL, each size as 8 little-endian bytes, the
// contiguous bytes). A flipped byte anywhere in the data, a changed metadata value, a tensor
// removed, renamed or reshaped: each changes it, and load refuses the file before using it.
#include "kiln/checkpoint.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <set>
#include <system_error>

#include "core/tensor_impl.h"
#include "io/file_util.h"
#include "kiln/io.h"
#include "kiln/version.h"

namespace kiln {

namespace {

constexpr const char* kFormat = "kiln.checkpoint.2";
constexpr const char* kFormatV1 = "kiln.checkpoint.1";  // before kiln.checksum
constexpr const char* kChecksum = "kiln.checksum";
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

// Note [Checkpoint checksum]
std::string checksum(const std::map<std::string, std::string>& meta, const StateDict& tensors) {
  uint32_t crc = 0;
  auto add = [&](const void* p, size_t n) { crc = io::crc32(p, n, crc); };
  auto add_str = [&](const std::string& s) { add(s.data(), s.size() + 1); };  // with its NUL
  for (const auto& [k, v] : meta)
    if (k != kChecksum) add_str(k), add_str(v);
  std::vector<const StateDict::Item*> items;
  for (const auto& item : tensors) items.push_back(&item);
  std::sort(items.begin(), items.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
  for (const auto* item : items) {
    const Tensor t = item->second.detach().to(kCPU).contiguous();
    add_str(item->first);
    add_str(std::string(dtype_name(t.dtype())));
    for (int64_t d : t.sizes()) {
      uint8_t le[8];
      for (int j = 0; j < 8; ++j) le[j] = static_cast<uint8_t>(static_cast<uint64_t>(d) >> (8 * j));
      add(le, 8);
    }
    if (t.nbytes() > 0) add(t.data_ptr(), t.nbytes());
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", crc);
  return std::string("crc32:") + buf;
}

void write_checkpoint(const std::string& path, const StateDict& tensors, std::map<std::string, std::string> meta) {
  meta[kChecksum] = checksum(meta, tensors);
  safetensors::save_file(tensors, path, meta);
}

// The step and extra strings of a kiln checkpoint's metadata, validated.
Checkpoint read_info(const std::string& where, const std::map<std::string, std::string>& meta) {
  auto it = meta.find("kiln.format");
  KILN_CHECK(it != meta.end(), where, ": not a kiln checkpoint (no kiln.format metadata)");
  const std::string& format = it->second;
  if (format != kFormat && format != kFormatV1) {
    // A later kiln's checkpoint names a version this one has never seen: say which, and what
    // this kiln reads, rather than guess at a layout.
    constexpr std::string_view prefix = "kiln.checkpoint.";
    const std::string version = starts_with(format, prefix) ? format.substr(prefix.size()) : "";
    KILN_CHECK(version.empty() || version.find_first_not_of("0123456789") != std::string::npos, where,
               ": the checkpoint has format version ", version, " (metadata kiln.format '", format,
               "'), but this kiln (", kiln::version(), ") reads versions 1 and 2 only: load it with the kiln that wrote it "
               "or a newer one");
    KILN_FAIL(where, ": metadata kiln.format is '", format, "', expected '", kFormat,
              "' (versions 1 and 2 are read): not a kiln checkpoint");
  }
  it = meta.find("kiln.step");
  KILN_CHECK(it != meta.end(), where, ": metadata kiln.step is missing");
  const std::string& step = it->second;
  Checkpoint ck;
  try {
    size_t used = 0;
    ck.step = std::stoll(step, &used);
    if (used != step.size() || ck.step < 0) throw std::invalid_argument("trailing");
  } catch (const std::logic_error&) {
    KILN_FAIL(where, ": bad kiln.step '", step, "' (expected an integer >= 0)");
  }
  for (const auto& [k, v] : meta)
    if (starts_with(k, kExtra)) ck.extra[k.substr(kExtra.size())] = v;
  return ck;
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
  write_checkpoint(path, tensors, std::move(meta));
}

void save(const std::string& path, const nn::Module& model, int64_t step,
          const std::map<std::string, std::string>& extra) {
  StateDict tensors;
  add_model(tensors, model);
  write_checkpoint(path, tensors, base_metadata(step, extra));
}

namespace {

// A plain state_dict (safetensors.torch.save_file, torch.save, safetensors::save_file) into the model.
Checkpoint load_plain(const std::string& where, StateDict plain, nn::Module& model, optim::Optimizer* optimizer,
                      const LoadOptions& options) {
  KILN_CHECK(!optimizer, where, ": the file is a plain state_dict with no optimizer state, but an optimizer was given");
  StateDict state = map_keys(plain, options, where);
  nn::LoadResult r = check_model_state(where, model, state, options.strict);
  model.load_state_dict(state, /*strict=*/false);
  Checkpoint ck;
  ck.missing_keys = std::move(r.missing_keys);
  ck.unexpected_keys = std::move(r.unexpected_keys);
  return ck;
}

}  // namespace

Checkpoint load(const std::string& path, nn::Module& model, optim::Optimizer* optimizer, const LoadOptions& options) {
  const std::string where = "kiln::load('" + path + "')";
  if (pytorch::is_torch_file(path)) return load_plain(where, pytorch::load_file(path), model, optimizer, options);
  safetensors::SafeTensorsFile file(path);
  const auto& meta = file.metadata();
  auto get = [&](const std::string& key) -> const std::string* {
    auto it = meta.find(key);
    return it == meta.end() ? nullptr : &it->second;
  };
  const std::string* format = get("kiln.format");
  if (!format) {
    StateDict plain;
    for (const std::string& key : file.keys()) plain.insert(key, file.get(key));
    return load_plain(where, std::move(plain), model, optimizer, options);
  }
  Checkpoint ck = read_info(where, meta);
  StateDict all, model_state, optim_state;
  for (const std::string& key : file.keys()) {
    Tensor t = file.get(key);
    all.insert(key, t);
    if (starts_with(key, kModel))
      model_state.insert(key.substr(kModel.size()), t);
    else if (starts_with(key, kOptim))
      optim_state.insert(key.substr(kOptim.size()), t);
    else
      KILN_FAIL(where, ": unexpected tensor '", key, "' (expected model.* or optimizer.*)");
  }
  if (*format == kFormat) {
    const std::string* sum = get(kChecksum);
    KILN_CHECK(sum, where, ": metadata ", kChecksum, " is missing");
    const std::string actual = checksum(meta, all);
    KILN_CHECK(*sum == actual, where, ": the checkpoint is corrupt: its data has checksum ", actual,
               " but the file records ", *sum, " (Note [Checkpoint checksum])");
  }

  // Every part is checked before anything changes: the model, then the optimizer.
  model_state = map_keys(model_state, options, where);
  nn::LoadResult r = check_model_state(where, model, model_state, options.strict);
  optim::OptimizerStateDict osd;
  if (optimizer) {
    const std::string* oj = get("kiln.optimizer");
    KILN_CHECK(oj, where, ": the checkpoint holds no optimizer state, but an optimizer was given");
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
    try {
      optimizer->check_state_dict(osd);
    } catch (const Error& e) {
      KILN_FAIL(where, ": ", e.what());
    }
  }
  model.load_state_dict(model_state, /*strict=*/false);
  if (optimizer) optimizer->load_state_dict(osd);
  ck.missing_keys = std::move(r.missing_keys);
  ck.unexpected_keys = std::move(r.unexpected_keys);
  return ck;
}

Checkpoint checkpoint_info(const std::string& path) {
  safetensors::SafeTensorsFile file(path);
  return read_info("kiln::checkpoint_info('" + path + "')", file.metadata());
}

// ---- CheckpointLock ----

CheckpointLock::CheckpointLock(const std::string& dir) : path_(dir + "/.kiln.lock") {
  auto errno_str = [] { return std::generic_category().message(errno); };
  do fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  while (fd_ < 0 && errno == EINTR);
  KILN_CHECK(fd_ >= 0, "checkpoint directory '", dir, "': cannot create the lock file ", path_, ": ", errno_str());
  // flock, not fcntl locks: a second open of the file in this process conflicts too, and the
  // kernel drops the lock when its holder dies, so a killed trainer never leaves a stale lock.
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    char buf[32] = {};
    ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    KILN_CHECK(e == EWOULDBLOCK, "checkpoint directory '", dir, "': cannot lock ", path_, ": ",
               std::generic_category().message(e));
    KILN_FAIL("checkpoint directory '", dir, "' is in use by another trainer",
              holder.empty() ? std::string() : " (process " + holder + ")", ", which holds ", path_,
              "; wait for it to finish or use another checkpoint directory");
  }
  // Who holds it, for the message above. Best effort: the lock itself is what counts.
  std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, me.data(), me.size(), 0);
  removed_ = io::remove_stale_temp_files(dir);
}

CheckpointLock::~CheckpointLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace kiln
