// kiln::pytorch: torch.save's zip archives ("<archive>/data.pkl", "<archive>/data/<key>", ...),
// read with our zip reader (io/zip_reader.h) and restricted unpickler (io/torch_pickle.h).
#include <algorithm>
#include <cstring>

#include "io/file_util.h"
#include "io/torch_pickle.h"
#include "io/zip_reader.h"
#include "kiln/io.h"
#include "kiln/ops/creation.h"

namespace kiln {

namespace {

// A state_dict's pickle is about 150 bytes per tensor; a larger one is not a state_dict.
constexpr uint64_t kMaxPickleBytes = 64ull << 20;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

StateDict load_archive(const std::shared_ptr<io::ByteSource>& src, const std::string& where) {
  io::ZipReader zip(src, where);
  // Every record sits under one top-level folder, named after the file torch.save wrote ("archive"
  // when it wrote to a buffer).
  std::string prefix;
  bool found = false;
  for (const auto& e : zip.entries()) {
    if (!ends_with(e.name, "data.pkl") || std::count(e.name.begin(), e.name.end(), '/') != 1 ||
        e.name.find('/') + 1 != e.name.size() - 8)
      continue;
    KILN_CHECK(!found, where, ": two pickles in the archive ('", prefix, "data.pkl' and '", e.name, "')");
    prefix = e.name.substr(0, e.name.size() - 8);
    found = true;
  }
  if (!found) {
    bool script = std::any_of(zip.entries().begin(), zip.entries().end(),
                              [](const auto& e) { return ends_with(e.name, "/constants.pkl"); });
    KILN_FAIL(where, ": a zip archive without '<name>/data.pkl': not a torch.save file",
              script ? " (it looks like a TorchScript archive, which holds code; save the state_dict instead)" : "");
  }
  if (const auto* bo = zip.find(prefix + "byteorder")) {
    KILN_CHECK(bo->size <= 16, where, ": the byteorder record is ", bo->size, " bytes");
    std::vector<uint8_t> b = zip.read(*bo);
    std::string order(b.begin(), b.end());
    KILN_CHECK(order == "little", where, ": byteorder is '", order, "'; kiln reads only little-endian archives");
  }
  // Version records (PyTorch's caffe2/serialize/versions.h and torch.serialization): a later
  // torch may lay out its records differently, so a version beyond what kiln knows is refused.
  auto check_version = [&](const std::string& record, int64_t newest) {
    const auto* v = zip.find(prefix + record);
    if (!v) return;
    KILN_CHECK(v->size <= 20, where, ": the ", record, " record is ", v->size, " bytes");
    std::vector<uint8_t> b = zip.read(*v);
    std::string text(b.begin(), b.end());
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    const bool digits = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos && text.size() < 10;
    KILN_CHECK(digits, where, ": the ", record, " record is '", text, "', expected a number");
    const int64_t found_version = std::stoll(text);
    KILN_CHECK(found_version >= 1 && found_version <= newest, where, ": the archive's ", record, " is ", found_version,
               ", but kiln reads versions 1 to ", newest, " (written by a newer torch?)");
  };
  check_version("version", 10);
  check_version(".format_version", 1);
  const auto* pkl = zip.find(prefix + "data.pkl");
  KILN_CHECK(pkl->size <= kMaxPickleBytes, where, ": data.pkl is ", pkl->size, " bytes, more than the ",
             kMaxPickleBytes, " a state_dict needs");
  std::vector<uint8_t> pickle = zip.read(*pkl);

  io::StorageLoader storage = [&](const std::string& key, DType dtype, int64_t numel) {
    const std::string name = prefix + "data/" + key;
    const auto* e = zip.find(name);
    KILN_CHECK(e, where, ": the pickle names storage '", key, "', but the archive has no '", name, "'");
    uint64_t nbytes = 0;
    KILN_CHECK(io::checked_mul(static_cast<uint64_t>(numel), itemsize(dtype), &nbytes) && nbytes == e->size, where,
               ": storage '", key, "' should hold ", numel, " ", dtype_name(dtype), " elements, but '", name, "' has ",
               e->size, " bytes");
    Tensor t = empty({numel}, dtype);
    zip.read(*e, t.data_ptr());
    if (dtype == kBool) {
      const auto* p = static_cast<const uint8_t*>(t.data_ptr());
      size_t bad = io::find_invalid_bool(p, static_cast<size_t>(numel));
      KILN_CHECK(bad == static_cast<size_t>(numel), where, ": bool storage '", key, "' element ", bad, " is ",
                 int(p[bad]), " (must be 0 or 1)");
    }
    return t;
  };
  // Views are copied; four times the file bounds what overlapping views of it may ask for.
  const uint64_t max_copy = 4 * src->size() + (1u << 20);
  return io::unpickle_torch(pickle.data(), pickle.size(), storage, max_copy, where);
}

}  // namespace

namespace pytorch {

StateDict load_file(const std::string& path) {
  const std::string where = "torch file '" + path + "'";
  return load_archive(io::file_source(io::ReadFile::open(path, where)), where);
}

StateDict load(const uint8_t* data, size_t n) {
  const std::string where = "torch bytes";
  KILN_CHECK(data != nullptr || n == 0, where, ": data is null");
  return load_archive(io::memory_source(data, n), where);
}

bool is_torch_file(const std::string& path) {
  auto f = io::ReadFile::open(path, "file '" + path + "'");
  uint8_t magic[4] = {};
  if (f->size() < sizeof magic) return false;
  f->read_at(0, magic, sizeof magic, "file '" + path + "'");
  // torch.save before 1.6 wrote a bare pickle starting with its magic number: PROTO 2, LONG1 of
  // 10 bytes. (Only the first two bytes would also start a safetensors file with a 640-byte
  // header; these four would need a header above safetensors' 100 MB limit.)
  if (magic[0] == 0x80 && magic[1] == 0x02 && magic[2] == 0x8a && magic[3] == 0x0a)
    KILN_FAIL("torch file '", path, "': the legacy torch.save format (PyTorch < 1.6, a bare pickle) is not read; ",
              "re-save it with a newer torch.save");
  return io::is_zip(magic, sizeof magic);
}

}  // namespace pytorch

StateDict read_state_dict(const std::string& path) {
  return pytorch::is_torch_file(path) ? pytorch::load_file(path) : safetensors::load_file(path);
}

}  // namespace kiln
