// safetensors: reading (validated, memory-mapped) and writing (atomic), per the
// format's spec and the layout its reference implementation writes.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <map>
#include <set>

#include "core/tensor_impl.h"
#include "io/file_util.h"
#include "kiln/io.h"
#include "kiln/ops/creation.h"

#ifndef KILN_NO_JSON
#include <nlohmann/json.hpp>
#endif

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; kiln assumes such a host");

namespace kiln {

namespace {

// The reference implementation rejects larger headers; so does kiln.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr int kMaxJsonDepth = 8;  // a valid header nests 3 deep (object, tensor info, shape)

// kiln's dtypes in the order of the reference implementation's Dtype enum (increasing
// alignment): the writer orders tensors by this rank, descending, then by name.
struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kDTypeNames[] = {
    {kBool, "BOOL"},     {kUInt8, "U8"},  {kInt8, "I8"},     {kInt16, "I16"},   {kFloat16, "F16"},
    {kBFloat16, "BF16"}, {kInt32, "I32"}, {kFloat32, "F32"}, {kFloat64, "F64"}, {kInt64, "I64"},
};

int dtype_rank(DType t) {
  for (int i = 0; i < static_cast<int>(std::size(kDTypeNames)); ++i)
    if (kDTypeNames[i].dtype == t) return i;
  KILN_FAIL("safetensors: no name for dtype ", t);
}
[[maybe_unused]] const char* dtype_tag(DType t) { return kDTypeNames[dtype_rank(t)].name; }

// One tensor of a header: data at [begin, end) of the data section.
struct Entry {
  std::string name;
  DType dtype = kFloat32;
  Shape shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct Header {
  std::map<std::string, std::string> metadata;
  std::vector<Entry> entries;  // sorted by name
  uint64_t data_start = 0;     // 8 + header length
};

#ifndef KILN_NO_JSON
using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// In the spec but with no kiln dtype.
constexpr const char* kOtherSpecDTypes[] = {"U16",     "U32", "U64",     "F8_E5M2", "F8_E4M3",
                                            "F8_E8M0", "F4",  "F6_E2M3", "F6_E3M2", "C64"};

// Checks the header text in one SAX pass, before it is parsed into a DOM: duplicate keys
// (which JSON parsers silently merge) and deep nesting are rejected. A pass of its own because
// nlohmann's parser callback rescans the enclosing object at every nested object's end, which is
// quadratic in the number of tensors (20 000 entries took seconds).
class HeaderChecker final : public nlohmann::json_sax<Json> {
 public:
  explicit HeaderChecker(const std::string& where) : where_(where) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return open();
  }
  bool key(string_t& key) override {
    KILN_CHECK(keys_.back().insert(key).second, where_, ": duplicate key '", key, "' in the header");
    return true;
  }
  bool end_object() override {
    keys_.pop_back();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override { return open(); }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    KILN_FAIL(where_, ": the header is not valid JSON: ", e.what());
  }

