#include "compile/jit/cuda_jit.h"

#include "kiln/error.h"

#ifndef KILN_HAVE_NVRTC

namespace kiln::compiler::jit {

namespace {
[[noreturn]] void unavailable() {
  KILN_FAIL("compile: not supported: this kiln was built without CUDA (KILN_CUDA=OFF), so it cannot generate CUDA "
            "kernels; rebuild with the CUDA toolkit (nvcc, NVRTC) or use backend \"aot_eager\"");
}
}  // namespace

bool cuda_jit_built() { return false; }
void* CudaModule::kernel(const std::string&) const { unavailable(); }
std::vector<std::shared_ptr<const CudaModule>> compile_cuda(const std::vector<std::string>&, int) { unavailable(); }
std::string nvrtc_compile(const std::string&, const std::string&) { unavailable(); }
CudaDeviceInfo cuda_device_info(int) { unavailable(); }
void launch_cuda(void*, int64_t, int, const void*, void*) { unavailable(); }
CudaJitStats cuda_jit_stats() { return {}; }
void reset_cuda_memory_cache() {}

}  // namespace kiln::compiler::jit

#else

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nvrtc.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <future>
#include <mutex>
#include <unordered_map>

#include "compile/jit/cache_files.h"
#include "compile/jit/cpp_jit.h"
#include "kiln/version.h"

namespace kiln::compiler::jit {

// Note [CUDA JIT]
// Generated CUDA (Note [Generated CUDA]) includes the shared numeric headers, embedded in
// libkiln as for the C++ JIT (Note [JIT headers]), and through them a few standard headers;
// NVRTC has no standard library, so those names are given as in-memory headers that bring the
// few declarations used from the toolkit's libcu++ (cuda/std/...) into namespace std. Those
// are found at run time under $CUDA_HOME, $CUDA_PATH, the toolkit kiln was built with, or
// /usr/local/cuda. -default-device makes the shared headers' unannotated functions
// (kiln::convert) device functions. A source compiles to a cubin for the device's
// architecture (sm_XY), or to PTX for the newest architecture NVRTC knows when the device is
// newer; the key hashes the source, the target, NVRTC's version, kiln's version and the
// headers, and the file, <cache>/cuda/<key>.cubin, is written through a temporary name and a
// rename. The cubin is loaded with cudaLibraryLoadData (context-independent) and launched
// with cudaLaunchKernel: no link against the driver library.

namespace {

const char* const kHeaders[][2] = {
#include "jit_headers.inc"
};

constexpr const char* kStdNames[] = {"cstdint", "cstring", "cmath", "limits", "type_traits"};

// Brings what the shared headers use from the C++ library into std, from libcu++.
constexpr const char* kStdShim = R"(#ifndef KILN_NVRTC_STD
#define KILN_NVRTC_STD
#include <cuda/std/cstdint>
#include <cuda/std/cstring>
#include <cuda/std/cmath>
#include <cuda/std/limits>
#include <cuda/std/type_traits>
#include <cuda/std/__algorithm/max.h>
#include <cuda/std/__algorithm/min.h>
namespace std {
using cuda::std::int8_t; using cuda::std::int16_t; using cuda::std::int32_t; using cuda::std::int64_t;
using cuda::std::uint8_t; using cuda::std::uint16_t; using cuda::std::uint32_t; using cuda::std::uint64_t;
using cuda::std::memcpy; using cuda::std::max; using cuda::std::min;
using cuda::std::is_same_v; using cuda::std::is_integral_v; using cuda::std::is_signed_v;
using cuda::std::is_floating_point_v; using cuda::std::is_arithmetic_v; using cuda::std::enable_if_t;
using cuda::std::conditional_t; using cuda::std::make_signed_t; using cuda::std::make_unsigned_t;
using cuda::std::is_trivially_copyable_v; using cuda::std::is_trivially_default_constructible_v;
using cuda::std::common_type_t;
using cuda::std::float_denorm_style; using cuda::std::denorm_present;
using cuda::std::float_round_style; using cuda::std::round_to_nearest;
// Its own template (libcu++'s lives in another namespace): half.h specializes it.
template <class T>
class numeric_limits : public cuda::std::numeric_limits<T> {};
}  // namespace std
#endif
)";

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

// The -I options that find libcu++.
std::vector<std::string> include_options() {
  static const std::vector<std::string> opts = [] {
    std::vector<std::string> roots;
    for (const char* e : {"CUDA_HOME", "CUDA_PATH"})
      if (!env(e).empty()) roots.push_back(env(e) + "/include");
#ifdef KILN_CUDA_INCLUDE_DIR
    roots.push_back(KILN_CUDA_INCLUDE_DIR);
#endif
    roots.push_back("/usr/local/cuda/include");
    for (const std::string& r : roots) {
      if (exists(r + "/cccl/cuda/std/cstdint")) return std::vector<std::string>{"-I" + r + "/cccl", "-I" + r};
      if (exists(r + "/cuda/std/cstdint")) return std::vector<std::string>{"-I" + r};
    }
    return std::vector<std::string>{};
  }();
  KILN_CHECK(!opts.empty(), "compile: CUDA kernels need the CUDA toolkit's headers (libcu++: cuda/std/cstdint), "
                            "found under none of $CUDA_HOME/include, $CUDA_PATH/include, /usr/local/cuda/include: "
                            "set CUDA_HOME to the toolkit");
  return opts;
}

void check_cuda(cudaError_t e, const char* what) {
  KILN_CHECK(e == cudaSuccess, "compile: ", what, " failed: ", cudaGetErrorString(e));
}

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<std::string, std::shared_ptr<const CudaModule>>& memory_cache() {
  static std::unordered_map<std::string, std::shared_ptr<const CudaModule>> m;
  return m;
}
CudaJitStats& stats() {
  static CudaJitStats s;
  return s;
}

int nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return major * 100 + minor;
}

