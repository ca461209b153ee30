// CTranslate2 model directories read without CTranslate2: model.bin (binary versions 1 to 6: a
// version, the spec's name and revision, the variables, each with its name, shape, type and bytes,
// then aliases from one name to another; revision 1's OpenNMT-tf names renamed as later revisions
// name them), config.json, and the vocabularies
// (shared_vocabulary.json/.txt, or source_ and target_vocabulary). Every size the file declares is
// checked against the bytes left before anything is allocated from it, so that a truncated or
// forged file is refused with one line naming it.
#pragma once
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

namespace leanseq::interop {

// CTranslate2's type codes (include/ctranslate2/types.h), as model.bin stores them.
enum class Ct2Type : uint8_t { float32 = 0, int8 = 1, int16 = 2, int32 = 3, float16 = 4, bfloat16 = 5 };
const char* ct2_type_name(Ct2Type type);

class Ct2Model {
 public:
  // Reads `dir`/model.bin, config.json (optional) and the vocabularies. CheckpointError naming the
  // file and the problem: missing, truncated, a size past the end, an unknown type code, a payload
  // that does not match its shape, a duplicate name, an alias to nothing or an alias cycle.
  explicit Ct2Model(const std::string& dir);

  const std::string& dir() const { return dir_; }
  uint32_t binary_version() const { return binary_version_; }
  const std::string& spec() const { return spec_; }
  uint32_t spec_revision() const { return spec_revision_; }
  const nlohmann::json& config() const { return config_; }
  const std::vector<std::string>& source_vocabulary() const { return source_vocab_; }
  const std::vector<std::string>& target_vocabulary() const { return target_vocab_; }
  bool shared_vocabulary() const { return shared_vocab_; }

  // Whether a variable (or an alias of one) has this name.
  bool has(const std::string& name) const;
  // The variable as stored (aliases followed); CheckpointError naming model.bin when absent.
  const torch::Tensor& stored(const std::string& name) const;
  Ct2Type stored_type(const std::string& name) const;
  // The variable as float32: float16 and bfloat16 widened, int8 and int16 weights divided by
  // their `<name>_scale` (per row for int8, one value for int16; 1000 for an int16 weight of an
  // older file without one), as CTranslate2 dequantizes.
  torch::Tensor float32(const std::string& name) const;
  // A scalar attribute (rank 0 or one element) as an integer, or `fallback` when absent.
  int64_t integer(const std::string& name, int64_t fallback) const;
  // A scalar attribute as a float, or `fallback` when absent.
  double real(const std::string& name, double fallback) const;
  // The names of the stored variables (not the aliases).
  std::vector<std::string> names() const;

 private:
  void read_binary(const std::string& bytes);
  void read_vocabularies();
  const std::string& resolve(const std::string& name) const;
  [[noreturn]] void fail(const std::string& what) const;
  std::string dir_, bin_path_;
  uint32_t binary_version_ = 0, spec_revision_ = 1;
  std::string spec_;
  nlohmann::json config_ = nlohmann::json::object();
  std::map<std::string, torch::Tensor> variables_;
  std::map<std::string, Ct2Type> types_;
  std::map<std::string, std::string> aliases_;  // alias -> the variable it names
  std::vector<std::string> source_vocab_, target_vocab_;
  bool shared_vocab_ = false;
};

// Whether `path` is a directory holding a CTranslate2 model (model.bin beside config.json or a
// vocabulary).
bool is_ctranslate2_dir(const std::string& path);

}  // namespace leanseq::interop
