// Files written by torch.save, read without Python: the zip format (torch >= 1.6: archive/data.pkl
// plus one stored record per storage) and the legacy format (a magic number, the protocol, system
// information, the pickled object, the list of storage keys, then each storage's element count and
// bytes). The pickled object goes through the restricted unpickler (interop/pickle.h); storages are
// read only when a tensor is asked for, so optimizer state and training history cost nothing.
#pragma once
#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include "leanseq/core/zip.h"
#include "leanseq/interop/pickle.h"

namespace leanseq::interop {

class TorchFile {
 public:
  // Throws PickleError naming `path` and the problem (missing, truncated, not a torch file, a
  // compressed zip record, a foreign class in the pickle, ...).
  explicit TorchFile(const std::string& path);

  const PyRef& root() const { return root_; }
  bool zip_format() const { return zip_; }
  const std::string& path() const { return path_; }
  // The tensor `ref` describes, in its stored dtype, on the CPU: a view of its storage, which is
  // read once (its CRC32 checked in a zip). The view must lie inside the storage and have no more
  // elements than it (no stride-0 blow-up), so that all the tensors read from a file take no more
  // memory than the file's storages hold.
  torch::Tensor tensor(const TensorRef& ref);

 private:
  void read_zip();
  void read_legacy();
  std::string read_at(uint64_t offset, uint64_t size);
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  std::unique_ptr<zip::Reader> file_;
  bool zip_ = false;
  PyRef root_;
  std::map<std::string, zip::Record> storages_;  // by storage key
  std::map<std::string, torch::Tensor> loaded_;
};

// Whether the file at `path` starts like a torch.save file that is not a leanseq checkpoint: a
// zip with a data.pkl record, or the legacy format's pickled magic number.
bool is_torch_pickle_file(const std::string& path);

}  // namespace leanseq::interop
