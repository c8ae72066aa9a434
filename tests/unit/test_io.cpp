// File formats: safetensors (round trips, the reference layout byte for byte, every
// rejection, owned copies by default and explicit mmap, atomic writes), .npy (round trips,
// hand-built files of each version/byte order/layout, rejections), non-regular files refused
// by every reader, and DLPack (zero-copy both ways).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tests/unit/temp_dir.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>

#include "io/dlpack_abi.h"
#include "kiln/cuda.h"
#include "kiln/dlpack.h"
#include "kiln/io.h"
#include "kiln/kiln.h"

using namespace kiln;
using namespace kiln::safetensors;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<uint8_t>;

const DType kAllDTypes[] = {kBool, kUInt8, kInt8, kInt16, kInt32, kInt64, kFloat16, kBFloat16, kFloat32, kFloat64};

// The message of the kiln::Error `f` throws ("" if none; other exception types fail the test).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a kiln::Error: " << e.what();
    return "";
  }
  return "";
}

#define EXPECT_ERROR(stmt, text)                                                  \
  do {                                                                            \
    std::string msg_ = error_of([&] { (void)(stmt); });                           \
    EXPECT_NE(msg_.find(text), std::string::npos) << "message: '" << msg_ << "'"; \
  } while (0)

bool have_json() {
  return error_of([] { (void)save(StateDict{}); }).find("without nlohmann-json") == std::string::npos;
}
#define REQUIRE_JSON() \
  if (!have_json()) GTEST_SKIP() << "kiln was built without nlohmann-json"

using kiln::testing::TempDir;

Bytes read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(f), {});
}
void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
Bytes str_bytes(const std::string& s) { return Bytes(s.begin(), s.end()); }
Bytes le(uint64_t v, int n) {
  Bytes b;
  for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  return b;
}
template <class T>
Bytes raw(std::initializer_list<T> vals) {
  Bytes b(vals.size() * sizeof(T));
  std::memcpy(b.data(), std::data(vals), b.size());
  return b;
}

// A safetensors file: the 8-byte length, the header text as given, the data.
Bytes st_file(const std::string& header, const Bytes& data = {}) {
  return cat(cat(le(header.size(), 8), str_bytes(header)), data);
}
std::string st_load_error(const std::string& header, const Bytes& data = {}) {
  Bytes b = st_file(header, data);
  return error_of([&] { (void)load(b); });
}

// Contents of a tensor as bytes in row-major order.
Bytes contents(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return Bytes(p, p + c.nbytes());
}

// Distinct small values per element, exact in every dtype (bools mixed).
Tensor sample(DType dt, const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  Tensor i = arange(n, kFloat64);
  Tensor v = dt == kBool ? remainder(i, 3).eq(0) : dt == kUInt8 ? i.mul(3).add(1) : i.mul(3).sub(n);
  return v.to(dt).reshape(shape);
}

void expect_same(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  EXPECT_EQ(contents(got), contents(want)) << what;
}

}  // namespace
// ---------------------------------------------------------------- safetensors

TEST(SafeTensors, RoundTripEveryDTypeEmptyAndZeroDim) {
  REQUIRE_JSON();
  TempDir dir;
  StateDict sd;
  for (DType dt : kAllDTypes) {
    std::string name(dtype_name(dt));
    sd.insert(name, sample(dt, {2, 3}));
    sd.insert(name + ".empty", sample(dt, {0, 4}));
    sd.insert(name + ".scalar", sample(dt, {1}).reshape({}));
  }
  std::map<std::string, std::string> meta{{"format", "pt"}, {"note", "héllo \"quoted\"\n"}};
  const std::string path = dir.file("all.safetensors");
  save_file(sd, path, meta);
  StateDict from_file = load_file(path);
  StateDict from_bytes = load(save(sd, meta));
  ASSERT_EQ(from_file.size(), sd.size());
  ASSERT_EQ(from_bytes.size(), sd.size());
  for (const auto& [k, t] : sd) {
    expect_same(from_file.at(k), t, k + " (file)");
    expect_same(from_bytes.at(k), t, k + " (bytes)");
  }
  // The file on disk and the bytes are the same serialization.
  EXPECT_EQ(read_bytes(path), save(sd, meta));
  // Keys come back sorted, as safe_open's keys().
  std::vector<std::string> keys = from_file.keys();
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(SafeTensorsFile::open(path).metadata(), meta);
}

TEST(SafeTensors, NonContiguousInputsAreWrittenInRowMajorOrder) {
  REQUIRE_JSON();
  Tensor base = sample(kFloat32, {3, 4});
  StateDict sd;
  sd.insert("t", base.t());
  sd.insert("step", base.slice(1, 0, 4, 2));
  sd.insert("expanded", sample(kInt64, {3}).unsqueeze(0).expand({2, 3}));
  Tensor leaf = sample(kFloat64, {2}).requires_grad_();
  sd.insert("leaf", leaf);
  StateDict out = load(save(sd));
  expect_same(out.at("t"), base.t().contiguous(), "t");
  expect_same(out.at("step"), base.slice(1, 0, 4, 2).contiguous(), "step");
  expect_same(out.at("expanded"), sample(kInt64, {3}).unsqueeze(0).expand({2, 3}).contiguous(), "expanded");
  expect_same(out.at("leaf"), leaf.detach(), "leaf");
  EXPECT_FALSE(out.at("leaf").requires_grad());
}