 private:
  bool open() {
    KILN_CHECK(++depth_ <= kMaxJsonDepth, where_, ": the header nests deeper than ", kMaxJsonDepth, " levels");
    return true;
  }
  const std::string& where_;
  std::vector<std::set<std::string>> keys_;  // one set per open object (ordered: no hash flooding)
  int depth_ = 0;
};

// Parses the header text, checked first by HeaderChecker. Only kiln::Error escapes.
Json parse_json(const char* text, size_t n, const std::string& where) {
  try {
    HeaderChecker checker(where);
    Json::sax_parse(text, text + n, &checker);
    return Json::parse(text, text + n);
  } catch (const Json::exception& e) {
    KILN_FAIL(where, ": the header is not valid JSON: ", e.what());
  }
}

// A JSON value for an error message, cut short.
std::string brief(const Json& v) {
  std::string s = v.dump();
  return s.size() <= 60 ? s : s.substr(0, 57) + "...";
}

// A JSON integer that must be >= 0 and fit in `max`.
uint64_t json_uint(const Json& v, uint64_t max, const std::string& where, const std::string& what) {
  KILN_CHECK(v.is_number_integer(), where, ": ", what, " must be an integer, got ", brief(v));
  KILN_CHECK(v.is_number_unsigned() || v.get<int64_t>() >= 0, where, ": ", what, " must not be negative, got ",
             brief(v));
  uint64_t u = v.is_number_unsigned() ? v.get<uint64_t>() : static_cast<uint64_t>(v.get<int64_t>());
  KILN_CHECK(u <= max, where, ": ", what, " is too large: ", u);
  return u;
}

DType parse_dtype(const Json& v, const std::string& where) {
  KILN_CHECK(v.is_string(), where, ": \"dtype\" must be a string, got ", brief(v));
  const auto& s = v.get_ref<const std::string&>();
  for (const auto& d : kDTypeNames)
    if (s == d.name) return d.dtype;
  for (const char* other : kOtherSpecDTypes)
    KILN_CHECK(s != other, where, ": dtype '", s, "' is not supported by kiln");
  KILN_FAIL(where, ": unknown dtype '", s, "'");
}

Entry parse_entry(const std::string& name, const Json& info, const std::string& file_where) {
  const std::string where = file_where + ": tensor '" + name + "'";
  KILN_CHECK(info.is_object(), where, ": expected an object with \"dtype\", \"shape\" and \"data_offsets\", got ",
             info.type_name());
  // Fields other than these three are ignored, as the reference implementation does.
  for (const char* field : {"dtype", "shape", "data_offsets"})
    KILN_CHECK(info.contains(field), where, ": missing \"", field, "\"");
  Entry e;
  e.name = name;
  e.dtype = parse_dtype(info["dtype"], where);
  const Json& shape = info["shape"];
  KILN_CHECK(shape.is_array(), where, ": \"shape\" must be an array, got ", brief(shape));
  for (const Json& s : shape)
    e.shape.push_back(static_cast<int64_t>(
        json_uint(s, std::numeric_limits<int64_t>::max(), where, "shape entry " + std::to_string(e.shape.size()))));
  const Json& offsets = info["data_offsets"];
  KILN_CHECK(offsets.is_array() && offsets.size() == 2, where, ": \"data_offsets\" must be an array [begin, end], got ",
             brief(offsets));
  e.begin = json_uint(offsets[0], std::numeric_limits<uint64_t>::max(), where, "data_offsets begin");
  e.end = json_uint(offsets[1], std::numeric_limits<uint64_t>::max(), where, "data_offsets end");
  KILN_CHECK(e.begin <= e.end, where, ": data_offsets [", e.begin, ", ", e.end, "] must have begin <= end");
  uint64_t nbytes = itemsize(e.dtype);
  for (int64_t s : e.shape)
    KILN_CHECK(io::checked_mul(nbytes, static_cast<uint64_t>(s), &nbytes), where, ": shape ", shape_str(e.shape),
               " overflows");
  KILN_CHECK(io::shape_fits(e.shape.data(), e.shape.size(), itemsize(e.dtype)), where, ": shape ", shape_str(e.shape),
             " is too large for kiln's 64-bit sizes");
  KILN_CHECK(e.end - e.begin == nbytes, where, ": data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin,
             " bytes but shape ", shape_str(e.shape), " of ", dtype_tag(e.dtype), " needs ", nbytes);
  return e;
}

Header parse_header_json(const char* text, size_t n, const std::string& where) {
  Json j = parse_json(text, n, where);
  KILN_CHECK(j.is_object(), where, ": the header must be a JSON object, got ", j.type_name());
  Header h;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      KILN_CHECK(value.is_object(), where, ": \"__metadata__\" must be an object of strings, got ", value.type_name());
      for (const auto& [mk, mv] : value.items()) {
        KILN_CHECK(mv.is_string(), where, ": \"__metadata__\" value of '", mk, "' must be a string, got ", brief(mv));
        h.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    h.entries.push_back(parse_entry(key, value, where));
  }
  return h;
}

// The header JSON as serde_json writes the reference's: compact, "__metadata__" first (keys
// sorted), then each tensor's {"dtype", "shape", "data_offsets"} in data order.
std::string header_json(const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata) {
  auto check_utf8 = [](const std::string& s, const char* what) {
    try {
      (void)Json(s).dump();
    } catch (const Json::exception&) {
      KILN_FAIL("safetensors: ", what, " '", s, "' is not valid UTF-8 (the header is UTF-8 JSON)");
    }
  };
  OrderedJson j = OrderedJson::object();
  if (!metadata.empty()) {
    OrderedJson m = OrderedJson::object();
    for (const auto& [k, v] : metadata) {
      check_utf8(k, "metadata key");
      check_utf8(v, "metadata value");
      m[k] = v;
    }
    j["__metadata__"] = std::move(m);
  }
  for (const Entry& e : entries) {
    check_utf8(e.name, "tensor name");
    OrderedJson info = OrderedJson::object();
    info["dtype"] = dtype_tag(e.dtype);
    OrderedJson shape = OrderedJson::array();
    for (int64_t s : e.shape) shape.push_back(static_cast<uint64_t>(s));
    info["shape"] = std::move(shape);
    info["data_offsets"] = OrderedJson::array({e.begin, e.end});
    j[e.name] = std::move(info);
  }
  return j.dump();
}
#else
[[noreturn]] void no_json() { KILN_FAIL("kiln was built without nlohmann-json: safetensors is not available"); }
Header parse_header_json(const char*, size_t, const std::string&) { no_json(); }
std::string header_json(const std::vector<Entry>&, const std::map<std::string, std::string>&) { no_json(); }
#endif

// Parses and validates the whole layout of a safetensors buffer of `n` bytes.
Header parse_header(const uint8_t* data, size_t n, const std::string& where) {
#ifdef KILN_NO_JSON
  no_json();
#endif
  KILN_CHECK(n >= 8, where, ": ", n, " bytes is too short for a safetensors file (the header length alone is 8)");
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);
  KILN_CHECK(header_len <= kMaxHeaderBytes, where, ": header length ", header_len, " exceeds the limit of ",
             kMaxHeaderBytes, " bytes");
  KILN_CHECK(header_len <= n - 8, where, ": header length ", header_len, " goes beyond the end of the file (", n,
             " bytes)");
  Header h = parse_header_json(reinterpret_cast<const char*>(data) + 8, header_len, where);
  h.data_start = 8 + header_len;

