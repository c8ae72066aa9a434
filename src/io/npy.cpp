// NumPy's .npy format: a magic string, a version, a header length, a Python
// dict literal {'descr': ..., 'fortran_order': ..., 'shape': (...)} padded with
// spaces and a newline, then the raw elements.
#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <vector>

#include "core/tensor_impl.h"
#include "io/file_util.h"
#include "kiln/io.h"
#include "kiln/ops/creation.h"
#include "kiln/ops/shape.h"

static_assert(std::endian::native == std::endian::little, "kiln writes little-endian .npy data as its own");

namespace kiln {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;         // numpy pads the header so the data starts 64-byte aligned
constexpr size_t kGrowthDigits = 21;  // numpy leaves room to grow the first dim's size in place
constexpr size_t kMaxDims = 64;       // numpy's own limit

struct NpyDType {
  DType dtype;
  const char* descr;  // as numpy writes it on a little-endian host
};
constexpr NpyDType kNpyDTypes[] = {
    {kBool, "|b1"},  {kUInt8, "|u1"},   {kInt8, "|i1"},    {kInt16, "<i2"},   {kInt32, "<i4"},
    {kInt64, "<i8"}, {kFloat16, "<f2"}, {kFloat32, "<f4"}, {kFloat64, "<f8"},
};

struct NpyHeader {
  DType dtype = kFloat32;
  bool big_endian = false;
  bool fortran_order = false;
  Shape shape;
};

// The dtype for a descr such as '<f4', '>i8', '|b1' or '?'. Sets *big_endian.
DType parse_descr(const std::string& d, bool* big_endian, const std::string& where) {
  std::string_view s = d;
  char order = '=';
  if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
    order = s[0];
    s.remove_prefix(1);
  }
  *big_endian = order == '>';
  if (s == "?") return kBool;
  KILN_CHECK(!s.empty(), where, ": descr '", d, "' names no type");
  const char kind = s[0];
  KILN_CHECK(kind != 'O', where, ": descr '", d,
             "' is an object array (pickled Python objects), which kiln does not load");
  std::string_view digits = s.substr(1);
  bool digits_ok = !digits.empty() && digits.size() <= 2;
  int size = 0;
  for (size_t i = 0; digits_ok && i < digits.size(); ++i) {
    digits_ok = digits[i] >= '0' && digits[i] <= '9';
    size = size * 10 + (digits[i] - '0');
  }
  KILN_CHECK(digits_ok, where, ": descr '", d, "' is not a type kiln knows (expected e.g. '<f4', '<i8', '|b1')");
  std::optional<DType> t;
  switch (kind) {
    case 'b':
      t = size == 1 ? std::optional(kBool) : std::nullopt;
      break;
    case 'u':
      t = size == 1 ? std::optional(kUInt8) : std::nullopt;
      break;
    case 'i':
      t = size == 1   ? std::optional(kInt8)
          : size == 2 ? std::optional(kInt16)
          : size == 4 ? std::optional(kInt32)
          : size == 8 ? std::optional(kInt64)
                      : std::nullopt;
      break;
    case 'f':
      t = size == 2   ? std::optional(kFloat16)
          : size == 4 ? std::optional(kFloat32)
          : size == 8 ? std::optional(kFloat64)
                      : std::nullopt;
      break;
    default:
      break;
  }
  KILN_CHECK(t.has_value(), where, ": dtype '", d, "' is not supported by kiln");
  return *t;
}

// A recursive-descent parser for the header's dict literal: exactly the keys 'descr' (a
// string), 'fortran_order' (True/False) and 'shape' (a tuple of non-negative ints).
class HeaderParser {
 public:
  HeaderParser(std::string_view text, bool allow_long_suffix, const std::string& where)
      : s_(text), allow_long_(allow_long_suffix), where_(where) {}

