// A restricted reader of Python pickles (protocols 2 to 5), for the files torch.save writes. It
// builds values only: None, bools, ints, floats, strings, bytes, lists, tuples, dicts, and the
// handful of classes a fairseq checkpoint holds (collections.OrderedDict, argparse.Namespace,
// torch's storage types and tensor rebuilds), each by its own C++ code. It never imports or calls
// anything; any other GLOBAL, and any malformed or truncated stream, throws PickleError naming the
// file, the offset and what was found. Sizes read from the stream are checked against the bytes
// that are left, so a forged length cannot make it allocate more than the input holds. The value
// returned is a tree or a DAG (the memo shares values) checked as a whole: no cycles, at most
// kMaxDepth levels, and at most kMaxExpanded(values made) values when shared ones are counted each
// time they appear, so that walking it (to JSON, for storages) can blow neither stack nor heap.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "leanseq/core/error.h"

namespace leanseq::interop {

class PickleError : public Error {
 public:
  using Error::Error;
};

struct PyValue;
using PyRef = std::shared_ptr<PyValue>;

// A tensor as the pickle describes it; its bytes live elsewhere (a zip record or the tail of a
// legacy file), under `storage_key`.
struct TensorRef {
  std::string storage_key;
  std::string dtype;  // float32, float16, bfloat16, float64, int64, int32, int16, int8, uint8, bool
  int64_t storage_numel = 0;  // elements of the storage (legacy files; -1 when the pickle does not say)
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
};

struct PyValue {
  enum class Kind { none, boolean, integer, real, str, bytes, list, tuple, dict, ns, global, storage, tensor };
  Kind kind = Kind::none;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;                                // str, bytes, a global's "module.name", a storage's dtype
  std::vector<PyRef> items;                     // list, tuple
  std::vector<std::pair<PyRef, PyRef>> entries;  // dict, OrderedDict and Namespace (attribute -> value)
  std::shared_ptr<TensorRef> tensor;            // storage (offset/sizes unset) and tensor

  PyValue() = default;
  PyValue(const PyValue&) = delete;
  PyValue& operator=(const PyValue&) = delete;
  // Frees nested values without recursion, however deep they nest.
  ~PyValue();

  // Dict or Namespace lookup by string key; nullptr when absent (or not a mapping).
  PyRef get(const std::string& key) const;
  bool is_mapping() const { return kind == Kind::dict || kind == Kind::ns; }
  // A short description for error messages ("int 3", "str 'abc'", "dict of 4 entries", ...).
  std::string describe() const;
};

// The limits of a value unpickle() returns.
constexpr int kMaxDepth = 200;
constexpr uint64_t kMaxExpandedFloor = 1 << 16;
inline uint64_t kMaxExpanded(uint64_t values_made) { return std::max<uint64_t>(kMaxExpandedFloor, 4 * values_made); }

struct UnpickleOptions {
  std::string origin;  // the file name, for messages
};

// Reads one pickle from bytes[pos...]; `pos` ends after its STOP. Persistent ids must be tuples
// ("storage", <storage type>, key, location, numel[, view metadata]) as torch writes them.
PyRef unpickle(const std::string& bytes, size_t& pos, const UnpickleOptions& opt);

}  // namespace leanseq::interop