// The target for a device of compute capability major.minor: "sm_XY" where NVRTC can make its
// machine code, else "compute_XY" (PTX) of the newest architecture it knows.
std::string target_for(int major, int minor) {
  const int want = major * 10 + minor;
  int n = 0;
  nvrtcGetNumSupportedArchs(&n);
  std::vector<int> archs(static_cast<size_t>(n));
  if (n > 0) nvrtcGetSupportedArchs(archs.data());
  if (std::find(archs.begin(), archs.end(), want) != archs.end()) return "sm_" + std::to_string(want);
  int best = 0;
  for (int a : archs)
    if (a <= want) best = std::max(best, a);
  KILN_CHECK(best > 0, "compile: NVRTC ", nvrtc_version() / 100, ".", nvrtc_version() % 100,
             " cannot generate code for compute capability ", major, ".", minor);
  return "compute_" + std::to_string(best);
}

// NVRTC loads libnvrtc-builtins.so.<version> with dlopen by its name, which finds it only on the
// loader's paths; libkiln found NVRTC through its own RUNPATH, which that dlopen does not read.
// Loading it first by its full path, beside libnvrtc, makes NVRTC's dlopen find it loaded.
void preload_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&nvrtcVersion), &info) || !info.dli_fname) return;
    std::string dir = info.dli_fname;
    dir = dir.substr(0, dir.rfind('/') + 1);
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    const std::string v = std::to_string(major) + "." + std::to_string(minor);
    for (const std::string& name : {"libnvrtc-builtins.so." + v, "libnvrtc-builtins.so." + std::to_string(major)})
      if (exists(dir + name) && dlopen((dir + name).c_str(), RTLD_NOW | RTLD_GLOBAL)) return;
  });
}

// One NVRTC run: the cubin (sm_) or the PTX (compute_) of `source`.
std::string run_nvrtc(const std::string& source, const std::string& target) {
  preload_builtins();
  std::vector<std::string> names(std::begin(kStdNames), std::end(kStdNames)), texts;
  const std::string include_shim = "#include \"kiln_nvrtc_std.h\"\n";
  texts.assign(names.size(), include_shim);
  names.push_back("kiln_nvrtc_std.h");
  texts.push_back(kStdShim);
  for (const auto& h : kHeaders) {
    names.push_back(h[0]);
    texts.push_back(h[1]);
  }
  std::vector<const char*> hn, ht;
  for (size_t i = 0; i < names.size(); ++i) {
    hn.push_back(names[i].c_str());
    ht.push_back(texts[i].c_str());
  }
  nvrtcProgram prog = nullptr;
  nvrtcResult r = nvrtcCreateProgram(&prog, source.c_str(), "kiln_kernels.cu", static_cast<int>(hn.size()), ht.data(),
                                     hn.data());
  KILN_CHECK(r == NVRTC_SUCCESS, "compile: nvrtcCreateProgram failed: ", nvrtcGetErrorString(r));
  std::vector<std::string> opts{"-std=c++20", "-default-device", "--gpu-architecture=" + target};
  for (const std::string& i : include_options()) opts.push_back(i);
  std::vector<const char*> o;
  for (const std::string& s : opts) o.push_back(s.c_str());
  r = nvrtcCompileProgram(prog, static_cast<int>(o.size()), o.data());
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog, log.data());
  if (r != NVRTC_SUCCESS) {
    nvrtcDestroyProgram(&prog);
    KILN_FAIL("compile: NVRTC could not compile the generated CUDA (", nvrtcGetErrorString(r), ", target ", target,
              "):\n", log, "\n--- source ---\n", source);
  }
  std::string code;
  size_t size = 0;
  if (target.rfind("sm_", 0) == 0) {
    nvrtcGetCUBINSize(prog, &size);
    code.resize(size);
    nvrtcGetCUBIN(prog, code.data());
  } else {
    nvrtcGetPTXSize(prog, &size);
    code.resize(size);
    nvrtcGetPTX(prog, code.data());
  }
  nvrtcDestroyProgram(&prog);
  return code;
}