  // The data section must be covered exactly by the tensors, in offset order.
  std::vector<const Entry*> by_offset;
  for (const Entry& e : h.entries) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t pos = 0;
  for (const Entry* e : by_offset) {
    KILN_CHECK(e->begin <= pos, where, ": tensor '", e->name, "': data_offsets [", e->begin, ", ", e->end,
               "] leave bytes ", pos, "..", e->begin,
               " of the data unused (tensors must cover the data section contiguously)");
    KILN_CHECK(e->begin >= pos, where, ": tensor '", e->name, "': data_offsets [", e->begin, ", ", e->end,
               "] overlap another tensor's data, which ends at ", pos);
    pos = e->end;
  }
  const uint64_t available = n - h.data_start;
  KILN_CHECK(pos <= available, where, ": the file is shorter than its data: the header describes ", pos,
             " bytes of tensor data but only ", available, " follow it");
  KILN_CHECK(pos == available, where, ": ", available - pos,
             " bytes after the last tensor's data (tensors must cover the data section exactly)");
  return h;
}

const Entry& find_entry(const Header& h, const std::string& key, const std::string& where) {
  auto it = std::lower_bound(h.entries.begin(), h.entries.end(), key,
                             [](const Entry& e, const std::string& k) { return e.name < k; });
  KILN_CHECK(it != h.entries.end() && it->name == key, where, ": no tensor named '", key, "'");
  return *it;
}

void check_bools(const Entry& e, const uint8_t* p, const std::string& where) {
  if (e.dtype != kBool) return;
  size_t n = static_cast<size_t>(e.end - e.begin);
  size_t bad = io::find_invalid_bool(p, n);
  KILN_CHECK(bad == n, where, ": tensor '", e.name, "': BOOL element ", bad, " is ", int(p[bad]), " (must be 0 or 1)");
}

// A tensor that copies the entry's bytes.
Tensor copy_entry(const Entry& e, const uint8_t* p) {
  Tensor t = empty(e.shape, e.dtype);
  if (e.end > e.begin) std::memcpy(t.data_ptr(), p, static_cast<size_t>(e.end - e.begin));
  return t;
}

// Tensors in the order the file stores them: by dtype size, then name.
std::vector<Entry> layout(const StateDict& tensors, std::vector<Tensor>& data) {
  std::vector<std::pair<const StateDict::Item*, Tensor>> items;
  for (const auto& item : tensors) {
    const auto& [name, t] = item;
    KILN_CHECK(name != "__metadata__", "safetensors: '__metadata__' is reserved and cannot name a tensor");
    KILN_CHECK(t.defined(), "safetensors: tensor '", name, "' is undefined");
    KILN_CHECK(t.has_storage(), "safetensors: tensor '", name, "' has no data (", t.device(), " device)");
    (void)dtype_rank(t.dtype());
    items.emplace_back(&item, t.detach().to(kCPU).contiguous());
  }
  std::sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    int ra = dtype_rank(a.second.dtype()), rb = dtype_rank(b.second.dtype());
    return ra != rb ? ra > rb : a.first->first < b.first->first;
  });
  std::vector<Entry> entries;
  uint64_t offset = 0;
  for (auto& [item, t] : items) {
    Entry e;
    e.name = item->first;
    e.dtype = t.dtype();
    e.shape = t.sizes().vec();
    e.begin = offset;
    e.end = offset += t.nbytes();
    entries.push_back(std::move(e));
    data.push_back(std::move(t));
  }
  return entries;
}