TEST(SafeTensors, BytesMatchTheReferenceLayout) {
  REQUIRE_JSON();
  // The reference writer's outputs for its own test cases: no tensors, metadata only.
  EXPECT_EQ(save(StateDict{}), cat(le(8, 8), str_bytes("{}      ")));
  EXPECT_EQ(save(StateDict{}, {{"framework", "pt"}}),
            cat(le(40, 8), str_bytes("{\"__metadata__\":{\"framework\":\"pt\"}}     ")));
  // One F32 [1, 2, 3] tensor whose header needs no padding (64 bytes).
  StateDict one;
  one.insert("attn.0", tensor<float>({0, 1, 2, 3, 4, 5}).reshape({1, 2, 3}));
  EXPECT_EQ(save(one), cat(st_file("{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],\"data_offsets\":[0,24]}}"),
                           raw<float>({0, 1, 2, 3, 4, 5})));

  // Tensors ordered by dtype alignment (I64 before F32), then by name; "__metadata__" first;
  // the 195-byte JSON padded with 5 spaces to 200.
  StateDict sd;
  sd.insert("c", tensor(3.0f, kFloat32));
  sd.insert("a", tensor<float>({1.0f, 2.0f}));
  sd.insert("b", tensor<int64_t>({1, -1}));
  const std::string json =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"b\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
      "\"c\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[24,28]}}";
  Bytes want = cat(cat(st_file(json + "     "), raw<int64_t>({1, -1})), raw<float>({1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(want.size(), 8u + 200 + 28);
  EXPECT_EQ(save(sd, {{"format", "pt"}}), want);
}

TEST(SafeTensors, ReadsFilesFromOtherWriters) {
  REQUIRE_JSON();
  // Any key order, whitespace, an unpadded odd-length header (misaligned data is copied),
  // null metadata, and fields the spec does not know (ignored, as the reference does).
  std::string header =
      " { \"w\" : {\"shape\": [2], \"data_offsets\": [8, 16], \"dtype\": \"F32\", \"extra\": 1},\n"
      "   \"__metadata__\": null, \"i\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [0, 8]}}";
  if (header.size() % 2 == 0) header += " ";
  TempDir dir;
  write_bytes(dir.file("x.safetensors"), st_file(header, cat(raw<int64_t>({-7}), raw<float>({1.5f, -2.0f}))));
  StateDict sd = load_file(dir.file("x.safetensors"));
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"i", "w"}));
  EXPECT_EQ(sd.at("w").to_vector<float>(), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(sd.at("i").item<int64_t>(), -7);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(sd.at("w").data_ptr()) % 4, 0u);
}

TEST(SafeTensors, RejectsMalformedLayouts) {
  REQUIRE_JSON();
  const std::string f32x1 = "\"dtype\":\"F32\",\"shape\":[1]";
  EXPECT_ERROR(load(Bytes{1, 2, 3}), "too short");
  EXPECT_ERROR(load(cat(le(100'000'001, 8), str_bytes("{}"))), "exceeds the limit of 100000000");
  EXPECT_ERROR(load(cat(le(64, 8), str_bytes("{}"))), "header length 64 goes beyond the end of the file");
  EXPECT_ERROR(load(cat(le(~0ull, 8), str_bytes("{}"))), "exceeds the limit");
  EXPECT_NE(st_load_error("{\"a\":").find("not valid JSON"), std::string::npos);
  EXPECT_NE(st_load_error("{} x").find("not valid JSON"), std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":\"\xff\"}").find("not valid JSON"), std::string::npos);
  EXPECT_NE(st_load_error("[1, 2]").find("must be a JSON object, got array"), std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":[]}").find("tensor 'a': expected an object"), std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}").find("tensor 'a': missing \"data_offsets\""),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", Bytes(4))
                .find("tensor 'a': unknown dtype 'F33'"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"U16\",\"shape\":[1],\"data_offsets\":[0,2]}}", Bytes(2))
                .find("dtype 'U16' is not supported by kiln"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", Bytes(4))
                .find("tensor 'a': shape entry 0 must not be negative"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", Bytes(4))
                .find("shape entry 0 must be an integer, got 1.5"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,1],\"data_offsets\":{\"b\":\"" +
                          std::string(100, 'x') + "\"}}}")
                .find("must be an array [begin, end], got {\"b\":\"" + std::string(51, 'x') + "..."),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,4]}}", Bytes(4))
                .find("must be an integer"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}")
                .find("tensor 'a': shape [4294967296, 4294967296] overflows"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904,4],\"data_offsets\":[0,0]}}")
                .find("too large for kiln"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[4,0]}}", Bytes(4))
                .find("tensor 'a': data_offsets [4, 0] must have begin <= end"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[0]}}", Bytes(4))
                .find("\"data_offsets\" must be an array [begin, end]"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[0,8]}}", Bytes(8))
                .find("tensor 'a': data_offsets [0, 8] hold 8 bytes but shape [1] of F32 needs 4"),
            std::string::npos);
  // Coverage of the data section: holes, overlaps, a late start, short and long files.
  EXPECT_NE(
      st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[0,4]},\"b\":{" + f32x1 + ",\"data_offsets\":[8,12]}}",
                    Bytes(12))
          .find("tensor 'b': data_offsets [8, 12] leave bytes 4..8 of the data unused"),
      std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[4,8]}}", Bytes(8))
                .find("tensor 'a': data_offsets [4, 8] leave bytes 0..4"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{" + f32x1 +
                              ",\"data_offsets\":[4,8]}}",
                          Bytes(8))
                .find("overlap another tensor's data, which ends at"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[0,4]},\"b\":{" + f32x1 + ",\"data_offsets\":[0,4]}}",
                          Bytes(4))
                .find("overlap"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[0,4]}}", Bytes(3))
                .find("the file is shorter than its data: the header describes 4 bytes of tensor data but only 3"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[0,4]}}", Bytes(6))
                .find("2 bytes after the last tensor's data"),
            std::string::npos);
  // Duplicate keys, at the top and inside a tensor's info; metadata that is not a string map.
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"data_offsets\":[0,4]},\"a\":{" + f32x1 + ",\"data_offsets\":[0,4]}}",
                          Bytes(4))
                .find("duplicate key 'a'"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":{" + f32x1 + ",\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", Bytes(4))
                .find("duplicate key 'dtype'"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"__metadata__\":{\"k\":1}}").find("\"__metadata__\" value of 'k' must be a string"),
            std::string::npos);
  EXPECT_NE(st_load_error("{\"__metadata__\":[]}").find("\"__metadata__\" must be an object"), std::string::npos);
  EXPECT_NE(st_load_error("{\"a\":[[[[[[[[[[1]]]]]]]]]]}").find("nests deeper"), std::string::npos);
  // BOOL bytes other than 0/1 would be undefined behaviour as C++ bools.
  EXPECT_NE(st_load_error("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}", Bytes{1, 0, 2})
                .find("tensor 'm': BOOL element 2 is 2 (must be 0 or 1)"),
            std::string::npos);
}

