// Note [Restricted unpickling] (torch_pickle.h). Opcodes as CPython's pickletools documents them.
#include "io/torch_pickle.h"

#include <bit>
#include <cstring>
#include <deque>
#include <map>
#include <tuple>

#include "core/tensor_impl.h"
#include "io/file_util.h"
#include "kiln/ops/creation.h"

namespace kiln::io {

namespace {

constexpr size_t kMaxObjects = size_t(1) << 22;  // a 10 000-tensor state_dict makes about 150 000
constexpr int kMaxDepth = 64;                    // of nested dicts and lists when flattening
constexpr size_t kMaxVisits = size_t(1) << 22;   // shared sub-objects could make flattening exponential
constexpr size_t kMaxDims = 64;

enum class Kind : uint8_t { None, Bool, Int, Float, Str, Bytes, Tuple, List, Dict, Global, Storage, Tensor };
enum class Fn : uint8_t { OrderedDict, RebuildTensor, RebuildParameter, StorageType };

const char* kind_name(Kind k) {
  static const char* names[] = {"None",  "bool", "int",  "float",  "str",     "bytes",
                                "tuple", "list", "dict", "global", "storage", "tensor"};
  return names[static_cast<int>(k)];
}

struct Obj {
  Kind kind = Kind::None;
  Fn fn = Fn::OrderedDict;  // Global
  bool b = false;
  int64_t i = 0;
  double f = 0;
  DType dtype = kFloat32;     // Global StorageType, Storage
  std::string s;              // Str, Bytes, Storage key
  std::vector<size_t> items;  // Tuple, List; Dict: key, value, key, value, ...
  Tensor tensor;              // Tensor; Storage: its elements, 1-D
};

struct StorageName {
  const char* name;
  DType dtype;
};
constexpr StorageName kStorages[] = {
    {"FloatStorage", kFloat32}, {"DoubleStorage", kFloat64}, {"HalfStorage", kFloat16}, {"BFloat16Storage", kBFloat16},
    {"LongStorage", kInt64},    {"IntStorage", kInt32},      {"ShortStorage", kInt16},  {"CharStorage", kInt8},
    {"ByteStorage", kUInt8},    {"BoolStorage", kBool},
};

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t n, const StorageLoader& storage, uint64_t max_copy_bytes,
            const std::string& where)
      : p_(data), n_(n), storage_(storage), max_copy_bytes_(max_copy_bytes), where_(where) {}

  StateDict run() {
    size_t result = run_opcodes();
    const Obj& res = objs_[result];
    KILN_CHECK(res.kind == Kind::Dict, where_, ": the pickle holds a ", kind_name(res.kind),
               ", not a dict of tensors (a state_dict)");
    StateDict out;
    flatten(result, "", 0, out);
    return out;
  }

 private:
  // ---- reading ----
  [[noreturn]] void fail_at(const std::string& msg) const {
    KILN_FAIL(where_, ": data.pkl byte ", op_pos_, " (opcode 0x", hex(op_), "): ", msg);
  }
  static std::string hex(uint8_t b) {
    const char* d = "0123456789abcdef";
    return {d[b >> 4], d[b & 15]};
  }
  const uint8_t* take(size_t k) {
    if (k > n_ - pos_) fail_at("the pickle ends in the middle of the opcode's argument (truncated file?)");
    const uint8_t* q = p_ + pos_;
    pos_ += k;
    return q;
  }
  uint64_t le(size_t k) {
    const uint8_t* q = take(k);
    uint64_t v = 0;
    for (size_t j = 0; j < k; ++j) v |= uint64_t(q[j]) << (8 * j);
    return v;
  }
  std::string bytes(uint64_t len) {
    if (len > n_ - pos_) fail_at("a string of " + std::to_string(len) + " bytes runs past the end of the pickle");
    const uint8_t* q = take(static_cast<size_t>(len));
    return std::string(reinterpret_cast<const char*>(q), static_cast<size_t>(len));
  }
  std::string line() {
    size_t start = pos_;
    while (pos_ < n_ && p_[pos_] != '\n') ++pos_;
    if (pos_ == n_) fail_at("a GLOBAL name has no end of line");
    std::string s(reinterpret_cast<const char*>(p_ + start), pos_ - start);
    ++pos_;
    return s;
  }

