#include "io/file_util.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <dirent.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <limits>
#include <system_error>

#include "kiln/error.h"

namespace kiln::io {

namespace {

std::string errno_str(int e) { return std::generic_category().message(e); }

// Closes a descriptor on scope exit unless released.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

class FdSink final : public ByteSink {
 public:
  FdSink(int fd, const std::string& path, const char* op) : fd_(fd), path_(path), op_(op) {}
  void write(const void* data, size_t n) override {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      KILN_CHECK(w > 0, op_, "('", path_, "'): write failed: ", errno_str(w < 0 ? errno : EIO));
      p += w;
      n -= static_cast<size_t>(w);
    }
  }

 private:
  int fd_;
  const std::string& path_;
  const char* op_;
};

std::string parent_dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

// Note [Regular files only]
std::shared_ptr<ReadFile> ReadFile::open(const std::string& path, const std::string& where) {
  // stat first, so a FIFO is never opened; O_NONBLOCK as well, in case the path is swapped for
  // one between the stat and the open (opening a FIFO for reading then returns at once).
  struct stat st {};
  KILN_CHECK(::stat(path.c_str(), &st) == 0, where, ": cannot open: ", errno_str(errno));
  auto kind = [](mode_t m) {
    return S_ISDIR(m)    ? "a directory"
           : S_ISFIFO(m) ? "a FIFO"
           : S_ISSOCK(m) ? "a socket"
           : S_ISCHR(m)  ? "a character device"
           : S_ISBLK(m)  ? "a block device"
                         : "not a plain file";
  };
  KILN_CHECK(S_ISREG(st.st_mode), where, ": not a regular file (it is ", kind(st.st_mode), ")");
  Fd f;
  do f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  while (f.fd < 0 && errno == EINTR);
  KILN_CHECK(f.fd >= 0, where, ": cannot open: ", errno_str(errno));
  KILN_CHECK(::fstat(f.fd, &st) == 0, where, ": cannot stat: ", errno_str(errno));
  KILN_CHECK(S_ISREG(st.st_mode), where, ": not a regular file (it is ", kind(st.st_mode), ")");
  int fd = f.fd;
  f.fd = -1;
  return std::shared_ptr<ReadFile>(new ReadFile(fd, static_cast<uint64_t>(st.st_size), path));
}

ReadFile::~ReadFile() { ::close(fd_); }

void ReadFile::read_at(uint64_t offset, void* dst, size_t n, const std::string& what) const {
  auto* p = static_cast<uint8_t*>(dst);
  while (n > 0) {
    ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    KILN_CHECK(r >= 0, what, ": read failed at byte ", offset, ": ", errno_str(errno));
    KILN_CHECK(r > 0, what, ": the file ends at byte ", offset, ", before the data it described when opened (", size_,
               " bytes); was it truncated?");
    p += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<size_t>(r);
  }
}

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path, const std::string& where) {
  std::shared_ptr<ReadFile> f = ReadFile::open(path, where);
  size_t size = static_cast<size_t>(f->size());
  uint8_t* data = nullptr;
  if (size > 0) {
    // Private + writable: tensors aliasing the mapping stay writable, and writes never reach the file.
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, f->fd(), 0);
    KILN_CHECK(p != MAP_FAILED, where, ": cannot map ", size, " bytes: ", errno_str(errno));
    data = static_cast<uint8_t*>(p);
  }
  return std::shared_ptr<MappedFile>(new MappedFile(data, size, path));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

void write_file_atomic(const std::string& path, const char* op, const std::function<void(ByteSink&)>& body) {
  KILN_CHECK(!path.empty(), op, ": the path is empty");
  KILN_CHECK(path.back() != '/', op, "('", path, "'): the path names a directory");
  const std::string dir = parent_dir(path);
  // A hidden name in the same directory, so the rename stays on one file system; Note [Temp file names].
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  Fd f;
  for (int attempt = 0; f.fd < 0; ++attempt) {
    tmp = dir + "/.kiln-" + std::to_string(::getpid()) + "-" + std::to_string(counter.fetch_add(1)) + ".tmp";
    f.fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (f.fd < 0 && errno != EEXIST && errno != EINTR)
      KILN_FAIL(op, "('", path, "'): cannot create a file in '", dir, "': ", errno_str(errno));
    KILN_CHECK(f.fd >= 0 || attempt < 1000, op, "('", path, "'): cannot find a free temporary name in '", dir, "'");
  }
  try {
    FdSink sink(f.fd, path, op);
    body(sink);
    KILN_CHECK(::fsync(f.fd) == 0, op, "('", path, "'): fsync failed: ", errno_str(errno));
    int fd = f.fd;
    f.fd = -1;
    KILN_CHECK(::close(fd) == 0, op, "('", path, "'): close failed: ", errno_str(errno));
    KILN_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, op, "('", path,
               "'): cannot rename the temporary file into place: ", errno_str(errno));
  } catch (...) {
    if (f.fd >= 0) {
      ::close(f.fd);
      f.fd = -1;
    }
    ::unlink(tmp.c_str());
    throw;
  }
  // Persist the rename itself. Best effort: the file is already in place, so a failure here is not reported.
  Fd d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd >= 0) (void)::fsync(d.fd);
}

// Note [Temp file names]
int remove_stale_temp_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    long long pid = 0;
    unsigned long long n = 0;
    int used = 0;
    if (name.rfind(".kiln-", 0) != 0 || std::sscanf(name.c_str(), ".kiln-%lld-%llu.tmp%n", &pid, &n, &used) != 2 ||
        used != static_cast<int>(name.size()) || pid <= 0 || pid > std::numeric_limits<pid_t>::max())
      continue;
    // Alive (or not ours to ask about): its writer may still rename it into place.
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    if (::unlink((dir + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

bool shape_fits(const int64_t* sizes, size_t ndim, size_t itemsize) {
  uint64_t n = itemsize;
  for (size_t i = 0; i < ndim; ++i) {
    if (sizes[i] < 0) return false;
    if (!checked_mul(n, static_cast<uint64_t>(sizes[i] > 1 ? sizes[i] : 1), &n)) return false;
  }
  return n <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

size_t find_invalid_bool(const uint8_t* data, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (data[i] > 1) return i;
  return n;
}

namespace {

// Slicing-by-8 tables: eight bytes per step, several GB/s, so checking a checkpoint costs
// little beside reading it.
struct Crc32Tables {
  uint32_t t[8][256];
  Crc32Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
};

}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  static const Crc32Tables tables;
  const auto& t = tables.t;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    uint32_t lo = c ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    uint32_t hi = uint32_t(p[4]) | uint32_t(p[5]) << 8 | uint32_t(p[6]) << 16 | uint32_t(p[7]) << 24;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
        t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) c = t[0][(c ^ *p) & 0xFF] ^ (c >> 8);
  return ~c;
}

}  // namespace kiln::io
