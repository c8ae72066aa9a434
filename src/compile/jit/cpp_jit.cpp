#include "compile/jit/cpp_jit.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <vector>

#include "compile/jit/cache_files.h"
#include "kiln/error.h"
#include "kiln/version.h"

extern char** environ;

namespace kiln::compiler::jit {

// Note [JIT cache]
// A library's key hashes its source, the compiler command, flags and version, kiln's version,
// the embedded headers and the CPU (-march=native code is this CPU's). On disk it is
// <cache>/cpp/<key>.so: the compiler writes a private temporary name, kiln appends a trailer
// (magic + a checksum of the bytes before it) and renames it into place, so a reader sees a
// whole file or none, and two processes compiling the same graph both succeed (the last rename
// wins; both files are whole). A file whose trailer is missing or wrong (truncated, bit
// flipped) is never loaded: it is rebuilt. KILN_CACHE=0 compiles into a private directory.
//
// Note [JIT locks]
// A thread that needs a library already in memory (or whole on disk) never waits for another
// thread's compiler run: the memory cache, the stats and the table of keys being compiled are
// read and written under cache_mutex(), held for lookups and inserts only. A key missing from
// memory is claimed in that table by the first thread that asks (its promise); a second thread
// asking for the same key waits on that key's future alone, and compiles nothing. The claiming
// thread loads or compiles without any global lock, then publishes the library (or its error)
// and releases the claim. setup_mutex() guards the per-process memos of compiler_version() and
// headers_dir(), slow only the first time; the precompiled header has its own pch_mutex(), taken
// only by threads about to compile.
//
// Note [Cache size bound]
// After a compile writes libraries, the cache directory's entries (<key>.so and <key>.cpp) are
// trimmed to $KILN_CACHE_MAX_MB (default 1024), least recently used first: a library's mtime is
// set when it is written and again whenever it is loaded, so hits count as use. Temporary files
// (".tmp" in the name) belong to a process between its compiler and its rename and are left
// alone, unless older than an hour (a process that died mid-compile). Deleting a renamed library
// that another process has loaded is safe (its mapping stays); one that another process is about
// to load fails its read or dlopen and is rebuilt there, a miss, never a wrong library. A new
// library is loaded under its temporary name, before the rename, so no trim can race its load.

namespace {

const char* const kHeaders[][2] = {
#include "jit_headers.inc"
};

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'S', 'O', '0', '1'};

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::mutex& cache_mutex() {  // Note [JIT locks]
  static std::mutex m;
  return m;
}
std::mutex& setup_mutex() {
  static std::mutex m;
  return m;
}
std::mutex& pch_mutex() {
  static std::mutex m;
  return m;
}
// Keys some thread is loading or compiling, and the futures their results arrive on.
std::unordered_map<std::string, std::shared_future<std::shared_ptr<const Library>>>& in_flight() {
  static std::unordered_map<std::string, std::shared_future<std::shared_ptr<const Library>>> m;
  return m;
}
JitStats& stats() {
  static JitStats s;
  return s;
}
std::unordered_map<std::string, std::shared_ptr<const Library>>& memory_cache() {
  static std::unordered_map<std::string, std::shared_ptr<const Library>> m;
  return m;
}

// Starts argv with stdout and stderr into `log`; returns the pid, or -1 with spawn_errno set.
pid_t start_process(const std::vector<std::string>& argv, const std::string& log, int& spawn_errno) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  spawn_errno = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return spawn_errno == 0 ? pid : -1;
}

