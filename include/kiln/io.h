// Tensor file formats: safetensors (as the `safetensors` package: save_file,
// load_file, save, load, safe_open) and NumPy's .npy. DLPack is in kiln/dlpack.h.
//
// Readers validate everything they read: a truncated, corrupt or hostile file
// gives a kiln::Error naming the file (and tensor), never a crash or an
// out-of-bounds read. Writers are atomic: the file appears complete or not at all.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/state_dict.h"
#include "kiln/tensor.h"

namespace kiln {

// ---- safetensors (kiln::safetensors, as the Python package's safetensors.torch) ----
namespace safetensors {

// The format: an 8-byte little-endian header length N, N bytes of JSON mapping
// each name to {"dtype", "shape", "data_offsets"} (plus an optional
// "__metadata__" string map), then the tensors' bytes, little-endian, row-major.

// Writes `tensors` (any device, any strides; written as contiguous CPU data) to `path`.
// Layout as the reference implementation: tensors ordered by dtype size then name,
// header padded with spaces to 8 bytes so every tensor is aligned in a mapping.
void save_file(const StateDict& tensors, const std::string& path,
               const std::map<std::string, std::string>& metadata = {});
// The same file as bytes.
std::vector<uint8_t> save(const StateDict& tensors, const std::map<std::string, std::string>& metadata = {});

// Reads every tensor of `path`, keys in sorted order (as safe_open's keys()). By default each
// tensor owns its memory (read with pread): rewriting, truncating or deleting the file afterwards
// changes nothing. mmap = true (as torch.load(mmap=True)) is zero-copy instead: the CPU tensors
// alias a private copy-on-write mapping (writes to them never reach the file) that lives until
// the last tensor using it dies. Caveat: the tensors then read the file itself, so a file
// truncated or rewritten in place while they live changes them or raises SIGBUS on their next
// read (replacing it, as save_file does, is safe). With another device, copies either way.
// Only regular files are read: a FIFO, device or directory is refused, never opened to block.
StateDict load_file(const std::string& path, Device device = kCPU, bool mmap = false);
// Reads a safetensors file held in memory; the tensors are copies (`data` may be freed after).
StateDict load(const uint8_t* data, size_t n);
inline StateDict load(const std::vector<uint8_t>& bytes) { return load(bytes.data(), bytes.size()); }

// Lazy reading, as safetensors' safe_open: the header is parsed and validated once; get()
// reads one tensor without reading the rest. The file stays open while this object (or, with
// mmap, a tensor from it) lives; `mmap` as for load_file, with the same caveat.
class SafeTensorsFile {
 public:
  static SafeTensorsFile open(const std::string& path, bool mmap = false) { return SafeTensorsFile(path, mmap); }
  explicit SafeTensorsFile(const std::string& path, bool mmap = false);

  const std::string& path() const;
  // The tensor names, sorted.
  std::vector<std::string> keys() const;
  bool contains(const std::string& key) const;
  // The "__metadata__" map (empty when the file has none).
  const std::map<std::string, std::string>& metadata() const;
  DType dtype(const std::string& key) const;
  std::vector<int64_t> shape(const std::string& key) const;
  // A CPU tensor owning a copy of the tensor's bytes; with mmap, aliasing the mapping (and
  // keeping it alive after this object is gone), copied only when the file misaligns it.
  Tensor get(const std::string& key) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace safetensors

// ---- PyTorch's torch.save files (kiln::pytorch) ----
namespace pytorch {

// torch.save (PyTorch >= 1.6) writes a zip archive: "<name>/data.pkl", a pickle of the object,
// and "<name>/data/<key>", the raw little-endian bytes of each storage. These read it with a
// restricted unpickler (Note [Restricted unpickling]): as torch.load(weights_only=True), only
// tensors, dicts, OrderedDicts, lists, tuples, numbers, strings and None are accepted; any other
// Python global is refused by name, so a file can never run code. Nested dicts and lists are
// flattened with '.' ({"model": {"fc.weight": t}} gives "model.fc.weight"); non-tensor values
// (an "epoch" number) are skipped. Every tensor is an owned contiguous CPU tensor: views sharing
// a storage and non-contiguous strides are copied out; tensors with the same view stay one tensor.
// Only stored (uncompressed) zip entries are read, as torch.save writes them; CRC-32s are checked.
StateDict load_file(const std::string& path);
StateDict load(const uint8_t* data, size_t n);
inline StateDict load(const std::vector<uint8_t>& bytes) { return load(bytes.data(), bytes.size()); }
// Whether `path` starts as a zip archive (torch.save's format). Throws for the pre-1.6 format.
bool is_torch_file(const std::string& path);

}  // namespace pytorch

// The tensors of a safetensors file or a torch.save file, told apart by their first bytes.
StateDict read_state_dict(const std::string& path);

// ---- NumPy .npy ----
// Writes format version 1.0 (2.0 when the header needs more than 65535 bytes), little-endian,
// C order, header padded to 64 bytes exactly as numpy.save. bfloat16 has no .npy type: convert first.
void save_npy(const Tensor& t, const std::string& path);
std::vector<uint8_t> save_npy(const Tensor& t);
// Reads versions 1.0, 2.0 and 3.0: bool, (u)int8, int16/32/64, float16/32/64 in either byte
// order (big-endian is swapped), C or Fortran order (returned as a contiguous C-order tensor).
// The tensor owns its memory; only a regular file is read (see load_file).
Tensor load_npy(const std::string& path);
Tensor load_npy(const uint8_t* data, size_t n);

}  // namespace kiln
