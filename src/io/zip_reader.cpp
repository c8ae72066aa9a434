// Zip archives as torch.save writes them (PyTorchStreamWriter, on miniz): stored entries,
// ZIP64 records when the archive or an entry passes 4 GiB, names "<archive>/data.pkl", ...
//
// Note [Zip bounds]
// A zip file is a set of offsets into itself. Each one read here (the end records, the central
// directory, each local header and entry) is checked to lie within the file before it is read,
// with overflow-checked arithmetic, and every read goes through ByteSource::read, which checks
// again. The memory used is the central directory's size (at most the file's) plus an entry
// when one is read; nothing is sized by a count the file states without that check.
#include "io/zip_reader.h"

#include <algorithm>
#include <cstring>

#include "kiln/error.h"

namespace kiln::io {

namespace {

class MemorySource final : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t n) : data_(data), n_(n) {}
  uint64_t size() const override { return n_; }
  void read(uint64_t offset, void* dst, size_t n, const std::string& what) const override {
    KILN_CHECK(offset <= n_ && n <= n_ - offset, what, ": bytes ", offset, "..", offset + n,
               " are past the end of the data (", n_, " bytes)");
    if (n) std::memcpy(dst, data_ + offset, n);
  }

 private:
  const uint8_t* data_;
  size_t n_;
};

class FileSource final : public ByteSource {
 public:
  explicit FileSource(std::shared_ptr<ReadFile> f) : f_(std::move(f)) {}
  uint64_t size() const override { return f_->size(); }
  void read(uint64_t offset, void* dst, size_t n, const std::string& what) const override {
    KILN_CHECK(offset <= f_->size() && n <= f_->size() - offset, what, ": bytes ", offset, "..", offset + n,
               " are past the end of the file (", f_->size(), " bytes)");
    f_->read_at(offset, dst, n, what);
  }

 private:
  std::shared_ptr<ReadFile> f_;
};

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }
uint32_t u32(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint64_t u64(const uint8_t* p) { return uint64_t(u32(p)) | uint64_t(u32(p + 4)) << 32; }

constexpr uint32_t kLocalSig = 0x04034b50, kCentralSig = 0x02014b50, kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50, kEnd64LocatorSig = 0x07064b50;
constexpr size_t kEndSize = 22, kEnd64Size = 56, kLocatorSize = 20, kCentralSize = 46, kLocalSize = 30;

}  // namespace

std::shared_ptr<ByteSource> memory_source(const uint8_t* data, size_t n) {
  return std::make_shared<MemorySource>(data, n);
}
std::shared_ptr<ByteSource> file_source(std::shared_ptr<ReadFile> file) {
  return std::make_shared<FileSource>(std::move(file));
}

bool is_zip(const uint8_t* data, size_t n) { return n >= 4 && (u32(data) == kLocalSig || u32(data) == kEndSig); }