TEST(SafeTensors, ErrorsNameTheFileAndTensor) {
  REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  write_bytes(path, st_file("{\"layer.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", Bytes(4)));
  std::string msg = error_of([&] { (void)load_file(path); });
  EXPECT_NE(msg.find("safetensors file '" + path + "'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tensor 'layer.weight'"), std::string::npos) << msg;
  EXPECT_ERROR(load_file(dir.file("missing.safetensors")), "cannot open: No such file or directory");
  EXPECT_ERROR(load_file(dir.path.string()), "not a regular file");
  write_bytes(dir.file("empty"), {});
  EXPECT_ERROR(load_file(dir.file("empty")), "0 bytes is too short");
  StateDict ok;
  ok.insert("w", ones({2}));
  save_file(ok, dir.file("ok.safetensors"));
  EXPECT_ERROR(SafeTensorsFile::open(dir.file("ok.safetensors")).get("v"), "no tensor named 'v'");
}

// Regression: nlohmann's parser callback and StateDict::insert were each quadratic in the
// number of tensors (20 000 entries took 12 s). A wall-clock bound fails on a loaded machine,
// so the test compares 20 000 entries with 2 000 (best of three each): linear parsing costs
// about 10x more, quadratic 100x.
TEST(SafeTensors, HeaderWithManyEntriesParsesInLinearTime) {
  REQUIRE_JSON();
  TempDir dir;
  auto make = [&](int entries, Bytes& file) {
    std::string header = "{";
    Bytes data;
    for (int i = 0; i < entries; ++i) {
      if (i > 0) header += ",";
      header += "\"t" + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" +
                std::to_string(i) + "," + std::to_string(i + 1) + "]}";
      data.push_back(static_cast<uint8_t>(i % 251));
    }
    header += "}";
    file = st_file(header, data);
    return std::make_pair(header, data);
  };
  auto best_of_three = [&](const std::string& path, const Bytes& file, size_t entries) {
    double best = 1e9;
    for (int rep = 0; rep < 3; ++rep) {
      auto start = std::chrono::steady_clock::now();
      StateDict from_file = load_file(path);
      StateDict from_bytes = load(file);
      SafeTensorsFile lazy(path);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      EXPECT_EQ(from_file.size(), entries);
      EXPECT_EQ(from_bytes.size(), entries);
      EXPECT_EQ(lazy.keys().size(), entries);
    }
    return best;
  };
  Bytes small_file, file;
  (void)make(2000, small_file);
  auto [header, data] = make(20000, file);
  write_bytes(dir.file("small.safetensors"), small_file);
  const std::string path = dir.file("many.safetensors");
  write_bytes(path, file);
  const double t_small = best_of_three(dir.file("small.safetensors"), small_file, 2000);
  const double t_big = best_of_three(path, file, 20000);
  EXPECT_LT(t_big, 40 * t_small + 0.05) << "2 000 entries: " << t_small << " s, 20 000: " << t_big << " s";
  StateDict from_file = load_file(path);
  EXPECT_EQ(from_file.at("t12345").item<uint8_t>(), 12345 % 251);
  EXPECT_EQ(load(file).at("t19999").item<uint8_t>(), 19999 % 251);
  // Duplicate keys are still refused, at the top level and inside an entry.
  EXPECT_NE(st_load_error(header.substr(0, header.size() - 1) + ",\"t7\":{}}", data).find("duplicate key 't7'"),
            std::string::npos);
}