  NpyHeader parse() {
    NpyHeader h;
    bool seen_descr = false, seen_fortran = false, seen_shape = false;
    std::string descr;
    skip_ws();
    expect('{');
    for (;;) {
      skip_ws();
      if (peek() == '}') break;
      std::string key = parse_string("a key");
      skip_ws();
      expect(':');
      skip_ws();
      if (key == "descr") {
        KILN_CHECK(!seen_descr, where_, ": the header repeats 'descr'");
        seen_descr = true;
        KILN_CHECK(peek() != '[', where_, ": structured dtypes (a list as 'descr') are not supported");
        descr = parse_string("'descr'");
      } else if (key == "fortran_order") {
        KILN_CHECK(!seen_fortran, where_, ": the header repeats 'fortran_order'");
        seen_fortran = true;
        h.fortran_order = parse_bool();
      } else if (key == "shape") {
        KILN_CHECK(!seen_shape, where_, ": the header repeats 'shape'");
        seen_shape = true;
        h.shape = parse_shape();
      } else {
        KILN_FAIL(where_, ": unexpected key '", key, "' in the header (expected 'descr', 'fortran_order', 'shape')");
      }
      skip_ws();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_ws();
      KILN_CHECK(peek() == '}', where_, ": expected ',' or '}' at byte ", pos_, " of the header");
      break;
    }
    expect('}');
    skip_ws();
    KILN_CHECK(pos_ == s_.size(), where_, ": unexpected text after the header's dict at byte ", pos_);
    KILN_CHECK(seen_descr && seen_fortran && seen_shape, where_,
               ": the header must have the keys 'descr', 'fortran_order' and 'shape'");
    h.dtype = parse_descr(descr, &h.big_endian, where_);
    return h;
  }

 private:
  int peek() const { return pos_ < s_.size() ? static_cast<unsigned char>(s_[pos_]) : -1; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    KILN_CHECK(peek() == c, where_, ": expected '", c, "' at byte ", pos_, " of the header");
    ++pos_;
  }
  std::string parse_string(const char* what) {
    int q = peek();
    KILN_CHECK(q == '\'' || q == '"', where_, ": expected a quoted string for ", what, " at byte ", pos_,
               " of the header");
    size_t start = ++pos_;
    while (pos_ < s_.size() && s_[pos_] != q) {
      char c = s_[pos_];
      KILN_CHECK(c != '\\' && c != '\n', where_, ": unsupported character in a string of the header at byte ", pos_);
      ++pos_;
    }
    KILN_CHECK(pos_ < s_.size(), where_, ": unterminated string in the header");
    return std::string(s_.substr(start, pos_++ - start));
  }
  bool parse_bool() {
    for (auto [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      std::string_view w(word);
      if (s_.substr(pos_, w.size()) == w) {
        pos_ += w.size();
        return value;
      }
    }
    KILN_FAIL(where_, ": 'fortran_order' must be True or False (at byte ", pos_, " of the header)");
  }
  int64_t parse_int() {
    size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      KILN_CHECK(io::checked_mul(v, 10, &v) && io::checked_add(v, static_cast<uint64_t>(s_[pos_] - '0'), &v) &&
                     v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                 where_, ": a shape entry is too large (at byte ", start, " of the header)");
      ++pos_;
    }
    KILN_CHECK(pos_ > start, where_, ": 'shape' entries must be non-negative integers (at byte ", start,
               " of the header)");
    KILN_CHECK(pos_ - start == 1 || s_[start] != '0', where_, ": a shape entry has a leading zero (at byte ", start,
               " of the header)");
    // Python 2 wrote longs as 3L; numpy still reads those in version 1.0 and 2.0 files.
    if (allow_long_ && (peek() == 'L' || peek() == 'l')) ++pos_;
    return static_cast<int64_t>(v);
  }
  Shape parse_shape() {
    KILN_CHECK(peek() == '(', where_, ": 'shape' must be a tuple (at byte ", pos_, " of the header)");
    ++pos_;
    Shape shape;
    bool trailing_comma = false;
    for (;;) {
      skip_ws();
      if (peek() == ')') break;
      KILN_CHECK(shape.size() < kMaxDims, where_, ": 'shape' has more than ", kMaxDims, " dimensions");
      shape.push_back(parse_int());
      skip_ws();
      trailing_comma = peek() == ',';
      if (!trailing_comma) break;
      ++pos_;
    }
    skip_ws();
    expect(')');
    // "(3)" is the int 3 in Python, not a tuple.
    KILN_CHECK(shape.size() != 1 || trailing_comma, where_, ": 'shape' (", shape[0],
               ") is not a tuple (a 1-tuple needs a trailing comma)");
    return shape;
  }

  std::string_view s_;
  size_t pos_ = 0;
  bool allow_long_;
  const std::string& where_;
};

template <size_t N>
void byteswap_all(uint8_t* p, size_t count) {
  for (size_t i = 0; i < count; ++i, p += N)
    for (size_t a = 0, b = N - 1; a < b; ++a, --b) std::swap(p[a], p[b]);
}

