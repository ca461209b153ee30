#include "leanseq/interop/ctranslate2_file.h"

#include <sys/stat.h>

#include <cstring>
#include <set>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"

namespace leanseq::interop {

namespace {

constexpr uint32_t kNewestBinaryVersion = 6;  // what CTranslate2 4.x writes
constexpr size_t kMaxRank = 8;
// The one scale of every int16 weight in files that stored none (CTranslate2's global int16 scale).
constexpr float kOlderInt16Scale = 1000.0f;

bool is_dir(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int64_t item_size(Ct2Type t) {
  switch (t) {
    case Ct2Type::float32:
    case Ct2Type::int32: return 4;
    case Ct2Type::int16:
    case Ct2Type::float16:
    case Ct2Type::bfloat16: return 2;
    case Ct2Type::int8: return 1;
  }
  return 0;
}

torch::ScalarType scalar_type(Ct2Type t) {
  switch (t) {
    case Ct2Type::float32: return torch::kFloat;
    case Ct2Type::int8: return torch::kChar;
    case Ct2Type::int16: return torch::kShort;
    case Ct2Type::int32: return torch::kInt;
    case Ct2Type::float16: return torch::kHalf;
    case Ct2Type::bfloat16: return torch::kBFloat16;
  }
  return torch::kFloat;
}

// Reads little-endian fields from the bytes of model.bin, each checked against what is left.
class Cursor {
 public:
  Cursor(const std::string& bytes, std::function<void(const std::string&)> fail)
      : bytes_(bytes), fail_(std::move(fail)) {}
  uint64_t left() const { return bytes_.size() - at_; }
  uint64_t at() const { return at_; }
  const char* take(uint64_t n, const char* what) {
    if (n > left()) {
      fail_("truncated: " + std::string(what) + " needs " + std::to_string(n) + " bytes at offset " +
            std::to_string(at_) + ", " + std::to_string(left()) + " left");
    }
    const char* p = bytes_.data() + at_;
    at_ += n;
    return p;
  }
  uint64_t number(int width, const char* what) {
    const auto* p = reinterpret_cast<const unsigned char*>(take(static_cast<uint64_t>(width), what));
    uint64_t v = 0;
    for (int i = width - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  std::string text(const char* what) {
    const auto n = number(2, what);
    const char* p = take(n, what);
    std::string s(p, n);
    return s.substr(0, s.find('\0'));  // stored with its terminating NUL
  }

 private:
  const std::string& bytes_;
  std::function<void(const std::string&)> fail_;
  uint64_t at_ = 0;
};

// A variable's name in a spec of revision 1 (OpenNMT-tf's own names, "transformer/encoder/w_embs:0")
// as later revisions name it, by CTranslate2's rules for such files.
std::string revision_1_name(std::string name) {
  auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = name.find(from);
    if (at != std::string::npos) name.replace(at, from.size(), to);
  };
  replace("transformer/", "");
  replace(":0", "");
  replace("w_embs", "embeddings/weight");
  replace("kernel", "weight");
  replace("LayerNorm", "layer_norm");
  replace("dense", "projection");
  replace("conv1d_", "linear_");
  replace("conv1d", "linear_0");
  if (name.find("encoder") != std::string::npos) {
    replace("multi_head", "self_attention");
  } else {
    replace("masked_multi_head", "self_attention");
    replace("multi_head", "attention");
  }
  return name;
}

std::vector<std::string> read_vocabulary(const std::string& path) {
  const std::string text = io::read_file(path, "CTranslate2 vocabulary");
  std::vector<std::string> tokens;
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      throw CheckpointError(path + ": not JSON: " + std::string(e.what()).substr(0, 200));
    }
    if (!j.is_array()) throw CheckpointError(path + ": not a JSON list of tokens");
    for (const auto& t : j) {
      if (!t.is_string()) throw CheckpointError(path + ": entry " + std::to_string(tokens.size()) + " is not a string");
      tokens.push_back(t.get<std::string>());
    }
  } else {
    tokens = io::split_lines(text, path);
  }
  if (tokens.empty()) throw CheckpointError(path + ": the vocabulary is empty");
  return tokens;
}

}  // namespace

const char* ct2_type_name(Ct2Type type) {
  switch (type) {
    case Ct2Type::float32: return "float32";
    case Ct2Type::int8: return "int8";
    case Ct2Type::int16: return "int16";
    case Ct2Type::int32: return "int32";
    case Ct2Type::float16: return "float16";
    case Ct2Type::bfloat16: return "bfloat16";
  }
  return "?";
}

bool is_ctranslate2_dir(const std::string& path) {
  if (!is_dir(path) || !io::file_exists(path + "/model.bin")) return false;
  for (const char* f : {"config.json", "shared_vocabulary.json", "shared_vocabulary.txt", "source_vocabulary.json",
                        "source_vocabulary.txt"}) {
    if (io::file_exists(path + "/" + f)) return true;
  }
  return false;
}

void Ct2Model::fail(const std::string& what) const { throw CheckpointError(bin_path_ + ": " + what); }

Ct2Model::Ct2Model(const std::string& dir) : dir_(dir), bin_path_(dir + "/model.bin") {
  if (!is_dir(dir)) throw CheckpointError(dir + ": not a directory (a CTranslate2 model is one)");
  if (!io::file_exists(bin_path_)) throw CheckpointError(dir + ": no model.bin (not a CTranslate2 model directory)");
  read_binary(io::read_file(bin_path_, "CTranslate2 model"));
  const std::string config_path = dir + "/config.json";
  if (io::file_exists(config_path)) {
    try {
      config_ = nlohmann::json::parse(io::read_file(config_path, "CTranslate2 config", uint64_t{1} << 24));
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(config_path + ": not JSON: " + std::string(e.what()).substr(0, 200));
    }
    if (!config_.is_object()) throw CheckpointError(config_path + ": not a JSON object");
  }
  read_vocabularies();
}

void Ct2Model::read_binary(const std::string& bytes) {
  Cursor in(bytes, [this](const std::string& what) { fail(what); });
  binary_version_ = static_cast<uint32_t>(in.number(4, "the binary version"));
  if (binary_version_ < 1 || binary_version_ > kNewestBinaryVersion) {
    fail("binary version " + std::to_string(binary_version_) + " is not one leanseq reads (1 to " +
         std::to_string(kNewestBinaryVersion) + ": CTranslate2 4.x writes 6)");
  }
  if (binary_version_ >= 2) {
    spec_ = in.text("the spec name");
    spec_revision_ = static_cast<uint32_t>(in.number(4, "the spec revision"));
  }
  const auto count = in.number(4, "the number of variables");
  for (uint64_t i = 0; i < count; ++i) {
    std::string name = in.text("a variable name");
    if (spec_revision_ == 1) name = revision_1_name(std::move(name));
    const std::string where = "variable " + std::to_string(i) + " ('" + name.substr(0, 200) + "')";
    const size_t rank = in.number(1, "a rank");
    if (rank > kMaxRank) fail(where + ": rank " + std::to_string(rank) + " (at most " + std::to_string(kMaxRank) + ")");
    std::vector<int64_t> shape;
    uint64_t elements = 1;
    for (size_t d = 0; d < rank; ++d) {
      const auto dim = in.number(4, "a dimension");
      shape.push_back(static_cast<int64_t>(dim));
      if (dim != 0 && elements > bytes.size() / dim) fail(where + ": its shape has more elements than the file has bytes");
      elements *= dim;
    }
    Ct2Type type;
    uint64_t num_bytes;
    if (binary_version_ >= 4) {
      const auto code = in.number(1, "a type code");
      if (code > 5) fail(where + ": unknown type code " + std::to_string(code));
      type = static_cast<Ct2Type>(code);
      num_bytes = in.number(4, "a payload size");
    } else {
      const auto width = in.number(1, "an item size");
      if (width != 4 && width != 2 && width != 1) fail(where + ": unknown item size " + std::to_string(width));
      type = width == 4 ? Ct2Type::float32 : width == 2 ? Ct2Type::int16 : Ct2Type::int8;
      const auto n = in.number(4, "an element count");
      num_bytes = n * width;  // n < 2^32, width <= 4: no overflow
    }
    if (num_bytes != elements * static_cast<uint64_t>(item_size(type))) {
      fail(where + ": " + std::to_string(num_bytes) + " bytes for " + std::to_string(elements) + " " +
           ct2_type_name(type) + " values");
    }
    const char* data = in.take(num_bytes, "a variable's values");
    if (variables_.count(name)) fail(where + ": a second variable of that name");
    auto t = torch::empty(shape, torch::TensorOptions().dtype(scalar_type(type)));
    if (num_bytes > 0) std::memcpy(t.data_ptr(), data, num_bytes);
    variables_.emplace(name, std::move(t));
    types_.emplace(std::move(name), type);
  }
  if (binary_version_ >= 3) {
    const auto n = in.number(4, "the number of aliases");
    for (uint64_t i = 0; i < n; ++i) {
      std::string alias = in.text("an alias");
      std::string target = in.text("an aliased name");
      if (variables_.count(alias) || aliases_.count(alias)) fail("alias '" + alias + "' names a second thing");
      aliases_.emplace(std::move(alias), std::move(target));
    }
  }
  for (const auto& [alias, target] : aliases_) resolve(alias);  // a dangling alias or a cycle: refused now
}

const std::string& Ct2Model::resolve(const std::string& name) const {
  const std::string* current = &name;
  std::set<std::string> seen;
  while (!variables_.count(*current)) {
    auto it = aliases_.find(*current);
    if (it == aliases_.end()) {
      if (current == &name) fail("no variable '" + name + "'");
      fail("alias '" + name + "' leads to '" + *current + "', which is not in the file");
    }
    if (!seen.insert(*current).second) fail("alias cycle through '" + *current + "'");
    current = &it->second;
  }
  return *current;
}

bool Ct2Model::has(const std::string& name) const { return variables_.count(name) || aliases_.count(name); }

const torch::Tensor& Ct2Model::stored(const std::string& name) const { return variables_.at(resolve(name)); }

Ct2Type Ct2Model::stored_type(const std::string& name) const { return types_.at(resolve(name)); }

torch::Tensor Ct2Model::float32(const std::string& name) const {
  const std::string& real_name = resolve(name);
  const auto& value = variables_.at(real_name);
  const auto type = types_.at(real_name);
  if (type == Ct2Type::float32) return value;
  if (type == Ct2Type::float16 || type == Ct2Type::bfloat16) return value.to(torch::kFloat);
  if (type == Ct2Type::int32) fail("'" + name + "' holds int32 values where weights are expected");
  const std::string scale_name = real_name + "_scale";
  if (!has(scale_name)) {
    if (type == Ct2Type::int16) return value.to(torch::kFloat) / kOlderInt16Scale;
    fail("'" + name + "' is stored in " + ct2_type_name(type) + " without its scale '" + scale_name + "'");
  }
  const auto scale = float32(scale_name);
  if (type == Ct2Type::int16) {
    if (scale.numel() != 1) fail("'" + scale_name + "' of an int16 weight is not one value");
    return value.to(torch::kFloat) / scale.reshape({});
  }
  if (value.dim() < 1 || scale.numel() != value.size(0)) {
    fail("'" + scale_name + "' has " + std::to_string(scale.numel()) + " values for " +
         (value.dim() ? std::to_string(value.size(0)) : std::string("no")) + " rows");
  }
  std::vector<int64_t> shape(static_cast<size_t>(value.dim()), 1);
  shape[0] = value.size(0);
  return value.to(torch::kFloat) / scale.reshape(shape);
}

int64_t Ct2Model::integer(const std::string& name, int64_t fallback) const {
  if (!has(name)) return fallback;
  const auto& v = stored(name);
  if (v.numel() != 1) fail("'" + name + "' is not one value");
  return v.reshape({}).to(torch::kLong).item<int64_t>();
}

double Ct2Model::real(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const auto& v = stored(name);
  if (v.numel() != 1) fail("'" + name + "' is not one value");
  return v.reshape({}).to(torch::kDouble).item<double>();
}

std::vector<std::string> Ct2Model::names() const {
  std::vector<std::string> out;
  for (const auto& [name, value] : variables_) out.push_back(name);
  return out;
}

void Ct2Model::read_vocabularies() {
  auto find = [&](const std::string& stem) -> std::string {
    for (const char* ext : {".json", ".txt"}) {
      if (io::file_exists(dir_ + "/" + stem + ext)) return dir_ + "/" + stem + ext;
    }
    return {};
  };
  if (const auto shared = find("shared_vocabulary"); !shared.empty()) {
    source_vocab_ = target_vocab_ = read_vocabulary(shared);
    shared_vocab_ = true;
    return;
  }
  if (!find("source_1_vocabulary").empty()) {
    throw CheckpointError(dir_ + ": several source vocabularies (source factors): leanseq reads models with one");
  }
  const auto source = find("source_vocabulary"), target = find("target_vocabulary");
  if (source.empty() || target.empty()) {
    throw CheckpointError(dir_ + ": no vocabulary (shared_vocabulary.json, or source_vocabulary.json and "
                          "target_vocabulary.json, or their .txt forms)");
  }
  source_vocab_ = read_vocabulary(source);
  target_vocab_ = read_vocabulary(target);
}

}  // namespace leanseq::interop