int wait_process(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Runs argv to completion; returns the exit status, -1 when it could not start.
int run_process(const std::vector<std::string>& argv, const std::string& log, int& spawn_errno) {
  const pid_t pid = start_process(argv, log, spawn_errno);
  return pid < 0 ? -1 : wait_process(pid);
}

std::string compiler_version(const std::string& cxx) {
  static std::unordered_map<std::string, std::string> seen;
  auto it = seen.find(cxx);
  if (it != seen.end()) return it->second;
  std::string log = "/tmp/kiln-cxx-version." + std::to_string(getpid());
  int err = 0;
  int rc = run_process({cxx, "--version"}, log, err);
  std::string text;
  read_file(log, text);
  std::remove(log.c_str());
  KILN_CHECK(rc >= 0, "compile: backend \"inductor\" needs a C++ compiler, and '", cxx, "' could not be run (",
             std::strerror(err), "); install one (g++) or set KILN_CXX; backends \"eager\" and \"aot_eager\" need none");
  KILN_CHECK(rc == 0, "compile: '", cxx, " --version' failed: ", text.substr(0, 200));
  std::string first = text.substr(0, text.find('\n'));
  seen[cxx] = first;
  return first;
}

std::string cpu_id() {
  static const std::string id = [] {
    std::ifstream f("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(f, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && line.rfind("flags", 0) == 0) flags = line;
      if (!model.empty() && !flags.empty()) break;
    }
    return hex(fnv1a(model + "\n" + flags));
  }();
  return id;
}

// The embedded headers, written once under the cache (by content hash) for -I.
std::string headers_dir(const std::string& root) {
  static std::unordered_map<std::string, std::string> written;  // root -> dir, this process
  if (auto it = written.find(root); it != written.end()) return it->second;
  uint64_t h = 1469598103934665603ull;
  for (const auto& e : kHeaders) h = fnv1a(std::string(e[1]), fnv1a(std::string(e[0]), h));
  const std::string dir = root + "/include-" + hex(h);
  for (const auto& e : kHeaders) {
    std::string path = dir + "/" + e[0], have;
    if (read_file(path, have) && have == e[1]) continue;
    make_dirs(path.substr(0, path.rfind('/')));
    write_atomic(path, e[1]);
  }
  written[root] = dir;
  return dir;
}

// The umbrella header generated code includes first, beside its precompiled form (GCC: a
// .gch of the same flags is used in its place, halving a small kernel's compile time).
// Built once per cache, compiler and flags, through a temporary name; if the build fails
// the header is parsed as text.
std::string pch_dir(const std::string& hdr, const std::string& cxx, const std::string& version,
                    const std::string& flags) {
  static std::unordered_map<std::string, std::string> built;
  const std::string umbrella =
      "// Included first by generated code (Note [Generated C++]).\n#pragma once\n#include <cstdint>\n"
      "#include <limits>\n#include \"core/convert.h\"\n#include \"core/scalar_math.h\"\n"
      // NaN-sticky max/min for `omp simd reduction` (cpp_codegen.cpp's simd_clause): a NaN on
      // either side wins, as the generated step `if (v > a || v != v) a = v;` does.
      "#pragma omp declare reduction(kiln_max : float, double : omp_out = (omp_in > omp_out || omp_in != omp_in) ? "
      "omp_in : omp_out) initializer(omp_priv = -std::numeric_limits<decltype(omp_orig)>::infinity())\n"
      "#pragma omp declare reduction(kiln_min : float, double : omp_out = (omp_in < omp_out || omp_in != omp_in) ? "
      "omp_in : omp_out) initializer(omp_priv = std::numeric_limits<decltype(omp_orig)>::infinity())\n";
  // By its text too: a changed umbrella must not meet the .gch of the old one.
  const std::string dir = hdr + "/pch-" + hex(fnv1a(cxx + "\n" + version + "\n" + flags + "\n" + umbrella));
  if (auto it = built.find(dir); it != built.end()) return it->second;
  const std::string path = dir + "/kiln_jit.h";
  std::string have;
  if (!read_file(path, have) || have != umbrella) {
    make_dirs(dir);
    write_atomic(path, umbrella);
  }
  struct stat st {};
  const bool gcc = version.find("clang") == std::string::npos;  // clang reads a .gch only when told
  if (gcc && stat((path + ".gch").c_str(), &st) != 0) {
    std::vector<std::string> argv{cxx};
    std::stringstream fs(flags);
    for (std::string f; fs >> f;)
      if (f != "-shared") argv.push_back(f);
    const std::string tmp = path + ".gch." + std::to_string(getpid()) + ".tmp";
    argv.insert(argv.end(), {"-I" + hdr, "-x", "c++-header", path, "-o", tmp});
    int err = 0;
    const std::string log = tmp + ".log";
    if (run_process(argv, log, err) == 0) std::rename(tmp.c_str(), (path + ".gch").c_str());
    else std::remove(tmp.c_str());
    std::remove(log.c_str());
  }
  built[dir] = dir;
  return dir;
}

// The library at path, if it is whole (Note [JIT cache]); null otherwise.
std::shared_ptr<const Library> load_verified(const std::string& path) {
  std::string bytes;
  if (!read_file(path, bytes) || bytes.size() < 16) return nullptr;
  const size_t n = bytes.size() - 16;
  uint64_t sum = 0;
  std::memcpy(&sum, bytes.data() + n + 8, 8);
  if (std::memcmp(bytes.data() + n, kMagic, 8) != 0 || sum != fnv1a(bytes.data(), n)) return nullptr;
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  return std::make_shared<const Library>(h);
}

std::string private_dir() {
  static const std::string dir = [] {
    std::string t = (env("TMPDIR").empty() ? std::string("/tmp") : env("TMPDIR")) + "/kiln-jit-XXXXXX";
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    KILN_CHECK(mkdtemp(buf.data()) != nullptr, "compile: cannot create a temporary directory '", t,
               "': ", std::strerror(errno));
    return std::string(buf.data());
  }();
  return dir;
}

}  // namespace

