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
  // The tensor `ref` describes, in its stored dtype, on the CPU; its storage is read once.
  torch::Tensor tensor(const TensorRef& ref);

 private:
  struct Record {
    uint64_t offset = 0, size = 0;  // of the bytes in the file
  };
  void read_zip();
  void read_legacy();
  std::string read_at(uint64_t offset, uint64_t size);
  [[noreturn]] void fail(const std::string& what) const;

  std::string path_;
  std::ifstream in_;
  uint64_t file_size_ = 0;
  bool zip_ = false;
  PyRef root_;
  std::map<std::string, Record> storages_;  // by storage key
  std::map<std::string, torch::Tensor> loaded_;
};

// Whether the file at `path` starts like a torch.save file that is not a leanseq checkpoint: a
// zip with a data.pkl record, or the legacy format's pickled magic number.
bool is_torch_pickle_file(const std::string& path);

}  // namespace leanseq::interop