  // ---- objects and the stack ----
  size_t make(Obj o) {
    if (objs_.size() >= kMaxObjects) fail_at("more than " + std::to_string(kMaxObjects) + " objects");
    objs_.push_back(std::move(o));
    return objs_.size() - 1;
  }
  size_t make(Kind k) {
    Obj o;
    o.kind = k;
    return make(std::move(o));
  }
  void push(size_t id) {
    if (stack_.size() >= kMaxObjects) fail_at("the pickle stack grows past " + std::to_string(kMaxObjects));
    stack_.push_back(id);
  }
  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  size_t pop() {
    if (stack_.size() <= base()) fail_at("pops an empty stack (corrupt pickle)");
    size_t id = stack_.back();
    stack_.pop_back();
    return id;
  }
  size_t top() const {
    if (stack_.size() <= base()) fail_at("reads an empty stack (corrupt pickle)");
    return stack_.back();
  }
  std::vector<size_t> pop_mark() {
    if (marks_.empty()) fail_at("needs a MARK, but there is none (corrupt pickle)");
    std::vector<size_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  Obj& expect(size_t id, Kind k, const char* what) {
    Obj& o = objs_[id];
    if (o.kind != k) fail_at(std::string(what) + " must be a " + kind_name(k) + ", got a " + kind_name(o.kind));
    return o;
  }
  void memo_put(uint64_t index) {
    if (memo_.size() >= kMaxObjects && !memo_.count(index)) fail_at("the memo grows past its limit");
    memo_[index] = top();
  }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail_at("memo entry " + std::to_string(index) + " was never stored (corrupt pickle)");
    push(it->second);
  }
  size_t make_int(int64_t v) {
    Obj o;
    o.kind = Kind::Int;
    o.i = v;
    return make(std::move(o));
  }
  size_t make_str(Kind k, std::string s) {
    Obj o;
    o.kind = k;
    o.s = std::move(s);
    return make(std::move(o));
  }
  size_t make_tuple(std::vector<size_t> items) {
    Obj o;
    o.kind = Kind::Tuple;
    o.items = std::move(items);
    return make(std::move(o));
  }