TEST(SafeTensors, MmapViewsTheMappingAndOutlivesIt) {
  REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  StateDict sd;
  sd.insert("w", sample(kFloat32, {4, 4}));
  sd.insert("b", sample(kFloat16, {3}));
  sd.insert("n", sample(kInt64, {2}));
  save_file(sd, path, {{"step", "7"}});
  Tensor w, w_again;
  {
    SafeTensorsFile f = SafeTensorsFile::open(path, /*mmap=*/true);
    EXPECT_EQ(f.keys(), (std::vector<std::string>{"b", "n", "w"}));
    EXPECT_TRUE(f.contains("w"));
    EXPECT_FALSE(f.contains("x"));
    EXPECT_EQ(f.dtype("b"), kFloat16);
    EXPECT_EQ(f.shape("w"), (std::vector<int64_t>{4, 4}));
    EXPECT_EQ(f.metadata().at("step"), "7");
    EXPECT_EQ(f.path(), path);
    w = f.get("w");
    w_again = f.get("w");
  }
  // No copy: both gets view the same mapped bytes, aligned for their dtype.
  EXPECT_EQ(w.data_ptr(), w_again.data_ptr());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w.data_ptr()) % 8, 0u);
  // The file object and the file itself are gone; the mapping lives on with the tensors.
  fs::remove(path);
  expect_same(w, sd.at("w"), "w after close");
  // Writes go to a private copy of the page, never to the file.
  save_file(sd, path);
  StateDict loaded = load_file(path, kCPU, /*mmap=*/true);
  Tensor lw = loaded.at("w");
  lw.fill_(5.0);
  EXPECT_EQ(load_file(path).at("w").to_vector<float>(), sd.at("w").to_vector<float>());
  EXPECT_EQ(lw.sum().item<float>(), 80.0f);
}

// Note [Copy by default]: what a reader returns no longer reads the file, so rewriting or
// truncating it in place (which, under a mapping, changes tensors or raises SIGBUS) is harmless.
TEST(SafeTensors, LoadedTensorsOwnTheirMemory) {
  REQUIRE_JSON();
  TempDir dir;
  const std::string st = dir.file("own.safetensors"), npy = dir.file("own.npy");
  StateDict sd;
  sd.insert("w", sample(kFloat32, {64, 64}));
  sd.insert("m", sample(kBool, {7}));
  save_file(sd, st);
  save_npy(sd.at("w"), npy);
  StateDict loaded = load_file(st);
  SafeTensorsFile lazy(st);
  Tensor got = lazy.get("w");
  Tensor from_npy = load_npy(npy);
  auto clobber = [](const std::string& path) {
    // In place, as a careless writer would: same inode, new bytes, then shorter.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const std::string junk(4096, '\x7f');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
    f.close();
    fs::resize_file(path, 3);
  };
  clobber(st);
  clobber(npy);
  expect_same(loaded.at("w"), sd.at("w"), "load_file after truncation");
  expect_same(loaded.at("m"), sd.at("m"), "bool after truncation");
  expect_same(got, sd.at("w"), "SafeTensorsFile::get after truncation");
  expect_same(from_npy, sd.at("w"), "load_npy after truncation");
  // A get() after the truncation says so rather than reading past the end.
  EXPECT_ERROR(lazy.get("m"), "was it truncated?");
  fs::resize_file(st, 0);
  EXPECT_EQ(loaded.at("w").sum().item<float>(), sd.at("w").sum().item<float>());
}

// Note [Regular files only]: a FIFO without a writer blocks open() for reading forever.
TEST(Readers, RefuseNonRegularFilesWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  nn::Linear model(2, 2);
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> readers = {
      {"load_file", [](const std::string& p) { (void)load_file(p); }},
      {"load_file mmap", [](const std::string& p) { (void)load_file(p, kCPU, /*mmap=*/true); }},
      {"SafeTensorsFile", [](const std::string& p) { (void)SafeTensorsFile::open(p); }},
      {"load_npy", [](const std::string& p) { (void)load_npy(p); }},
      {"kiln::load", [&](const std::string& p) { (void)kiln::load(p, model); }},
  };
  for (const auto& [name, read] : readers) {
    auto run = [&, &read = read](const std::string& path) { return error_of([&] { read(path); }); };
    auto pending = std::async(std::launch::async, run, fifo);
    if (pending.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << name << " blocked on a FIFO";
      // Unblock the reader: a writer that opens and closes at once gives it end-of-file.
      int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (w >= 0) ::close(w);
    }
    const std::string msg = pending.get();
    EXPECT_NE(msg.find("'" + fifo + "'"), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find("not a regular file (it is a FIFO)"), std::string::npos) << name << ": " << msg;
    if (fs::exists("/dev/null")) {
      EXPECT_NE(run("/dev/null").find("a character device"), std::string::npos) << name;
    }
    EXPECT_NE(run(dir.path.string()).find("not a regular file (it is a directory)"), std::string::npos) << name;
  }
}

