// kiln::pytorch: torch.save's .pt files (tests/fixtures/torch_pt, made by
// tests/fixtures/make_torch_checkpoints.py), the restricted unpickler's refusals, and corrupt,
// truncated or lying archives, built here byte by byte.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <random>

#include "io/file_util.h"
#include "kiln/kiln.h"
#include "models/resnet.h"
#include "tests/unit/expect_error.h"
#include "tests/unit/temp_dir.h"

namespace kiln {
namespace {

using kiln::testing::expect_error;
using kiln::testing::TempDir;

std::string fixture(const std::string& name) { return std::string(KILN_TEST_FIXTURES) + "/torch_pt/" + name; }

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

TEST(TorchPt, ResNetStateDictLoadsIntoKilnsResNet) {
  auto net = std::make_shared<models::ResNet>(std::vector<int64_t>{2, 2, 2, 2}, 5, false, /*width=*/2);
  Checkpoint ck = load(fixture("resnet.pt"), *net);
  EXPECT_EQ(ck.step, 0);
  StateDict io = safetensors::load_file(fixture("resnet_io.safetensors"));
  StateDict mine = net->state_dict();
  size_t n = 0;
  for (const auto& [key, t] : io) {
    if (key.rfind("state.", 0) != 0) continue;
    ++n;
    ASSERT_TRUE(mine.contains(key.substr(6))) << key;
    EXPECT_TRUE(same_bytes(mine.at(key.substr(6)), t)) << key;
  }
  EXPECT_EQ(n, mine.size());
  EXPECT_EQ(mine.at("bn1.num_batches_tracked").dtype(), kInt64);
  EXPECT_EQ(mine.at("bn1.num_batches_tracked").item<int64_t>(), 3);
  net->eval();
  NoGradGuard no_grad;
  Tensor y = net->forward(io.at("input"));
  EXPECT_LT((y - io.at("output")).abs().max().item<float>(), 1e-4);
}

TEST(TorchPt, EdgeCasesMatchTheirContiguousCopies) {
  StateDict got = pytorch::load_file(fixture("edge.pt"));
  StateDict want = safetensors::load_file(fixture("edge.safetensors"));
  std::vector<std::string> gk = got.keys(), wk = want.keys();
  std::sort(gk.begin(), gk.end());
  EXPECT_EQ(gk, wk);
  for (const auto& [key, t] : want) {
    ASSERT_TRUE(got.contains(key)) << key;
    EXPECT_TRUE(same_bytes(got.at(key), t)) << key;
    EXPECT_TRUE(got.at(key).is_contiguous()) << key;
  }
  EXPECT_EQ(got.at("scalar").dim(), 0);
  EXPECT_EQ(got.at("noncontig").sizes().vec(), (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(got.at("expanded").sizes().vec(), (std::vector<int64_t>{3, 2}));
  // Tied weights stay one tensor; different views of one storage are separate copies.
  EXPECT_EQ(got.at("tied_a").data_ptr(), got.at("tied_b").data_ptr());
  EXPECT_NE(got.at("shared.a").data_ptr(), got.at("shared.b").data_ptr());
  // Non-tensor values are skipped; int keys (an optimizer's state) become names.
  EXPECT_FALSE(got.contains("nested.epoch"));
  EXPECT_TRUE(got.contains("by_index.1.step"));
  EXPECT_EQ(got.at("nested.list.1.0").sizes().vec(), (std::vector<int64_t>{2}));

  // read_state_dict tells the formats apart by their bytes.
  EXPECT_EQ(read_state_dict(fixture("edge.pt")).size(), got.size());
  EXPECT_EQ(read_state_dict(fixture("edge.safetensors")).size(), want.size());
}

TEST(TorchPt, RefusesCodeAndTheLegacyFormat) {
  expect_error([] { pytorch::load_file(fixture("module.pt")); },
               {"module.pt", "refusing to load global torch.nn.modules.linear.Linear", "weights_only"});
  expect_error([] { read_state_dict(fixture("legacy.pt")); }, {"legacy.pt", "legacy torch.save format"});
  expect_error([] { pytorch::load_file(fixture("edge.safetensors")); }, {"edge.safetensors", "zip"});
  // A safetensors file whose header is 640 bytes starts with 0x80 0x02, as a pickle does: still safetensors.
  TempDir dir;
  StateDict one;
  one.insert("w", ones({2}));
  for (size_t pad = 0; pad < 700; ++pad) {
    auto bytes = safetensors::save(one, {{"pad", std::string(pad, 'x')}});
    if (bytes[0] != 0x80 || bytes[1] != 0x02) continue;
    std::ofstream(dir.file("h640.safetensors"), std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    EXPECT_EQ(read_state_dict(dir.file("h640.safetensors")).size(), 1u);
    break;
  }
  ASSERT_EQ(dir.entries().size(), 1u);
  nn::Linear lin(2, 1);
  expect_error([&] { load(fixture("module.pt"), lin); }, "refusing to load global");
}

TEST(TorchPt, LoadDispatchesAndMapsKeys) {
  // The edge file's "nested.inner.w" into a module whose key is "w": strip "nested.inner.".
  struct One : nn::Module {
    Tensor w;
    One() : Module("One") { w = register_parameter("w", zeros({2, 2})); }
  } one;
  expect_error([&] { load(fixture("edge.pt"), one); }, {"edge.pt", "missing keys: w", "unexpected keys"});
  Checkpoint ck = load(fixture("edge.pt"), one, {.strict = false, .strip_prefix = "nested.inner."});
  EXPECT_TRUE(ck.missing_keys.empty());
  EXPECT_FALSE(ck.unexpected_keys.empty());
  EXPECT_TRUE(one.w.eq(ones({2, 2})).all().item<bool>());
}

// ---- hand-made archives ----

void put16(std::string& s, uint32_t v) { s.append({char(v & 0xFF), char(v >> 8 & 0xFF)}); }
void put32(std::string& s, uint32_t v) { put16(s, v & 0xFFFF), put16(s, v >> 16); }
void put64(std::string& s, uint64_t v) { put32(s, uint32_t(v)), put32(s, uint32_t(v >> 32)); }

// A zip of stored entries, as torch.save writes them; with zip64, every size and offset goes
// through the ZIP64 records.
std::vector<uint8_t> make_zip(const std::vector<std::pair<std::string, std::string>>& files, bool zip64 = false) {
  std::string out, cd;
  for (const auto& [name, data] : files) {
    const uint32_t crc = io::crc32(data.data(), data.size());
    const uint64_t local = out.size();
    out += "PK\x03\x04";
    put16(out, 20), put16(out, 0), put16(out, 0), put32(out, 0), put32(out, crc);
    put32(out, uint32_t(data.size())), put32(out, uint32_t(data.size()));
    put16(out, uint16_t(name.size())), put16(out, 0);
    out += name + data;
    std::string extra;
    if (zip64)
      put16(extra, 1), put16(extra, 24), put64(extra, data.size()), put64(extra, data.size()), put64(extra, local);
    cd += "PK\x01\x02";
    put16(cd, 45), put16(cd, 45), put16(cd, 0), put16(cd, 0), put32(cd, 0), put32(cd, crc);
    put32(cd, zip64 ? 0xFFFFFFFF : uint32_t(data.size())), put32(cd, zip64 ? 0xFFFFFFFF : uint32_t(data.size()));
    put16(cd, uint16_t(name.size())), put16(cd, uint16_t(extra.size())), put16(cd, 0), put16(cd, 0), put16(cd, 0);
    put32(cd, 0), put32(cd, zip64 ? 0xFFFFFFFF : uint32_t(local));
    cd += name + extra;
  }
  const uint64_t cd_offset = out.size();
  out += cd;
  if (zip64) {
    const uint64_t end64 = out.size();
    out += "PK\x06\x06";
    put64(out, 44), put16(out, 45), put16(out, 45), put32(out, 0), put32(out, 0);
    put64(out, files.size()), put64(out, files.size()), put64(out, cd.size()), put64(out, cd_offset);
    out += "PK\x06\x07";
    put32(out, 0), put64(out, end64), put32(out, 1);
  }
  out += "PK\x05\x06";
  put16(out, 0), put16(out, 0), put16(out, zip64 ? 0xFFFF : files.size()), put16(out, zip64 ? 0xFFFF : files.size());
  put32(out, zip64 ? 0xFFFFFFFF : uint32_t(cd.size())), put32(out, zip64 ? 0xFFFFFFFF : uint32_t(cd_offset));
  put16(out, 0);
  return {out.begin(), out.end()};
}

// A pickle of {"w": _rebuild_tensor_v2(storage '0' of `numel` floats, offset, size, stride, False, OrderedDict())},
// opcode by opcode as torch writes it (string literals with "s": they hold NULs).
std::string tensor_pickle(int64_t numel, uint8_t offset, const std::vector<uint8_t>& size,
                          const std::vector<uint8_t>& stride,
                          const std::string& rebuild = "torch._utils\n_rebuild_tensor_v2\n") {
  using namespace std::string_literals;
  std::string p = "\x80\x02}q\x00(X\x01\x00\x00\x00"s + "wq\x01" + "c" + rebuild;
  p += "q\x02((X\x07\x00\x00\x00"s + "storageq\x03" + "ctorch\nFloatStorage\nq\x04" + "X\x01\x00\x00\x00"s + "0q\x05" +
       "X\x03\x00\x00\x00"s + "cpuq\x06" + "J";
  put32(p, uint32_t(numel));
  p += "tq\x07QK";
  p += char(offset);
  p += "(";
  for (uint8_t s : size) p += "K" + std::string(1, char(s));
  p += "t(";
  for (uint8_t s : stride) p += "K" + std::string(1, char(s));
  p += "t\x89"
       "ccollections\nOrderedDict\n)Rtq\x08Ru.";
  return p;
}

std::string floats(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    float f = float(i);
    s.append(reinterpret_cast<const char*>(&f), 4);
  }
  return s;
}

TEST(TorchPt, HandMadeArchives) {
  using namespace std::string_literals;
  // A transposed view with an offset, through plain and ZIP64 records.
  for (bool zip64 : {false, true}) {
    auto z = make_zip({{"a/data.pkl", tensor_pickle(8, 1, {2, 3}, {1, 2})}, {"a/data/0", floats(8)}}, zip64);
    StateDict sd = pytorch::load(z);
    Tensor w = sd.at("w");
    ASSERT_EQ(w.sizes().vec(), (std::vector<int64_t>{2, 3}));
    std::vector<float> want{1, 3, 5, 2, 4, 6};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(w.reshape({6})[i].item<float>(), want[i]) << zip64;
  }
  auto expect_bad = [](const std::vector<uint8_t>& z, std::initializer_list<std::string> parts) {
    expect_error([&] { pytorch::load(z); }, parts);
  };
  expect_bad(make_zip({{"a/data.pkl", tensor_pickle(6, 1, {2, 3}, {1, 2})}, {"a/data/0", floats(6)}}),
             {"reaches element 6 of a storage of 6"});
  expect_bad(make_zip({{"a/data.pkl", tensor_pickle(8, 0, {2, 3}, {1, 2})}, {"a/data/0", floats(7)}}),
             {"storage '0' should hold 8 float32 elements", "28 bytes"});
  expect_bad(make_zip({{"a/data.pkl", tensor_pickle(8, 0, {2, 3}, {1, 2})}}), {"no 'a/data/0'"});
  expect_bad(make_zip({{"a/data.pkl", tensor_pickle(8, 0, {2, 3}, {1, 2}, "os\nsystem\n")}, {"a/data/0", floats(8)}}),
             {"refusing to load global os.system", "weights_only"});
  expect_bad(make_zip({{"a/other.pkl", "x"}}), {"not a torch.save file"});
  expect_bad(make_zip({{"a/data.pkl", "\x80\x02}q\x00h\x07."s}}), {"memo entry 7 was never stored"});
  expect_bad(make_zip({{"a/data.pkl", "\x80\x02}q\x00"s}}), {"without a STOP"});
  expect_bad(make_zip({{"a/data.pkl", "\x80\x02X\xff\xff\x00\x00"s + "ab."}}), {"runs past the end of the pickle"});
  expect_bad(make_zip({{"a/data.pkl",
                        "\x80\x02"
                        "ccollections\nOrderedDict\n)R."},
                       {"a/byteorder", "big"}}),
             {"byteorder is 'big'"});
  expect_bad(make_zip({{"a/data.pkl", "\x80\x02]."}}), {"holds a list, not a dict"});
  expect_bad(make_zip({{"a/data.pkl", "\x80\x02}\xfe."}}), {"unsupported pickle opcode", "0xfe"});
  expect_bad(make_zip({{"a/data.pkl", "\x80\x02}0."}}), {"pops an empty stack"});
  // A view of 2^40 elements with stride 0 over one float: refused before it is allocated.
  std::string huge = tensor_pickle(1, 0, {1}, {0});
  const std::string one_dim = "(K\x01t(K\x00t"s;
  ASSERT_NE(huge.find(one_dim), std::string::npos);
  huge.replace(huge.find(one_dim), one_dim.size(), "(\x8a\x06\x00\x00\x00\x00\x00\x01t(K\x00t"s);
  expect_bad(make_zip({{"a/data.pkl", huge}, {"a/data/0", floats(1)}}), {"more than", "overlapping views"});
  // Version records beyond what kiln reads (a newer torch's layout) are refused, naming the version.
  auto with_version = [&](const std::string& record, const std::string& value) {
    return make_zip({{"a/data.pkl", tensor_pickle(8, 0, {8}, {1})}, {"a/data/0", floats(8)}, {"a/" + record, value}});
  };
  EXPECT_EQ(pytorch::load(with_version("version", "3\n")).at("w").numel(), 8);
  EXPECT_EQ(pytorch::load(with_version(".format_version", "1")).at("w").numel(), 8);
  expect_bad(with_version("version", "11\n"), {"the archive's version is 11", "reads versions 1 to 10"});
  expect_bad(with_version(".format_version", "2"), {".format_version is 2", "reads versions 1 to 1"});
  expect_bad(with_version("version", "x"), {"the version record is 'x', expected a number"});
  // A storage byte flipped: the CRC catches it.
  auto z = make_zip({{"a/data.pkl", tensor_pickle(8, 0, {8}, {1})}, {"a/data/0", floats(8)}});
  z[z.size() / 2] ^= 0x40;
  EXPECT_THROW(pytorch::load(z), Error);
}

// Every truncation and many byte flips of a real file give a kiln::Error or a valid result,
// never a crash (the fuzzer, scripts/fuzz, goes further).
TEST(TorchPt, TruncatedAndFlippedFiles) {
  const std::vector<uint8_t> bytes = read_bytes(fixture("edge.pt"));
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t n = 0; n < bytes.size(); n += 7) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_THROW(pytorch::load(cut), Error) << n;
  }
  // A flip the reader does not notice lands in bytes it does not use (torch pads each local
  // header to align the data; timestamps): the tensors must come out unchanged.
  const StateDict clean = pytorch::load(bytes);
  std::mt19937 rng(3);
  int errors = 0;
  for (int i = 0; i < 400; ++i) {
    std::vector<uint8_t> b = bytes;
    b[rng() % b.size()] ^= uint8_t(1 + rng() % 255);
    try {
      StateDict sd = pytorch::load(b);
      ASSERT_EQ(sd.keys(), clean.keys());
      for (const auto& [k, t] : sd) ASSERT_TRUE(same_bytes(t, clean.at(k))) << k;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 100);
}

}  // namespace
}  // namespace kiln