// Where the elements are and what they are. `data` holds the file's first `n` bytes, at least
// its magic, version, header length and header (or all of it when shorter); `total` is its size.
struct NpyLayout {
  NpyHeader h;
  size_t item = 0;
  uint64_t nbytes = 0, offset = 0;
};

NpyLayout parse_npy_header(const uint8_t* data, size_t n, uint64_t total, const std::string& where) {
  KILN_CHECK(data != nullptr || n == 0, where, ": data is null");
  KILN_CHECK(n >= kMagicLen + 2 && std::memcmp(data, kMagic, kMagicLen) == 0, where,
             ": not a .npy file (it must start with \"\\x93NUMPY\")");
  const int major = data[6], minor = data[7];
  KILN_CHECK((major == 1 || major == 2 || major == 3) && minor == 0, where, ": unsupported .npy format version ", major,
             ".", minor, " (kiln reads 1.0, 2.0 and 3.0)");
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicLen + 2 + len_bytes;
  KILN_CHECK(n >= prefix, where, ": truncated before the header length");
  uint64_t header_len = data[8] | (uint64_t(data[9]) << 8);
  if (len_bytes == 4) header_len |= (uint64_t(data[10]) << 16) | (uint64_t(data[11]) << 24);
  KILN_CHECK(header_len <= total - prefix, where, ": header length ", header_len,
             " goes beyond the end of the data (", total, " bytes)");
  KILN_CHECK(header_len <= n - prefix, where, ": the header was not read in full");
  std::string_view text(reinterpret_cast<const char*>(data) + prefix, header_len);
  for (size_t i = 0; i < text.size(); ++i)
    KILN_CHECK(static_cast<unsigned char>(text[i]) < 0x80 &&
                   (text[i] >= ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'),
               where, ": unexpected byte 0x", std::hex, int(static_cast<unsigned char>(text[i])), std::dec, " at byte ",
               i, " of the header");
  NpyLayout l;
  l.h = HeaderParser(text, major < 3, where).parse();
  const NpyHeader& h = l.h;

  l.item = itemsize(h.dtype);
  l.nbytes = l.item;
  for (int64_t s : h.shape)
    KILN_CHECK(io::checked_mul(l.nbytes, static_cast<uint64_t>(s), &l.nbytes), where, ": shape ", shape_str(h.shape),
               " overflows");
  KILN_CHECK(io::shape_fits(h.shape.data(), h.shape.size(), l.item), where, ": shape ", shape_str(h.shape),
             " is too large for kiln's 64-bit sizes");
  l.offset = prefix + header_len;
  const uint64_t available = total - l.offset;
  KILN_CHECK(l.nbytes <= available, where, ": truncated: shape ", shape_str(h.shape), " of ", h.dtype, " needs ",
             l.nbytes, " bytes of data but only ", available, " follow the header");
  return l;
}

// The tensor of `l`; `fill` writes its `l.nbytes` stored bytes into the destination.
template <class Fill>
Tensor read_npy_data(const NpyLayout& l, Fill&& fill, const std::string& where) {
  const NpyHeader& h = l.h;
  const size_t item = l.item, nbytes = static_cast<size_t>(l.nbytes);
  // Fortran order stores the transpose's C-order bytes: read those, then transpose back.
  Shape stored = h.shape;
  const bool transpose = h.fortran_order && h.shape.size() > 1;
  if (transpose) std::reverse(stored.begin(), stored.end());
  Tensor t = empty(stored, h.dtype);
  auto* dst = static_cast<uint8_t*>(t.data_ptr());
  if (nbytes > 0) fill(dst);
  if (h.dtype == kBool) {
    size_t bad = io::find_invalid_bool(dst, nbytes);
    KILN_CHECK(bad == nbytes, where, ": bool element ", bad, " is ", int(dst[bad]), " (must be 0 or 1)");
  }
  if (h.big_endian && item > 1) {
    const size_t count = nbytes / item;
    switch (item) {
      case 2:
        byteswap_all<2>(dst, count);
        break;
      case 4:
        byteswap_all<4>(dst, count);
        break;
      default:
        byteswap_all<8>(dst, count);
        break;
    }
  }
  if (!transpose) return t;
  std::vector<int64_t> dims(h.shape.size());
  for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(dims.size() - 1 - i);
  return t.permute(dims).contiguous();
}

Tensor parse_npy(const uint8_t* data, size_t n, const std::string& where) {
  NpyLayout l = parse_npy_header(data, n, n, where);
  return read_npy_data(
      l, [&](uint8_t* dst) { std::memcpy(dst, data + l.offset, static_cast<size_t>(l.nbytes)); }, where);
}

const char* npy_descr(DType t) {
  for (const auto& d : kNpyDTypes)
    if (d.dtype == t) return d.descr;
  KILN_FAIL("save_npy: .npy has no ", t, " type (numpy lacks it); convert first, e.g. with .to(kFloat32)");
}

// The header numpy.save writes: the sorted dict literal, room for the first dim to grow,
// padded so magic + length + header end on a 64-byte boundary, closed by '\n'.
std::string npy_prefix(const Tensor& t) {
  std::string dict = "{'descr': '";
  dict += npy_descr(t.dtype());
  dict += "', 'fortran_order': False, 'shape': (";
  for (int64_t i = 0; i < t.dim(); ++i) {
    if (i > 0) dict += ", ";
    dict += std::to_string(t.size(i).expect_int());
  }
  if (t.dim() == 1) dict += ",";
  dict += "), }";
  if (t.dim() > 0) dict.append(kGrowthDigits - std::to_string(t.size(0).expect_int()).size(), ' ');
  for (int major : {1, 2}) {
    const size_t len_bytes = major == 1 ? 2 : 4;
    const size_t hlen = dict.size() + 1;  // + '\n'
    const size_t pad = kAlign - (kMagicLen + 2 + len_bytes + hlen) % kAlign;
    const uint64_t total = hlen + pad;
    if (major == 1 && total > 0xFFFF) continue;
    KILN_CHECK(total <= 0xFFFFFFFFull, "save_npy: the header is too long (", total, " bytes)");
    std::string out(kMagic, kMagicLen);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t b = 0; b < len_bytes; ++b) out += static_cast<char>((total >> (8 * b)) & 0xFF);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    return out;
  }
  KILN_FAIL("save_npy: unreachable");
}