TEST(SafeTensors, WritesAtomically) {
  REQUIRE_JSON();
  TempDir dir;
  const std::string path = dir.file("a.safetensors");
  StateDict v1, v2;
  v1.insert("x", ones({3}));
  v2.insert("x", zeros({5}, kInt32));
  save_file(v1, path);
  save_file(v2, path);                                                    // replaces the file
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"a.safetensors"}));  // no temp file left
  expect_same(load_file(path).at("x"), v2.at("x"), "overwritten");

  // A bad input fails before anything is written; the old file stays.
  StateDict reserved;
  reserved.insert("__metadata__", ones({1}));
  EXPECT_ERROR(save_file(reserved, path), "'__metadata__' is reserved");
  expect_same(load_file(path).at("x"), v2.at("x"), "kept");
  // A failing rename (the path is a directory) removes the temp file.
  fs::create_directory(dir.file("sub"));
  write_bytes(dir.file("sub/keep"), {1});
  EXPECT_ERROR(save_file(v1, dir.file("sub")), "cannot rename the temporary file into place");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"a.safetensors", "sub"}));
  // Unwritable places.
  EXPECT_ERROR(save_file(v1, dir.file("no/such/dir/x.safetensors")), "cannot create a file in");
  EXPECT_ERROR(save_file(v1, dir.file("a.safetensors/x")), "cannot create a file in");
  if (::geteuid() != 0) {  // root ignores directory permissions
    fs::create_directory(dir.file("ro"));
    fs::permissions(dir.file("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_ERROR(save_file(v1, dir.file("ro/x.safetensors")), "Permission denied");
    EXPECT_FALSE(fs::exists(dir.file("ro/x.safetensors")));
  }
}

TEST(SafeTensors, WithoutJsonEveryEntryPointSaysSo) {
  if (have_json()) GTEST_SKIP() << "kiln was built with nlohmann-json";
  const std::string text = "kiln was built without nlohmann-json: safetensors is not available";
  TempDir dir;
  StateDict sd;
  sd.insert("w", ones({2}));
  EXPECT_ERROR(save(sd), text);
  EXPECT_ERROR(save_file(sd, dir.file("x.safetensors")), text);
  EXPECT_TRUE(dir.entries().empty());
  write_bytes(dir.file("y.safetensors"), st_file("{}      "));
  EXPECT_ERROR(load_file(dir.file("y.safetensors")), text);
  EXPECT_ERROR(SafeTensorsFile::open(dir.file("y.safetensors")), text);
  EXPECT_ERROR(load(st_file("{}      ")), text);
}

// ---------------------------------------------------------------- .npy

namespace {
// A .npy file: magic, version, header length (2 bytes for 1.0, else 4), header text, data.
Bytes npy_file(int major, const std::string& header, const Bytes& data = {}) {
  Bytes b = str_bytes("\x93NUMPY");
  b.push_back(static_cast<uint8_t>(major));
  b.push_back(0);
  b = cat(cat(b, le(header.size(), major == 1 ? 2 : 4)), str_bytes(header));
  return cat(b, data);
}
std::string npy_error(const Bytes& b) {
  return error_of([&] { (void)load_npy(b.data(), b.size()); });
}
Tensor npy(const Bytes& b) { return load_npy(b.data(), b.size()); }
}  // namespace

TEST(Npy, RoundTripEveryDType) {
  TempDir dir;
  for (DType dt : kAllDTypes) {
    if (dt == kBFloat16) continue;  // numpy has no bfloat16
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 3}, {5}, {}, {0, 3}, {2, 0, 2}}) {
      Tensor t = shape.empty() ? sample(dt, {1}).reshape({}) : sample(dt, shape);
      std::string what = std::string(dtype_name(dt)) + " of " + std::to_string(shape.size()) + " dims";
      Bytes b = save_npy(t);
      if (shape.size() == 2 && shape[0] == 2) {  // one file per dtype: each write fsyncs
        const std::string path = dir.file("t.npy");
        save_npy(t, path);
        expect_same(load_npy(path), t, what + " (file)");
        EXPECT_EQ(b, read_bytes(path)) << what;
      }
      EXPECT_EQ((b.size() - t.nbytes()) % 64, 0u) << what;  // data starts 64-byte aligned
      expect_same(npy(b), t, what + " (bytes)");
    }
  }
  Tensor nc = sample(kFloat64, {3, 4}).t();
  expect_same(npy(save_npy(nc)), nc.contiguous(), "transposed input");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"t.npy"}));
}