ZipReader::ZipReader(std::shared_ptr<const ByteSource> src, std::string where)
    : src_(std::move(src)), where_(std::move(where)) {
  const uint64_t size = src_->size();
  KILN_CHECK(size >= kEndSize, where_, ": ", size, " bytes is too short for a zip archive");
  // The end record is the last 22 bytes plus a comment of up to 65535: search back for it.
  const uint64_t tail_len = std::min<uint64_t>(size, kEndSize + 0xFFFF);
  std::vector<uint8_t> tail(tail_len);
  src_->read(size - tail_len, tail.data(), tail.size(), where_);
  int64_t at = -1;
  for (int64_t i = static_cast<int64_t>(tail_len - kEndSize); i >= 0; --i)
    if (u32(&tail[i]) == kEndSig && i + kEndSize + u16(&tail[i + 20]) == tail_len) {
      at = i;
      break;
    }
  KILN_CHECK(at >= 0, where_, ": no zip end-of-central-directory record (not a zip archive, or truncated)");
  const uint8_t* end = &tail[at];
  const uint64_t end_pos = size - tail_len + static_cast<uint64_t>(at);
  KILN_CHECK(u16(end + 4) == 0 && u16(end + 6) == 0, where_, ": multi-disk zip archives are not supported");
  uint64_t count = u16(end + 10), cd_size = u32(end + 12), cd_offset = u32(end + 16);
  if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    // ZIP64: a locator just before the end record points at the ZIP64 end record.
    KILN_CHECK(end_pos >= kLocatorSize, where_, ": ZIP64 sizes but no ZIP64 end-record locator");
    uint8_t loc[kLocatorSize];
    src_->read(end_pos - kLocatorSize, loc, sizeof loc, where_ + ": ZIP64 locator");
    KILN_CHECK(u32(loc) == kEnd64LocatorSig, where_, ": ZIP64 sizes but no ZIP64 end-record locator");
    const uint64_t end64_pos = u64(loc + 8);
    KILN_CHECK(end64_pos <= size && kEnd64Size <= size - end64_pos, where_, ": the ZIP64 end record at byte ",
               end64_pos, " is past the end of the file");
    uint8_t e64[kEnd64Size];
    src_->read(end64_pos, e64, sizeof e64, where_ + ": ZIP64 end record");
    KILN_CHECK(u32(e64) == kEnd64Sig, where_, ": bad ZIP64 end-record signature at byte ", end64_pos);
    count = u64(e64 + 32);
    cd_size = u64(e64 + 40);
    cd_offset = u64(e64 + 48);
  }
  KILN_CHECK(cd_offset <= size && cd_size <= size - cd_offset, where_, ": the central directory (", cd_size,
             " bytes at byte ", cd_offset, ") is past the end of the file (", size, " bytes)");
  KILN_CHECK(count <= cd_size / kCentralSize, where_, ": ", count, " entries cannot fit in a central directory of ",
             cd_size, " bytes");
  std::vector<uint8_t> cd(static_cast<size_t>(cd_size));
  src_->read(cd_offset, cd.data(), cd.size(), where_ + ": central directory");

  size_t pos = 0;
  entries_.reserve(static_cast<size_t>(count));
  for (uint64_t i = 0; i < count; ++i) {
    const std::string what = where_ + ": zip entry " + std::to_string(i);
    KILN_CHECK(cd.size() - pos >= kCentralSize && u32(&cd[pos]) == kCentralSig, what, ": bad central-directory record");
    const uint8_t* h = &cd[pos];
    Entry e;
    e.flags = u16(h + 8);
    e.method = u16(h + 10);
    e.crc = u32(h + 16);
    uint64_t csize = u32(h + 20), usize = u32(h + 24), local = u32(h + 42);
    const size_t name_len = u16(h + 28), extra_len = u16(h + 30), comment_len = u16(h + 32);
    KILN_CHECK(cd.size() - pos - kCentralSize >= name_len + extra_len + comment_len, what,
               ": the record's name and fields run past the central directory");
    e.name.assign(reinterpret_cast<const char*>(h + kCentralSize), name_len);
    // ZIP64 extra field (id 1): the 64-bit values of the fields saturated above, in this order.
    const uint8_t* x = h + kCentralSize + name_len;
    for (size_t xp = 0; xp + 4 <= extra_len;) {
      const uint16_t id = u16(x + xp), len = u16(x + xp + 2);
      KILN_CHECK(xp + 4 + len <= extra_len, what, " ('", e.name, "'): an extra field runs past its record");
      if (id == 1) {
        size_t fp = xp + 4;
        auto take = [&](uint64_t& v) {
          if (v != 0xFFFFFFFF) return;
          KILN_CHECK(fp + 8 <= xp + 4 + len, what, " ('", e.name, "'): ZIP64 field too short");
          v = u64(x + fp);
          fp += 8;
        };
        take(usize);
        take(csize);
        take(local);
      }
      xp += 4 + static_cast<size_t>(len);
    }
    pos += kCentralSize + name_len + extra_len + comment_len;
    KILN_CHECK(e.method != 0 || csize == usize, what, " ('", e.name, "'): stored entry of ", csize,
               " bytes claims to hold ", usize);
    e.size = csize;
    // The data follows the local header, whose name and extra lengths may differ from the central ones.
    KILN_CHECK(local <= size && kLocalSize <= size - local, what, " ('", e.name, "'): local header at byte ", local,
               " is past the end of the file");
    uint8_t lh[kLocalSize];
    src_->read(local, lh, sizeof lh, what);
    KILN_CHECK(u32(lh) == kLocalSig, what, " ('", e.name, "'): bad local-header signature at byte ", local);
    e.data_offset = local + kLocalSize + u16(lh + 26) + u16(lh + 28);
    KILN_CHECK(e.data_offset <= size && e.size <= size - e.data_offset, what, " ('", e.name, "'): its ", e.size,
               " bytes at byte ", e.data_offset, " run past the end of the file (", size, " bytes)");
    KILN_CHECK(index_.emplace(e.name, entries_.size()).second, where_, ": zip entry '", e.name, "' appears twice");
    entries_.push_back(std::move(e));
  }
}

const ZipReader::Entry* ZipReader::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void ZipReader::read(const Entry& e, void* dst) const {
  const std::string what = where_ + ": zip entry '" + e.name + "'";
  KILN_CHECK(!(e.flags & 1), what, " is encrypted");
  KILN_CHECK(e.method == 0, what, " is compressed (method ", e.method,
             "); only stored entries, as torch.save writes them, are read");
  src_->read(e.data_offset, dst, static_cast<size_t>(e.size), what);
  uint32_t crc = crc32(dst, static_cast<size_t>(e.size));
  KILN_CHECK(crc == e.crc, what, ": CRC-32 ", crc, " does not match the archive's ", e.crc, " (corrupt file)");
}

std::vector<uint8_t> ZipReader::read(const Entry& e) const {
  std::vector<uint8_t> out(static_cast<size_t>(e.size));
  read(e, out.data());
  return out;
}

}  // namespace kiln::io