void* Library::symbol(const std::string& name) const {
  void* p = dlsym(handle_, name.c_str());
  KILN_CHECK(p, "internal: compiled library has no function '", name, "'");
  return p;
}

std::string cache_dir() {
  if (!env("KILN_CACHE_DIR").empty()) return env("KILN_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty()) return env("XDG_CACHE_HOME") + "/kiln";
  if (!env("HOME").empty()) return env("HOME") + "/.cache/kiln";
  return "/tmp/kiln-cache-" + std::to_string(getuid());
}

std::string compiler_command() {
  if (!env("KILN_CXX").empty()) return env("KILN_CXX");
  if (!env("CXX").empty()) return env("CXX");
  return "c++";
}

std::string compiler_flags() {
  // No -ffast-math and no FMA contraction: each functor rounds as eager's kernel does.
  // -fno-trapping-math: nothing reads the floating-point exception flags, and without it GCC may
  // not compute both arms of a functor's select (lerp's two forms, where's, clamp's) speculatively,
  // so such a loop stayed scalar: a compiled AdamW step was 7x slower than the eager fused one.
  return "-O3 -march=native -fopenmp -fPIC -shared -std=c++20 -ffp-contract=off -fno-math-errno -fno-trapping-math -w";
}

namespace {

struct Job {
  std::string key, so, src, tmp_so, log;
  pid_t pid = -1;
  int spawn_errno = 0;
};

// Marks a loaded library as just used, for the least-recently-used trim (Note [Cache size bound]).
void touch(const std::string& path) { utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

// $KILN_CACHE_MAX_MB in bytes (Note [Cache size bound]).
uint64_t cache_max_bytes() {
  const std::string v = env("KILN_CACHE_MAX_MB");
  if (v.empty()) return 1024ull << 20;
  char* end = nullptr;
  errno = 0;
  const double mb = std::strtod(v.c_str(), &end);
  KILN_CHECK(errno == 0 && end && *end == '\0' && mb > 0 && mb < 1e12,
             "compile: KILN_CACHE_MAX_MB must be a positive number of megabytes (e.g. 1024 or 0.5), got '", v, "'");
  return static_cast<uint64_t>(mb * 1024 * 1024);
}

// Deletes the least recently used entries of dir until they fit the bound; `keep` (the keys this
// call returns) go last of all.
void trim_cache(const std::string& dir, const std::vector<std::string>& keep, uint64_t max_bytes) {
  namespace fs = std::filesystem;
  struct Entry {
    fs::file_time_type used{};
    uint64_t bytes = 0;
    bool kept = false;
    std::vector<fs::path> files;
  };
  std::unordered_map<std::string, Entry> entries;
  const auto now = fs::file_time_type::clock::now();
  std::error_code ec;
  uint64_t total = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    std::error_code e2;
    const auto mtime = fs::last_write_time(p, e2);
    if (e2) continue;  // deleted meanwhile by another process's trim
    if (name.find(".tmp") != std::string::npos) {
      // A temporary: another process's compile in flight, or one that died (Note [Cache size bound]).
      if (now - mtime > std::chrono::hours(1)) fs::remove(p, e2);
      continue;
    }
    const std::string ext = p.extension().string();
    if (ext != ".so" && ext != ".cpp") continue;
    const uint64_t size = fs::file_size(p, e2);
    if (e2) continue;
    Entry& e = entries[p.stem().string()];
    if (ext == ".so" || e.files.empty()) e.used = mtime;  // the library's time is the entry's
    e.bytes += size;
    e.files.push_back(p);
    total += size;
  }
  if (total <= max_bytes) return;
  for (const std::string& k : keep)
    if (auto it = entries.find(k); it != entries.end()) it->second.kept = true;
  std::vector<Entry*> order;
  for (auto& [k, e] : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(),
            [](const Entry* a, const Entry* b) { return a->kept != b->kept ? b->kept : a->used < b->used; });
  for (Entry* e : order) {
    if (total <= max_bytes) break;
    for (const fs::path& p : e->files) fs::remove(p, ec);
    total -= std::min(total, e->bytes);
  }
}

// Loads (from disk) or compiles the sources of `jobs`, whose keys this thread has claimed
// (Note [JIT locks]); no lock is held. Returns the libraries by key; throws the first failure.
std::unordered_map<std::string, std::shared_ptr<const Library>> build(
    std::vector<std::pair<const std::string*, Job>>& jobs, bool use_disk, uint64_t max_bytes, const std::string& dir,
    const std::string& hdr, const std::string& cxx, const std::string& version, const std::string& flags) {
  std::unordered_map<std::string, std::shared_ptr<const Library>> built;
  std::vector<std::pair<const std::string*, Job>> todo;
  int disk_hits = 0;
  for (auto& [source, job] : jobs) {
    if (use_disk)
      if (auto lib = load_verified(job.so)) {
        touch(job.so);
        ++disk_hits;
        built[job.key] = lib;
        continue;
      }
    todo.emplace_back(source, job);  // a copy: the caller reads the claimed keys from `jobs`
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    stats().disk_hits += disk_hits;
  }
  if (todo.empty()) return built;
  std::string pch;
  {
    std::lock_guard<std::mutex> lock(pch_mutex());
    pch = pch_dir(hdr, cxx, version, flags);
  }
  // Thread and process in the temporary names: two threads may compile different keys at once.
  const std::string tag = "." + std::to_string(getpid()) + "-" +
                          std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id())) + ".tmp";
  // Compilers run side by side, as many as the machine has cores.
  const size_t width = std::max(1u, std::thread::hardware_concurrency());
  const auto t0 = std::chrono::steady_clock::now();
  size_t next = 0, done = 0;
  std::vector<int> rcs(todo.size(), -1);
  int runs = 0;
  while (done < todo.size()) {
    while (next < todo.size() && next - done < width) {
      Job& j = todo[next].second;
      j.src = dir + "/" + j.key + ".cpp";
      j.tmp_so = j.so + tag;
      j.log = dir + "/" + j.key + tag + ".log";
      write_atomic(j.src, *todo[next].first);
      std::vector<std::string> argv{cxx};
      std::stringstream fs(flags);
      for (std::string f; fs >> f;) argv.push_back(f);
      argv.insert(argv.end(), {"-I" + pch, "-I" + hdr, "-o", j.tmp_so, j.src});
      j.pid = start_process(argv, j.log, j.spawn_errno);
      ++runs;
      ++next;
    }
    Job& j = todo[done].second;
    rcs[done] = j.pid < 0 ? -1 : wait_process(j.pid);
    ++done;
  }
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    stats().compiler_runs += runs;
    stats().compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  std::string failure;
  for (size_t k = 0; k < todo.size(); ++k) {
    Job& j = todo[k].second;
    std::string out;
    read_file(j.log, out);
    std::remove(j.log.c_str());
    if (rcs[k] != 0) {
      std::remove(j.tmp_so.c_str());
      if (failure.empty()) {
        if (j.pid < 0)
          failure = "compile: backend \"inductor\" needs a C++ compiler, and '" + cxx + "' could not be run (" +
                    std::strerror(j.spawn_errno) + "); install one (g++) or set KILN_CXX";
        else
          failure = "compile: the C++ compiler failed (exit " + std::to_string(rcs[k]) + ") on generated source '" +
                    j.src + "':\n" + out.substr(0, 4000);
      }
      continue;
    }
    std::string bytes;
    KILN_CHECK(read_file(j.tmp_so, bytes), "compile: the compiler wrote no library '", j.tmp_so, "'");
    const uint64_t sum = fnv1a(bytes.data(), bytes.size());
    bytes.append(kMagic, 8);
    bytes.append(reinterpret_cast<const char*>(&sum), 8);
    write_atomic(j.tmp_so, bytes);
    // Loaded under its temporary name, which no trim deletes (Note [Cache size bound]): once
    // renamed, another process's trim may delete the file, though never the mapping.
    auto lib = load_verified(j.tmp_so);
    const char* why = lib ? nullptr : dlerror();
    if (!lib) std::remove(j.tmp_so.c_str());
    KILN_CHECK(lib, "compile: cannot load the compiled library '", j.tmp_so, "': ", why ? why : "bad checksum");
    KILN_CHECK(std::rename(j.tmp_so.c_str(), j.so.c_str()) == 0, "compile: cannot rename '", j.tmp_so, "' to '", j.so,
               "': ", std::strerror(errno));
    built[j.key] = lib;
  }
  std::vector<std::string> keep;
  for (const auto& [source, job] : jobs) keep.push_back(job.key);
  trim_cache(dir, keep, max_bytes);
  if (!failure.empty()) KILN_FAIL(failure);
  return built;
}

}  // namespace

