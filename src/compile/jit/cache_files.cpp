#include "compile/jit/cache_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "kiln/error.h"

namespace kiln::compiler::jit {

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}
uint64_t fnv1a(const std::string& s, uint64_t h) { return fnv1a(s.data(), s.size(), h); }

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  out = ss.str();
  return true;
}

void write_atomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." +
                    std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    KILN_CHECK(f, "compile: cannot write '", tmp, "': ", std::strerror(errno));
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    f.flush();
    KILN_CHECK(f, "compile: cannot write '", tmp, "': ", std::strerror(errno));
  }
  KILN_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "compile: cannot rename '", tmp, "' to '", path,
             "': ", std::strerror(errno));
}

void make_dirs(const std::string& dir) {
  std::string cur;
  std::stringstream ss(dir);
  std::string part;
  if (!dir.empty() && dir[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
    if (mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
      KILN_FAIL("compile: cannot create the cache directory '", cur, "': ", std::strerror(errno),
                " (set KILN_CACHE_DIR to a writable directory)");
  }
}

}  // namespace kiln::compiler::jit