TEST(Npy, BytesMatchNumpySave) {
  // numpy.save: sorted dict, 21 - len(str(shape[0])) spaces of room, spaces to a
  // 64-byte boundary, '\n'.
  const std::string dict23 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  Bytes want = npy_file(1, dict23 + std::string(20 + 38, ' ') + "\n", raw<float>({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(save_npy(arange(6, kFloat32).reshape({2, 3})), want);
  EXPECT_EQ(want.size(), 128u + 24);
  const std::string dict5 = "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }";
  EXPECT_EQ(save_npy(arange(5, kInt64)),
            npy_file(1, dict5 + std::string(20 + 40, ' ') + "\n", raw<int64_t>({0, 1, 2, 3, 4})));
  const std::string dict0 = "{'descr': '|b1', 'fortran_order': False, 'shape': (), }";
  EXPECT_EQ(save_npy(tensor(true, kBool)), npy_file(1, dict0 + std::string(62, ' ') + "\n", Bytes{1}));
}

TEST(Npy, ReadsHandBuiltFiles) {
  // Version 1.0, little-endian, the dict in another order with double quotes and no trailing comma.
  Tensor a =
      npy(npy_file(1, "{\"shape\": (2, 2), 'fortran_order': False, 'descr': '<f4'}\n", raw<float>({1.5f, -2, 3, 4})));
  expect_same(a, tensor<float>({1.5f, -2, 3, 4}).reshape({2, 2}), "v1");
  // Version 2.0 (4-byte header length), Python 2 longs, spaces and newlines between tokens.
  expect_same(npy(npy_file(2, "{ 'descr' : '<i2' ,\n 'fortran_order' : False , 'shape' : ( 3L , ) , }   \n",
                           raw<int16_t>({-1, 2, 300}))),
              tensor<int16_t>({-1, 2, 300}), "v2");
  // Version 3.0 with big-endian doubles.
  Bytes be = raw<double>({1.5, -2.0, 1e300});
  for (size_t i = 0; i < be.size(); i += 8) std::reverse(be.begin() + i, be.begin() + i + 8);
  expect_same(npy(npy_file(3, "{'descr': '>f8', 'fortran_order': False, 'shape': (3,), }\n", be)),
              tensor<double>({1.5, -2.0, 1e300}), "v3 big-endian f8");
  expect_same(npy(npy_file(1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }\n",
                           Bytes{0xFF, 0xFF, 0xFF, 0xFE, 0x00, 0x01, 0x02, 0x03})),
              tensor<int32_t>({-2, 0x010203}), "big-endian i4");
  expect_same(npy(npy_file(1, "{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }\n",
                           Bytes{0x3C, 0x00, 0xC0, 0x00})),  // 1.0, -2.0 as IEEE half
              tensor<float>({1.0f, -2.0f}).to(kFloat16), "big-endian f2");
  // One-byte types in each spelling numpy accepts.
  expect_same(npy(npy_file(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", Bytes{1, 0, 1})),
              tensor<int64_t>({1, 0, 1}).to(kBool), "|b1");
  expect_same(npy(npy_file(1, "{'descr': '?', 'fortran_order': False, 'shape': (1,), }", Bytes{1})),
              tensor<int64_t>({1}).to(kBool), "?");
  expect_same(npy(npy_file(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", Bytes{200, 7})),
              tensor<uint8_t>({200, 7}), "|u1");
  expect_same(npy(npy_file(1, "{'descr': '>i1', 'fortran_order': False, 'shape': (2,), }", Bytes{0xFF, 7})),
              tensor<int8_t>({-1, 7}), ">i1");
  // Fortran order: element [i, j] is stored at i + 2 * j; [i, j, k] at i + 2 * (j + 3 * k).
  expect_same(
      npy(npy_file(1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", raw<int32_t>({0, 3, 1, 4, 2, 5}))),
      arange(6, kInt32).reshape({2, 3}), "fortran 2-d");
  std::vector<int64_t> stored(12);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 2; ++k) stored[i + 2 * (j + 3 * k)] = i * 6 + j * 2 + k;
  Bytes fb(stored.size() * 8);
  std::memcpy(fb.data(), stored.data(), fb.size());
  Tensor f3 = npy(npy_file(1, "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 3, 2), }", fb));
  expect_same(f3, arange(12, kInt64).reshape({2, 3, 2}), "fortran 3-d");
  EXPECT_TRUE(f3.is_contiguous());
  // Empty and 0-d arrays; bytes after the data are ignored, as numpy does.
  expect_same(npy(npy_file(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (0, 4), }")), zeros({0, 4}, kFloat64),
              "empty fortran");
  expect_same(npy(npy_file(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", raw<int64_t>({42, 7}))),
              tensor(int64_t{42}, kInt64), "0-d with trailing bytes");
}

TEST(Npy, RejectsMalformedFiles) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  auto with_descr = [](const std::string& d) {
    return npy_file(1, "{'descr': '" + d + "', 'fortran_order': False, 'shape': (1,), }", Bytes(16));
  };
  auto with_shape = [](const std::string& s) {
    return npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': " + s + ", }", Bytes(16));
  };
  EXPECT_NE(npy_error(Bytes{0x93, 'N'}).find("not a .npy file"), std::string::npos);
  Bytes bad_magic = npy_file(1, f4, Bytes(16));
  bad_magic[0] = 'x';
  EXPECT_NE(npy_error(bad_magic).find("not a .npy file"), std::string::npos);
  Bytes v4 = npy_file(1, f4, Bytes(16));
  v4[6] = 4;
  EXPECT_NE(npy_error(v4).find("unsupported .npy format version 4.0"), std::string::npos);
  Bytes v11 = npy_file(1, f4, Bytes(16));
  v11[7] = 1;
  EXPECT_NE(npy_error(v11).find("version 1.1"), std::string::npos);
  Bytes long_header = npy_file(1, f4);
  long_header[8] = 0xFF;
  EXPECT_NE(npy_error(long_header).find("header length 255 goes beyond the end of the data"), std::string::npos);
  Bytes v2 = npy_file(2, f4);
  EXPECT_NE(npy_error(Bytes(v2.begin(), v2.begin() + 10)).find("truncated before"), std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, f4, Bytes(12)))
                .find("truncated: shape [2, 2] of float32 needs 16 bytes of data but only 12 follow the header"),
            std::string::npos);
  EXPECT_NE(npy_error(with_descr("|O")).find("object array"), std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (1,), }"))
                .find("structured dtypes"),
            std::string::npos);
  EXPECT_NE(npy_error(with_descr("<u2")).find("dtype '<u2' is not supported by kiln"), std::string::npos);
  EXPECT_NE(npy_error(with_descr("<c8")).find("not supported by kiln"), std::string::npos);
  EXPECT_NE(npy_error(with_descr("<U4")).find("not supported by kiln"), std::string::npos);
  EXPECT_NE(npy_error(with_descr("<f")).find("not a type kiln knows"), std::string::npos);
  EXPECT_NE(npy_error(with_descr("<f99999999999")).find("not a type kiln knows"), std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, "{'descr': '<f4', 'shape': (1,), }")).find("must have the keys"), std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}"))
                .find("unexpected key 'x'"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, "{'descr': '<f4', 'shape': (1,), 'fortran_order': False, 'shape': (1,)}"))
                .find("repeats 'shape'"),
            std::string::npos);
  EXPECT_NE(npy_error(with_shape("(3)")).find("is not a tuple"), std::string::npos);
  EXPECT_NE(npy_error(with_shape("[3]")).find("'shape' must be a tuple"), std::string::npos);
  EXPECT_NE(npy_error(with_shape("(-1,)")).find("non-negative integers"), std::string::npos);
  EXPECT_NE(npy_error(with_shape("(1.5,)")).find("expected ')'"), std::string::npos);
  EXPECT_NE(npy_error(with_shape("(01,)")).find("leading zero"), std::string::npos);
  EXPECT_NE(npy_error(with_shape("(99999999999999999999,)")).find("too large"), std::string::npos);
  EXPECT_NE(npy_error(with_shape("(4294967296, 4294967296)")).find("overflows"), std::string::npos);
  EXPECT_NE(npy_error(npy_file(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (1L,), }", Bytes(4)))
                .find("expected ')'"),
            std::string::npos);
  std::string many = "(";
  for (int i = 0; i < 65; ++i) many += "1, ";
  EXPECT_NE(npy_error(with_shape(many + ")")).find("more than 64 dimensions"), std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, "{'descr': '<f4', 'fortran_order': 1, 'shape': (1,), }", Bytes(4)))
                .find("must be True or False"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, f4 + " x", Bytes(16))).find("unexpected text after"), std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, std::string("{'descr': '<f4'\0", 16), Bytes(16))).find("unexpected byte 0x0"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, "{'descr': '<f4\\n', 'fortran_order': False, 'shape': (1,), }", Bytes(4)))
                .find("unsupported character"),
            std::string::npos);
  EXPECT_NE(npy_error(npy_file(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", Bytes{0, 7}))
                .find("bool element 1 is 7 (must be 0 or 1)"),
            std::string::npos);
  TempDir dir;
  EXPECT_ERROR(load_npy(dir.file("none.npy")), "npy file '" + dir.file("none.npy") + "': cannot open");
  EXPECT_ERROR(save_npy(ones({2}, kBFloat16)), ".npy has no bfloat16 type");
  EXPECT_ERROR(save_npy(ones({2}, kBFloat16), dir.file("x.npy")), ".npy has no bfloat16 type");
  EXPECT_ERROR(save_npy(ones(std::vector<int64_t>(65, 1))), "at most 64 dimensions");
  EXPECT_TRUE(dir.entries().empty());
}

// ---------------------------------------------------------------- DLPack

namespace {
// A producer's tensor: owns its shape, strides and buffer, and counts deleter calls.
struct Producer {
  std::vector<float> buffer;
  std::vector<int64_t> shape, strides;
  int deleted = 0;
  DLManagedTensorVersioned m{};

  Producer(std::vector<float> data, std::vector<int64_t> shp, std::vector<int64_t> str = {})
      : buffer(std::move(data)), shape(std::move(shp)), strides(std::move(str)) {
    m.version = {1, 0};
    m.manager_ctx = this;
    m.deleter = [](DLManagedTensorVersioned* self) { ++static_cast<Producer*>(self->manager_ctx)->deleted; };
    m.flags = 0;
    m.dl_tensor.data = buffer.data();
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = static_cast<int32_t>(shape.size());
    m.dl_tensor.dtype = {kDLFloat, 32, 1};
    m.dl_tensor.shape = shape.data();
    m.dl_tensor.strides = strides.empty() ? nullptr : strides.data();
    m.dl_tensor.byte_offset = 0;
  }
};
}  // namespace

TEST(DLPack, ExportViewsTheTensorAndKeepsItAlive) {
  DLManagedTensorVersioned* m = nullptr;
  {
    Tensor base = arange(6, kFloat32).reshape({2, 3});
    Tensor t = base.t();  // strides (1, 3)
    m = to_dlpack(t);
    EXPECT_EQ(m->dl_tensor.data, t.data_ptr());
    base.fill_(0.0);  // the export shares memory with the tensor
  }
  // The tensors are gone; the export still owns the storage.
  EXPECT_EQ(m->version.major, 1u);
  EXPECT_EQ(m->flags, 0u);
  const DLTensor& dl = m->dl_tensor;
  EXPECT_EQ(dl.device.device_type, kDLCPU);
  EXPECT_EQ(dl.ndim, 2);
  EXPECT_EQ(dl.dtype.code, kDLFloat);
  EXPECT_EQ(dl.dtype.bits, 32);
  EXPECT_EQ(dl.dtype.lanes, 1);
  EXPECT_EQ(std::vector<int64_t>(dl.shape, dl.shape + 2), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(std::vector<int64_t>(dl.strides, dl.strides + 2), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(dl.byte_offset, 0u);
  static_cast<float*>(dl.data)[5] = 7.0f;
  EXPECT_EQ(static_cast<float*>(dl.data)[0], 0.0f);
  m->deleter(m);

  // Every dtype's code and bits; a tensor that requires grad is refused, as in torch.
  const std::pair<DType, DLDataType> codes[] = {{kBool, {kDLBool, 8, 1}},      {kUInt8, {kDLUInt, 8, 1}},
                                                {kInt8, {kDLInt, 8, 1}},       {kInt16, {kDLInt, 16, 1}},
                                                {kInt32, {kDLInt, 32, 1}},     {kInt64, {kDLInt, 64, 1}},
                                                {kFloat16, {kDLFloat, 16, 1}}, {kBFloat16, {kDLBfloat, 16, 1}},
                                                {kFloat32, {kDLFloat, 32, 1}}, {kFloat64, {kDLFloat, 64, 1}}};
  for (auto [dt, code] : codes) {
    DLManagedTensorVersioned* e = to_dlpack(sample(dt, {2}));
    EXPECT_EQ(e->dl_tensor.dtype.code, code.code) << dt;
    EXPECT_EQ(e->dl_tensor.dtype.bits, code.bits) << dt;
    e->deleter(e);
  }
  // Giving the tensor other data later leaves the export's memory alive (checked under ASan builds).
  Tensor param = arange(3, kFloat32);
  DLManagedTensorVersioned* held = to_dlpack(param);
  param.set_data(zeros({5}));
  EXPECT_EQ(static_cast<float*>(held->dl_tensor.data)[2], 2.0f);
  held->deleter(held);
  EXPECT_ERROR(to_dlpack(ones({2}).requires_grad_()), "requires grad; use tensor.detach()");
  EXPECT_ERROR(to_dlpack(Tensor()), "undefined");
}

TEST(DLPack, ImportSharesMemoryAndCallsTheDeleterOnce) {
  Producer p({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor view;
  {
    Tensor t = from_dlpack(&p.m);
    EXPECT_EQ(t.data_ptr(), p.buffer.data());
    EXPECT_EQ(t.sizes().vec(), (std::vector<int64_t>{2, 3}));
    EXPECT_TRUE(t.is_contiguous());  // null strides mean row-major
    t.mul_(10.0);
    EXPECT_EQ(p.buffer[5], 60.0f);
    view = t.select(1, 2);
    Tensor other = t.clone();
  }
  EXPECT_EQ(p.deleted, 0);  // the view still uses the memory
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{30, 60}));
  view = Tensor();
  EXPECT_EQ(p.deleted, 1);
}

TEST(DLPack, ImportHonoursStridesAndByteOffset) {
  // A 2x2 column-major view starting at element 1 of the buffer.
  Producer p({0, 1, 2, 3, 4}, {2, 2}, {1, 2});
  p.m.dl_tensor.byte_offset = sizeof(float);
  {
    Tensor t = from_dlpack(&p.m);
    EXPECT_EQ(t.strides().vec(), (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 3, 2, 4}));
  }
  EXPECT_EQ(p.deleted, 1);
  // 0-d and empty tensors (an empty one may have a null data pointer).
  Producer scalar({2.5f}, {});
  EXPECT_EQ(from_dlpack(&scalar.m).item<float>(), 2.5f);
  EXPECT_EQ(scalar.deleted, 1);
  Producer empty_p({}, {0, 3});
  empty_p.m.dl_tensor.data = nullptr;
  EXPECT_EQ(from_dlpack(&empty_p.m).numel(), 0);
  EXPECT_EQ(empty_p.deleted, 1);
}

TEST(DLPack, RoundTripEveryDTypeIsZeroCopy) {
  for (DType dt : kAllDTypes) {
    Tensor t = sample(dt, {3, 4}).slice(1, 1, 4);  // non-contiguous
    Tensor back = from_dlpack(to_dlpack(t));
    EXPECT_EQ(back.data_ptr(), t.data_ptr()) << dt;
    EXPECT_EQ(back.strides().vec(), t.strides().vec()) << dt;
    expect_same(back, t, std::string(dtype_name(dt)));
  }
  // The import keeps the exporter's storage alive after the original tensor is gone.
  Tensor back;
  {
    Tensor t = arange(4, kInt64);
    back = from_dlpack(to_dlpack(t));
  }
  EXPECT_EQ(back.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(DLPack, ImportRejectsWhatKilnCannotViewAndLeavesOwnershipWithTheCaller) {
  auto rejected = [](const std::function<void(Producer&)>& edit, const std::string& text) {
    Producer p({1, 2, 3, 4}, {4});
    edit(p);
    EXPECT_ERROR(from_dlpack(&p.m), text);
    EXPECT_EQ(p.deleted, 0) << text;
  };
  rejected([](Producer& p) { p.m.version = {2, 0}; }, "DLPack version 2.0 is not supported");
  rejected([](Producer& p) { p.m.version = {0, 8}; }, "DLPack version 0.8 is not supported");
  if (!cuda::is_available())
    rejected([](Producer& p) { p.m.dl_tensor.device = {kDLCUDA, 0}; }, "from_dlpack: a CUDA tensor, and");
  rejected([](Producer& p) { p.m.dl_tensor.device = {kDLCUDAManaged, 0}; }, "CUDA managed memory");
  rejected([](Producer& p) { p.m.dl_tensor.device = {kDLMetal, 0}; }, "device type 8 is not supported");
  rejected([](Producer& p) { p.m.dl_tensor.dtype = {kDLFloat, 32, 4}; }, "vector dtypes (lanes = 4)");
  rejected([](Producer& p) { p.m.dl_tensor.dtype = {kDLUInt, 16, 1}; }, "dtype code 1 with 16 bits has no kiln dtype");
  rejected([](Producer& p) { p.m.dl_tensor.dtype = {kDLComplex, 64, 1}; }, "has no kiln dtype");
  rejected([](Producer& p) { p.m.dl_tensor.ndim = -1; }, "ndim is negative");
  rejected([](Producer& p) { p.m.dl_tensor.shape = nullptr; }, "shape is null");
  rejected([](Producer& p) { p.shape[0] = -4; }, "negative size");
  rejected([](Producer& p) { p.strides = {-1}, p.m.dl_tensor.strides = p.strides.data(); }, "negative strides");
  rejected([](Producer& p) { p.m.flags = KILN_DLPACK_FLAG_BITMASK_READ_ONLY; }, "read-only");
  rejected([](Producer& p) { p.m.dl_tensor.data = nullptr; }, "data is null");
  rejected([](Producer& p) { p.m.dl_tensor.byte_offset = 2; }, "not aligned to 4 bytes");
  rejected([](Producer& p) { p.shape[0] = int64_t{1} << 62; }, "too large");
  EXPECT_ERROR(from_dlpack(nullptr), "pointer is null");
  // Flags that only inform (a copy made for the consumer) are accepted.
  Producer copied({1, 2}, {2});
  copied.m.flags = KILN_DLPACK_FLAG_BITMASK_IS_COPIED;
  EXPECT_EQ(from_dlpack(&copied.m).to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(copied.deleted, 1);
}