std::vector<std::shared_ptr<const Library>> compile_cpp(const std::vector<std::string>& sources) {
  const std::string cxx = compiler_command(), flags = compiler_flags();
  const bool use_disk = env("KILN_CACHE") != "0";
  const std::string root = use_disk ? cache_dir() : private_dir();
  const uint64_t max_bytes = cache_max_bytes();  // a bad value is an error before any work
  std::string version, hdr;
  {
    std::lock_guard<std::mutex> lock(setup_mutex());  // slow only on a process's first compile
    version = compiler_version(cxx);
    hdr = headers_dir(root);
  }
  const std::string dir = root + "/cpp";
  make_dirs(dir);
  const std::string salt = cxx + "\n" + flags + "\n" + version + "\n" + kVersion + "\n" + cpu_id() + "\n" + hdr;
  std::vector<std::string> keys(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) keys[i] = hex(fnv1a(salt, fnv1a(sources[i])));

  // Under the short lock: memory hits, keys other threads are building, and the keys this thread claims.
  std::vector<std::shared_ptr<const Library>> libs(sources.size());
  std::vector<std::pair<const std::string*, Job>> jobs;
  std::vector<std::promise<std::shared_ptr<const Library>>> promises;
  std::unordered_map<std::string, std::shared_future<std::shared_ptr<const Library>>> waits;
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    for (size_t i = 0; i < sources.size(); ++i) {
      const std::string& key = keys[i];
      if (auto it = memory_cache().find(key); it != memory_cache().end()) {
        ++stats().memory_hits;
        libs[i] = it->second;
        continue;
      }
      if (auto it = in_flight().find(key); it != in_flight().end()) {
        waits.emplace(key, it->second);  // also the same source twice in one batch: built once
        continue;
      }
      Job job;
      job.key = key;
      job.so = dir + "/" + key + ".so";
      promises.emplace_back();
      in_flight().emplace(key, promises.back().get_future().share());
      waits.emplace(key, in_flight().at(key));
      jobs.emplace_back(&sources[i], std::move(job));
    }
  }
  if (!jobs.empty()) {
    std::unordered_map<std::string, std::shared_ptr<const Library>> built;
    std::exception_ptr error;
    try {
      built = build(jobs, use_disk, max_bytes, dir, hdr, cxx, version, flags);
    } catch (...) {
      error = std::current_exception();
    }
    // Publish every claimed key, library or error, so that no waiter waits forever.
    std::lock_guard<std::mutex> lock(cache_mutex());
    for (size_t k = 0; k < jobs.size(); ++k) {
      const std::string& key = jobs[k].second.key;
      in_flight().erase(key);
      auto it = built.find(key);
      if (it != built.end()) {
        memory_cache()[key] = it->second;
        promises[k].set_value(it->second);
      } else {
        promises[k].set_exception(
            error ? error : std::make_exception_ptr(Error("internal: the JIT built no library for key " + key)));
      }
    }
  }
  for (size_t i = 0; i < sources.size(); ++i)
    if (!libs[i]) libs[i] = waits.at(keys[i]).get();  // rethrows the building thread's error
  return libs;
}

std::shared_ptr<const Library> compile_cpp(const std::string& source) { return compile_cpp(std::vector{source})[0]; }

JitStats jit_stats() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  return stats();
}

void reset_memory_cache() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  memory_cache().clear();
}

}  // namespace kiln::compiler::jit
