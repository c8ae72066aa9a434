// File helpers shared by the readers and writers of src/io: reading a regular file (by
// copy, or zero-copy through mmap), and atomic writes (temp file + fsync + rename).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kiln::io {

// A regular file open for reading. Note [Regular files only]: a FIFO, device, socket or
// directory is refused before any byte is read, and opening never blocks (a FIFO without a
// writer would block open() and read() forever).
class ReadFile {
 public:
  // Throws a kiln::Error starting with `where` (e.g. "npy file 'x.npy'") when the file cannot
  // be opened or is not a regular file.
  static std::shared_ptr<ReadFile> open(const std::string& path, const std::string& where);
  ~ReadFile();
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // when opened
  const std::string& path() const { return path_; }
  // Reads exactly `n` bytes at `offset` into `dst`; throws (naming `what`) when the file has
  // become shorter since it was opened or cannot be read.
  void read_at(uint64_t offset, void* dst, size_t n, const std::string& what) const;

 private:
  ReadFile(int fd, uint64_t size, std::string path) : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_;
  uint64_t size_;
  std::string path_;
};

// A private (copy-on-write) mapping of a whole file: tensors that alias it may
// be written to without touching the file. Unmapped by the destructor. As with any mapping,
// truncating the file while it is mapped makes reads of the lost pages raise SIGBUS.
class MappedFile {
 public:
  // Throws a kiln::Error starting with `where` when the file cannot be opened (see
  // ReadFile::open) or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path, const std::string& where);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile(uint8_t* data, size_t size, std::string path) : data_(data), size_(size), path_(std::move(path)) {}
  uint8_t* data_;  // null for an empty file (mmap cannot map 0 bytes)
  size_t size_;
  std::string path_;
};

// Receives the bytes of a file being written.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, size_t n) = 0;
};

// Writes `path` atomically: `body` writes into a temp file in the same directory,
// which is fsynced and renamed over `path`. On any failure the temp file is
// removed, `path` is left as it was, and the error (a kiln::Error naming `op`) propagates.
void write_file_atomic(const std::string& path, const char* op, const std::function<void(ByteSink&)>& body);

// Note [Temp file names]: write_file_atomic's temp files are "<dir>/.kiln-<pid>-<n>.tmp", so that
// one left by a process killed mid-write can be told apart and removed (remove_stale_temp_files).
// Removes those in `dir` whose process is gone; returns how many. Errors are ignored (best effort).
int remove_stale_temp_files(const std::string& dir);

// `a * b` and `a + b` for sizes, false on overflow.
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

// Whether a shape's strides and element count fit in int64 (kiln's size type):
// the product of max(size, 1) over the dims, times the itemsize, must not overflow.
bool shape_fits(const int64_t* sizes, size_t ndim, size_t itemsize);

// Index of the first byte of a bool array that is neither 0 nor 1, or n when all are valid.
// Other values would be undefined behaviour once read as C++ bool, so readers reject them.
size_t find_invalid_bool(const uint8_t* data, size_t n);

// CRC-32 (IEEE 802.3, as zip and zlib's crc32): `crc` is the value of the bytes before, 0 at first.
uint32_t crc32(const void* data, size_t n, uint32_t crc = 0);

}  // namespace kiln::io