// The 8-byte length and the JSON, padded with spaces to a multiple of 8 bytes.
std::string header_bytes(const std::vector<Entry>& entries, const std::map<std::string, std::string>& metadata) {
  std::string json = header_json(entries, metadata);
  json.append((8 - json.size() % 8) % 8, ' ');
  uint64_t n = json.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &n, 8);
  return out + json;
}

}  // namespace

namespace safetensors {

// ---- SafeTensorsFile ----

// Note [Copy by default]: tensors are read into memory of their own, so a file rewritten or
// truncated afterwards changes nothing; only with mmap do they alias the file (and may SIGBUS).
struct SafeTensorsFile::Impl {
  std::shared_ptr<io::ReadFile> file;      // without mmap
  std::shared_ptr<io::MappedFile> mapped;  // with mmap
  std::string path;
  Header header;
  std::string where;
};

namespace {

// The header of an open file, read with pread: the 8-byte length, then that many bytes.
Header read_header(const io::ReadFile& f, const std::string& where) {
  const uint64_t size = f.size();
  std::vector<uint8_t> prefix(std::min<uint64_t>(size, 8));
  f.read_at(0, prefix.data(), prefix.size(), where);
  if (prefix.size() == 8) {
    uint64_t header_len = 0;
    std::memcpy(&header_len, prefix.data(), 8);
    // Otherwise parse_header reports the bad length without reading past the first 8 bytes.
    if (header_len <= kMaxHeaderBytes && header_len <= size - 8) {
      prefix.resize(8 + header_len);
      f.read_at(8, prefix.data() + 8, header_len, where);
    }
  }
  // parse_header reads only the header's bytes; `size` bounds the data it describes.
  return parse_header(prefix.data(), size, where);
}

}  // namespace

SafeTensorsFile::SafeTensorsFile(const std::string& path, bool mmap) {
#ifdef KILN_NO_JSON
  no_json();
#endif
  auto impl = std::make_shared<Impl>();
  impl->where = "safetensors file '" + path + "'";
  impl->path = path;
  if (mmap) {
    impl->mapped = io::MappedFile::open(path, impl->where);
    impl->header = parse_header(impl->mapped->data(), impl->mapped->size(), impl->where);
  } else {
    impl->file = io::ReadFile::open(path, impl->where);
    impl->header = read_header(*impl->file, impl->where);
  }
  std::sort(impl->header.entries.begin(), impl->header.entries.end(),
            [](const Entry& a, const Entry& b) { return a.name < b.name; });
  impl_ = std::move(impl);
}

const std::string& SafeTensorsFile::path() const { return impl_->path; }

std::vector<std::string> SafeTensorsFile::keys() const {
  std::vector<std::string> out;
  for (const Entry& e : impl_->header.entries) out.push_back(e.name);
  return out;
}

bool SafeTensorsFile::contains(const std::string& key) const {
  const auto& es = impl_->header.entries;
  auto it =
      std::lower_bound(es.begin(), es.end(), key, [](const Entry& e, const std::string& k) { return e.name < k; });
  return it != es.end() && it->name == key;
}

const std::map<std::string, std::string>& SafeTensorsFile::metadata() const { return impl_->header.metadata; }

DType SafeTensorsFile::dtype(const std::string& key) const {
  return find_entry(impl_->header, key, impl_->where).dtype;
}

std::vector<int64_t> SafeTensorsFile::shape(const std::string& key) const {
  return find_entry(impl_->header, key, impl_->where).shape;
}

Tensor SafeTensorsFile::get(const std::string& key) const {
  const Entry& e = find_entry(impl_->header, key, impl_->where);
  if (!impl_->mapped) {
    Tensor t = empty(e.shape, e.dtype);
    impl_->file->read_at(impl_->header.data_start + e.begin, t.data_ptr(), static_cast<size_t>(e.end - e.begin),
                         impl_->where + ": tensor '" + e.name + "'");
    check_bools(e, static_cast<const uint8_t*>(t.data_ptr()), impl_->where);
    return t;
  }
  uint8_t* p = impl_->mapped->data() + impl_->header.data_start + e.begin;
  check_bools(e, p, impl_->where);
  // Files from other writers may misalign a tensor; kernels expect aligned elements, so copy those.
  if (reinterpret_cast<uintptr_t>(p) % itemsize(e.dtype) != 0) return copy_entry(e, p);
  std::shared_ptr<io::MappedFile> keep = impl_->mapped;
  return from_blob(p, e.shape, e.dtype, [keep](void*) {});
}

// ---- whole-file functions ----

StateDict load_file(const std::string& path, Device device, bool mmap) {
  SafeTensorsFile f(path, mmap);
  StateDict out;
  for (const std::string& key : f.keys()) {
    Tensor t = f.get(key);
    out.insert(key, device == kCPU ? t : t.to(device));
  }
  return out;
}

StateDict load(const uint8_t* data, size_t n) {
  const std::string where = "safetensors bytes";
  KILN_CHECK(data != nullptr || n == 0, where, ": data is null");
  Header h = parse_header(data, n, where);
  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) { return a.name < b.name; });
  StateDict out;
  for (const Entry& e : h.entries) {
    const uint8_t* p = data + h.data_start + e.begin;
    check_bools(e, p, where);
    out.insert(e.name, copy_entry(e, p));
  }
  return out;
}

std::vector<uint8_t> save(const StateDict& tensors, const std::map<std::string, std::string>& metadata) {
  std::vector<Tensor> data;
  std::vector<Entry> entries = layout(tensors, data);
  std::string header = header_bytes(entries, metadata);
  std::vector<uint8_t> out(header.begin(), header.end());
  out.reserve(header.size() + (entries.empty() ? 0 : entries.back().end));
  for (const Tensor& t : data) {
    const auto* p = static_cast<const uint8_t*>(t.data_ptr());
    out.insert(out.end(), p, p + t.nbytes());
  }
  return out;
}

void save_file(const StateDict& tensors, const std::string& path, const std::map<std::string, std::string>& metadata) {
  // Everything that can fail on the input fails here, before a file is created.
  std::vector<Tensor> data;
  std::vector<Entry> entries = layout(tensors, data);
  std::string header = header_bytes(entries, metadata);
  io::write_file_atomic(path, "save_file", [&](io::ByteSink& sink) {
    sink.write(header.data(), header.size());
    for (const Tensor& t : data)
      if (t.nbytes() > 0) sink.write(t.data_ptr(), t.nbytes());
  });
}

}  // namespace safetensors
}  // namespace kiln