Tensor npy_data(const Tensor& x) {
  KILN_CHECK(x.defined(), "save_npy: the tensor is undefined");
  KILN_CHECK(x.has_storage(), "save_npy: the tensor has no data (", x.device(), " device)");
  (void)npy_descr(x.dtype());
  KILN_CHECK(x.dim() <= static_cast<int64_t>(kMaxDims), "save_npy: numpy arrays have at most ", kMaxDims,
             " dimensions, got ", x.dim());
  return x.detach().to(kCPU).contiguous();
}

}  // namespace

void save_npy(const Tensor& x, const std::string& path) {
  Tensor t = npy_data(x);
  std::string prefix = npy_prefix(t);
  io::write_file_atomic(path, "save_npy", [&](io::ByteSink& sink) {
    sink.write(prefix.data(), prefix.size());
    if (t.nbytes() > 0) sink.write(t.data_ptr(), t.nbytes());
  });
}

std::vector<uint8_t> save_npy(const Tensor& x) {
  Tensor t = npy_data(x);
  std::string prefix = npy_prefix(t);
  std::vector<uint8_t> out(prefix.begin(), prefix.end());
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  out.insert(out.end(), p, p + t.nbytes());
  return out;
}

Tensor load_npy(const std::string& path) {
  const std::string where = "npy file '" + path + "'";
  // Read with pread, never mapped (Note [Copy by default]): a file truncated while it is read
  // gives an error, not SIGBUS, and the tensor owns its memory.
  auto file = io::ReadFile::open(path, where);
  const uint64_t total = file->size();
  std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(total, kMagicLen + 2 + 4)));
  file->read_at(0, head.data(), head.size(), where);
  if (head.size() >= kMagicLen + 4 && std::memcmp(head.data(), kMagic, kMagicLen) == 0) {
    // The header length, when the prefix is one: read the header too (at most the whole file).
    const bool v1 = head[6] == 1;
    uint64_t len = head[8] | (uint64_t(head[9]) << 8);
    if (!v1 && head.size() >= 12) len |= (uint64_t(head[10]) << 16) | (uint64_t(head[11]) << 24);
    const uint64_t want = std::min<uint64_t>(total, (v1 ? 10 : 12) + len);
    if (want > head.size()) {
      head.resize(static_cast<size_t>(want));
      file->read_at(0, head.data(), head.size(), where);
    }
  }
  NpyLayout l = parse_npy_header(head.data(), head.size(), total, where);
  return read_npy_data(
      l, [&](uint8_t* dst) { file->read_at(l.offset, dst, static_cast<size_t>(l.nbytes), where); }, where);
}

Tensor load_npy(const uint8_t* data, size_t n) { return parse_npy(data, n, "npy bytes"); }

}  // namespace kiln