  // ---- globals: Note [Restricted unpickling] ----
  size_t global(const std::string& module, const std::string& name) {
    Obj o;
    o.kind = Kind::Global;
    if (module == "collections" && name == "OrderedDict") {
      o.fn = Fn::OrderedDict;
    } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      o.fn = Fn::RebuildTensor;
    } else if (module == "torch._utils" && name == "_rebuild_parameter") {
      o.fn = Fn::RebuildParameter;
    } else {
      bool found = false;
      if (module == "torch")
        for (const auto& s : kStorages)
          if (name == s.name) {
            o.fn = Fn::StorageType;
            o.dtype = s.dtype;
            found = true;
          }
      if (!found)
        KILN_FAIL(where_, ": refusing to load global ", module, ".", name,
                  " (only tensors, dicts, lists, tuples, numbers, strings and OrderedDict are allowed, as PyTorch's "
                  "weights_only)");
    }
    return make(std::move(o));
  }

  // BINPERSID: ('storage', storage type, key, location, numel) -> the storage, loaded once per key.
  size_t persistent_load(size_t pid) {
    const Obj& t = expect(pid, Kind::Tuple, "a persistent id");
    if (t.items.size() != 5) fail_at("a persistent id must have 5 fields, got " + std::to_string(t.items.size()));
    const Obj& tag = expect(t.items[0], Kind::Str, "the persistent id's tag");
    if (tag.s != "storage") fail_at("unknown persistent id '" + tag.s + "' (expected 'storage')");
    const Obj& type = expect(t.items[1], Kind::Global, "the storage type");
    if (type.fn != Fn::StorageType) fail_at("the storage type is not a torch.*Storage");
    const std::string key = expect(t.items[2], Kind::Str, "the storage key").s;
    (void)expect(t.items[3], Kind::Str, "the storage location");  // "cpu", "cuda:0": read to the CPU either way
    const int64_t numel = expect(t.items[4], Kind::Int, "the storage size").i;
    if (numel < 0) fail_at("storage '" + key + "' has a negative size " + std::to_string(numel));
    auto it = storages_.find(key);
    if (it != storages_.end()) {
      const Obj& s = objs_[it->second];
      if (s.dtype != type.dtype || s.tensor.numel() != numel)
        fail_at("storage '" + key + "' is named again with another dtype or size");
      return it->second;
    }
    Obj s;
    s.kind = Kind::Storage;
    s.dtype = type.dtype;
    s.s = key;
    s.tensor = storage_(key, type.dtype, numel);
    size_t id = make(std::move(s));
    storages_.emplace(key, id);
    return id;
  }

  std::vector<int64_t> int_tuple(size_t id, const char* what) {
    const Obj& t = objs_[id];
    if (t.kind != Kind::Tuple && t.kind != Kind::List) fail_at(std::string(what) + " must be a tuple of ints");
    if (t.items.size() > kMaxDims) fail_at(std::string(what) + " has more than " + std::to_string(kMaxDims) + " dims");
    std::vector<int64_t> out;
    for (size_t e : t.items) out.push_back(expect(e, Kind::Int, what).i);
    return out;
  }

  // torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks[, metadata]).
  size_t rebuild_tensor(const Obj& args) {
    if (args.items.size() != 6 && args.items.size() != 7)
      fail_at("_rebuild_tensor_v2 takes 6 or 7 arguments, got " + std::to_string(args.items.size()));
    const Obj& st = expect(args.items[0], Kind::Storage, "_rebuild_tensor_v2's storage");
    const int64_t offset = expect(args.items[1], Kind::Int, "the storage offset").i;
    const std::vector<int64_t> sizes = int_tuple(args.items[2], "the tensor size");
    const std::vector<int64_t> strides = int_tuple(args.items[3], "the tensor stride");
    const std::string what = "tensor of storage '" + st.s + "' (size " + shape_str(sizes) + ", stride " +
                             shape_str(strides) + ", offset " + std::to_string(offset) + ")";
    if (sizes.size() != strides.size()) fail_at(what + ": size and stride have different lengths");
    if (offset < 0) fail_at(what + ": negative storage offset");
    for (size_t d = 0; d < sizes.size(); ++d)
      if (sizes[d] < 0 || strides[d] < 0) fail_at(what + ": negative size or stride");
    if (!shape_fits(sizes.data(), sizes.size(), itemsize(st.dtype))) fail_at(what + ": the size overflows");
    // The highest element the view reaches must lie in the storage.
    uint64_t numel = 1, last = static_cast<uint64_t>(offset);
    for (size_t d = 0; d < sizes.size(); ++d) {
      numel *= static_cast<uint64_t>(sizes[d]);
      uint64_t span = 0;
      if (sizes[d] > 0 &&
          (!checked_mul(static_cast<uint64_t>(sizes[d] - 1), static_cast<uint64_t>(strides[d]), &span) ||
           !checked_add(last, span, &last)))
        fail_at(what + ": the view's extent overflows");
    }
    const uint64_t storage_numel = static_cast<uint64_t>(st.tensor.numel());
    if (numel > 0 && last >= storage_numel)
      fail_at(what + ": reaches element " + std::to_string(last) + " of a storage of " + std::to_string(storage_numel));

    auto key = std::make_tuple(st.s, offset, sizes, strides);
    if (auto it = views_.find(key); it != views_.end()) return it->second;  // tied weights stay one tensor
    Obj o;
    o.kind = Kind::Tensor;
    o.tensor = materialize(st, static_cast<uint64_t>(offset), sizes, strides, numel, what);
    size_t id = make(std::move(o));
    views_.emplace(std::move(key), id);
    return id;
  }

  Tensor materialize(const Obj& st, uint64_t offset, const std::vector<int64_t>& sizes,
                     const std::vector<int64_t>& strides, uint64_t numel, const std::string& what) {
    bool contiguous = true;
    int64_t expect_stride = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      if (sizes[d] != 1 && strides[d] != expect_stride) contiguous = false;
      expect_stride *= sizes[d];
    }
    // The whole storage, in order: use its memory (the storage tensor is owned and used by no one else yet).
    if (contiguous && offset == 0 && numel == static_cast<uint64_t>(st.tensor.numel())) return st.tensor.view(sizes);
    const size_t item = itemsize(st.dtype);
    if (numel * item > max_copy_bytes_ - copied_bytes_)
      fail_at(what + ": copying the views of storages would take more than " + std::to_string(max_copy_bytes_) +
              " bytes (overlapping views?)");
    copied_bytes_ += numel * item;
    Tensor out = empty(sizes, st.dtype);
    if (numel == 0) return out;
    const auto* src = static_cast<const uint8_t*>(st.tensor.data_ptr());
    auto* dst = static_cast<uint8_t*>(out.data_ptr());
    if (contiguous) {
      std::memcpy(dst, src + offset * item, static_cast<size_t>(numel * item));
      return out;
    }
    // An odometer over the output in row-major order; the innermost dim is a strided loop.
    const size_t nd = sizes.size();
    std::vector<int64_t> idx(nd, 0);
    const int64_t inner = sizes[nd - 1], inner_stride = strides[nd - 1];
    for (uint64_t done = 0; done < numel; done += static_cast<uint64_t>(inner)) {
      uint64_t at = offset;
      for (size_t d = 0; d + 1 < nd; ++d) at += static_cast<uint64_t>(idx[d] * strides[d]);
      for (int64_t k = 0; k < inner; ++k) {
        std::memcpy(dst, src + (at + static_cast<uint64_t>(k * inner_stride)) * item, item);
        dst += item;
      }
      for (size_t d = nd - 1; d-- > 0;) {
        if (++idx[d] < sizes[d]) break;
        idx[d] = 0;
      }
    }
    return out;
  }

  size_t reduce(size_t callable, size_t args_id) {
    const Obj& fn = expect(callable, Kind::Global, "REDUCE's callable");
    const Obj& args = expect(args_id, Kind::Tuple, "REDUCE's arguments");
    switch (fn.fn) {
      case Fn::OrderedDict:
        if (!args.items.empty()) fail_at("OrderedDict(...) with arguments is not supported");
        return make(Kind::Dict);
      case Fn::RebuildTensor:
        return rebuild_tensor(args);
      case Fn::RebuildParameter:
        if (args.items.size() < 1 || args.items.size() > 3) fail_at("_rebuild_parameter takes 3 arguments");
        (void)expect(args.items[0], Kind::Tensor, "_rebuild_parameter's data");
        return args.items[0];
      case Fn::StorageType:
        break;
    }
    fail_at("a storage type cannot be called");
  }

  // ---- the opcode loop ----
  size_t run_opcodes() {
    while (pos_ < n_) {
      op_pos_ = pos_;
      op_ = p_[pos_++];
      switch (op_) {
        case 0x80:  // PROTO
          if (le(1) > 5) fail_at("pickle protocol above 5");
          break;
        case 0x95:  // FRAME (protocol 4): a length hint only
          (void)le(8);
          break;
        case '.':  // STOP
          return pop();
        case '}':  // EMPTY_DICT
          push(make(Kind::Dict));
          break;
        case ']':  // EMPTY_LIST
          push(make(Kind::List));
          break;
        case ')':  // EMPTY_TUPLE
          push(make_tuple({}));
          break;
        case '(':  // MARK
          if (marks_.size() >= kMaxObjects) fail_at("too many MARKs");
          marks_.push_back(stack_.size());
          break;
        case 'N':  // NONE
          push(none());
          break;
        case 0x88:    // NEWTRUE
        case 0x89: {  // NEWFALSE
          Obj o;
          o.kind = Kind::Bool;
          o.b = op_ == 0x88;
          o.i = o.b;
          push(make(std::move(o)));
          break;
        }
        case 'J':  // BININT
          push(make_int(static_cast<int32_t>(static_cast<uint32_t>(le(4)))));
          break;
        case 'K':  // BININT1
          push(make_int(static_cast<int64_t>(le(1))));
          break;
        case 'M':  // BININT2
          push(make_int(static_cast<int64_t>(le(2))));
          break;
        case 0x8a:    // LONG1
        case 0x8b: {  // LONG4
          uint64_t len = le(op_ == 0x8a ? 1 : 4);
          if (len > 8) fail_at("an integer of " + std::to_string(len) + " bytes does not fit in 64 bits");
          uint64_t v = le(static_cast<size_t>(len));
          if (len > 0 && len < 8 && (v >> (8 * len - 1)) & 1) v |= ~uint64_t(0) << (8 * len);  // sign-extend
          push(make_int(static_cast<int64_t>(v)));
          break;
        }
        case 'G': {  // BINFLOAT: big-endian
          uint64_t bits = 0;
          const uint8_t* q = take(8);
          for (int j = 0; j < 8; ++j) bits = bits << 8 | q[j];
          Obj o;
          o.kind = Kind::Float;
          o.f = std::bit_cast<double>(bits);
          push(make(std::move(o)));
          break;
        }
        case 'X':  // BINUNICODE
          push(make_str(Kind::Str, bytes(le(4))));
          break;
        case 0x8c:  // SHORT_BINUNICODE
          push(make_str(Kind::Str, bytes(le(1))));
          break;
        case 0x8d:  // BINUNICODE8
          push(make_str(Kind::Str, bytes(le(8))));
          break;
        case 'B':  // BINBYTES
          push(make_str(Kind::Bytes, bytes(le(4))));
          break;
        case 'C':  // SHORT_BINBYTES
          push(make_str(Kind::Bytes, bytes(le(1))));
          break;
        case 'q':  // BINPUT
          memo_put(le(1));
          break;
        case 'r':  // LONG_BINPUT
          memo_put(le(4));
          break;
        case 0x94:  // MEMOIZE
          memo_put(memo_.size());
          break;
        case 'h':  // BINGET
          memo_get(le(1));
          break;
        case 'j':  // LONG_BINGET
          memo_get(le(4));
          break;
        case 'c': {  // GLOBAL
          std::string module = line();
          std::string name = line();
          push(global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          std::string name = expect(pop(), Kind::Str, "STACK_GLOBAL's name").s;
          std::string module = expect(pop(), Kind::Str, "STACK_GLOBAL's module").s;
          push(global(module, name));
          break;
        }
        case 'Q':  // BINPERSID
          push(persistent_load(pop()));
          break;
        case 't':  // TUPLE
          push(make_tuple(pop_mark()));
          break;
        case 0x85:    // TUPLE1
        case 0x86:    // TUPLE2
        case 0x87: {  // TUPLE3
          std::vector<size_t> items(op_ - 0x84);
          for (size_t j = items.size(); j-- > 0;) items[j] = pop();
          push(make_tuple(std::move(items)));
          break;
        }
        case 'R': {  // REDUCE
          size_t args = pop();
          size_t fn = pop();
          push(reduce(fn, args));
          break;
        }
        case 's': {  // SETITEM
          size_t v = pop(), k = pop();
          Obj& d = expect(top(), Kind::Dict, "SETITEM's target");
          d.items.push_back(k);
          d.items.push_back(v);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<size_t> kv = pop_mark();
          if (kv.size() % 2) fail_at("SETITEMS needs key-value pairs, got an odd count");
          Obj& d = expect(top(), Kind::Dict, "SETITEMS' target");
          d.items.insert(d.items.end(), kv.begin(), kv.end());
          break;
        }
        case 'a': {  // APPEND
          size_t v = pop();
          expect(top(), Kind::List, "APPEND's target").items.push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<size_t> vs = pop_mark();
          Obj& l = expect(top(), Kind::List, "APPENDS' target");
          l.items.insert(l.items.end(), vs.begin(), vs.end());
          break;
        }
        case 'b': {  // BUILD: a state_dict's _metadata attribute, or a tensor's; kept out of the result
          (void)pop();
          Kind k = objs_[top()].kind;
          if (k != Kind::Dict && k != Kind::Tensor) fail_at(std::string("BUILD on a ") + kind_name(k));
          break;
        }
        case '0':  // POP
          (void)pop();
          break;
        case '1':  // POP_MARK
          (void)pop_mark();
          break;
        case '2':  // DUP
          push(top());
          break;
        default:
          fail_at("unsupported pickle opcode (kiln reads the pickles torch.save writes)");
      }
    }
    KILN_FAIL(where_, ": data.pkl ends without a STOP opcode (truncated file?)");
  }

  size_t none() {
    if (none_ == SIZE_MAX) none_ = make(Kind::None);
    return none_;
  }

  // ---- the result ----
  void flatten(size_t id, const std::string& name, int depth, StateDict& out) {
    if (++visits_ > kMaxVisits) KILN_FAIL(where_, ": the pickle's objects are shared too often to flatten");
    const Obj& o = objs_[id];
    auto child = [&](const std::string& k) { return name.empty() ? k : name + "." + k; };
    switch (o.kind) {
      case Kind::Tensor:
        out.insert(name, o.tensor);
        return;
      case Kind::Dict:
      case Kind::List:
      case Kind::Tuple:
        KILN_CHECK(depth < kMaxDepth, where_, ": dicts and lists nest deeper than ", kMaxDepth, " levels at '", name,
                   "'");
        break;
      default:
        return;  // numbers, strings, None: not tensors
    }
    if (o.kind != Kind::Dict) {
      for (size_t j = 0; j < o.items.size(); ++j) flatten(o.items[j], child(std::to_string(j)), depth + 1, out);
      return;
    }
    for (size_t j = 0; j + 1 < o.items.size(); j += 2) {
      const Obj& k = objs_[o.items[j]];
      std::string key;
      if (k.kind == Kind::Str)
        key = k.s;
      else if (k.kind == Kind::Int)
        key = std::to_string(k.i);  // an optimizer's state is keyed by parameter index
      else
        KILN_FAIL(where_, ": a dict key at '", name, "' is a ", kind_name(k.kind),
                  "; only str and int keys name tensors");
      flatten(o.items[j + 1], child(key), depth + 1, out);
    }
  }

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0, op_pos_ = 0;
  uint8_t op_ = 0;
  const StorageLoader& storage_;
  uint64_t max_copy_bytes_, copied_bytes_ = 0;
  const std::string& where_;
  std::deque<Obj> objs_;  // references stay valid as it grows
  std::vector<size_t> stack_, marks_;
  std::map<uint64_t, size_t> memo_;
  std::map<std::string, size_t> storages_;
  std::map<std::tuple<std::string, int64_t, std::vector<int64_t>, std::vector<int64_t>>, size_t> views_;
  size_t none_ = SIZE_MAX;
  size_t visits_ = 0;
};

}  // namespace

StateDict unpickle_torch(const uint8_t* data, size_t n, const StorageLoader& storage, uint64_t max_copy_bytes,
                         const std::string& where) {
  return Unpickler(data, n, storage, max_copy_bytes, where).run();
}

}  // namespace kiln::io
