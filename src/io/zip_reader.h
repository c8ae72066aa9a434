// A minimal zip reader for torch.save's archives: the central directory (with ZIP64), and the
// bytes of stored (uncompressed) entries, CRC-checked. Every offset and size read from the
// file is checked against the file's size before it is used (Note [Zip bounds]).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/file_util.h"

namespace kiln::io {

// Bytes to read from: a file (pread, so nothing is mapped) or a buffer in memory.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads [offset, offset + n); throws a kiln::Error naming `what` when that is not within size().
  virtual void read(uint64_t offset, void* dst, size_t n, const std::string& what) const = 0;
};

std::shared_ptr<ByteSource> memory_source(const uint8_t* data, size_t n);
std::shared_ptr<ByteSource> file_source(std::shared_ptr<ReadFile> file);

class ZipReader {
 public:
  struct Entry {
    std::string name;
    uint16_t method = 0;  // 0: stored
    uint16_t flags = 0;
    uint32_t crc = 0;
    uint64_t size = 0;         // compressed size (= the bytes in the file)
    uint64_t data_offset = 0;  // of its bytes, past the local header
  };

  // Reads and checks the central directory; `where` starts every error ("file 'x.pt'").
  ZipReader(std::shared_ptr<const ByteSource> src, std::string where);

  const std::vector<Entry>& entries() const { return entries_; }  // in central-directory order
  const Entry* find(const std::string& name) const;
  // Reads a stored entry's `e.size` bytes into `dst` and checks their CRC-32.
  void read(const Entry& e, void* dst) const;
  std::vector<uint8_t> read(const Entry& e) const;

 private:
  std::shared_ptr<const ByteSource> src_;
  std::string where_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
};

// Whether `data` starts as a zip archive does (a local file header or an empty archive's end record).
bool is_zip(const uint8_t* data, size_t n);

}  // namespace kiln::io