std::string headers_hash() {
  uint64_t h = fnv1a(std::string(kStdShim));
  for (const auto& e : kHeaders) h = fnv1a(std::string(e[1]), fnv1a(std::string(e[0]), h));
  return hex(h);
}

std::shared_ptr<const CudaModule> load(const std::string& code) {
  cudaLibrary_t lib = nullptr;
  check_cuda(cudaLibraryLoadData(&lib, code.data(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadData");
  return std::make_shared<const CudaModule>(static_cast<void*>(lib));
}

// One source for the current device: memory, disk, or NVRTC.
std::shared_ptr<const CudaModule> build(const std::string& source, const std::string& target) {
  const std::string key =
      hex(fnv1a(source, fnv1a(target + "|" + std::to_string(nvrtc_version()) + "|" + kiln::kVersion + "|" +
                              headers_hash())));
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    if (auto it = memory_cache().find(key); it != memory_cache().end()) {
      ++stats().memory_hits;
      return it->second;
    }
  }
  const bool use_disk = env("KILN_CACHE") != "0";
  const std::string dir = cache_dir() + "/cuda", path = dir + "/" + key + ".cubin";
  std::string code;
  bool from_disk = use_disk && read_file(path, code) && !code.empty();
  if (!from_disk) {
    const auto t0 = std::chrono::steady_clock::now();
    code = run_nvrtc(source, target);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (use_disk) {
      make_dirs(dir);
      write_atomic(path, code);
    }
    std::lock_guard<std::mutex> lock(cache_mutex());
    ++stats().nvrtc_runs;
    stats().compile_seconds += s;
  }
  std::shared_ptr<const CudaModule> m = load(code);
  std::lock_guard<std::mutex> lock(cache_mutex());
  if (from_disk) ++stats().disk_hits;
  return memory_cache().emplace(key, m).first->second;
}

}  // namespace

bool cuda_jit_built() { return true; }

void* CudaModule::kernel(const std::string& name) const {
  cudaKernel_t k = nullptr;
  check_cuda(cudaLibraryGetKernel(&k, static_cast<cudaLibrary_t>(library_), name.c_str()),
             ("cudaLibraryGetKernel(" + name + ")").c_str());
  return reinterpret_cast<void*>(k);
}

CudaDeviceInfo cuda_device_info(int device) {
  CudaDeviceInfo info;
  check_cuda(cudaDeviceGetAttribute(&info.multiprocessors, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  check_cuda(cudaDeviceGetAttribute(&info.major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  check_cuda(cudaDeviceGetAttribute(&info.minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
  return info;
}

std::vector<std::shared_ptr<const CudaModule>> compile_cuda(const std::vector<std::string>& sources, int device) {
  // The caller may be a background build thread, whose current device is the default one; the
  // caller's current device is restored after.
  int previous = 0;
  check_cuda(cudaGetDevice(&previous), "cudaGetDevice");
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  struct Restore {
    int device;
    ~Restore() { cudaSetDevice(device); }
  } restore{previous};
  const CudaDeviceInfo info = cuda_device_info(device);
  const std::string target = target_for(info.major, info.minor);
  std::vector<std::future<std::shared_ptr<const CudaModule>>> parts;
  for (size_t i = 1; i < sources.size(); ++i)
    parts.push_back(std::async(std::launch::async, [&, i] {
      check_cuda(cudaSetDevice(device), "cudaSetDevice");
      return build(sources[i], target);
    }));
  std::vector<std::shared_ptr<const CudaModule>> out;
  if (!sources.empty()) out.push_back(build(sources[0], target));
  for (auto& f : parts) out.push_back(f.get());
  return out;
}

std::string nvrtc_compile(const std::string& source, const std::string& arch) { return run_nvrtc(source, arch); }

void launch_cuda(void* kernel, int64_t grid, int block, const void* args, void* stream) {
  KILN_CHECK(grid > 0 && grid < (int64_t(1) << 31), "internal: CUDA grid of ", grid, " blocks");
  void* params[] = {const_cast<void*>(args)};
  check_cuda(cudaLaunchKernel(static_cast<const void*>(kernel), dim3(static_cast<unsigned>(grid)), dim3(block), params,
                              0, static_cast<cudaStream_t>(stream)),
             "cudaLaunchKernel of a generated kernel");
}

CudaJitStats cuda_jit_stats() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  return stats();
}

void reset_cuda_memory_cache() {
  std::lock_guard<std::mutex> lock(cache_mutex());
  memory_cache().clear();  // the modules stay loaded (CudaModule): kernels may still be queued
}

}  // namespace kiln::compiler::jit

#endif
