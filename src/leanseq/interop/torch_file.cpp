#include "leanseq/interop/torch_file.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace leanseq::interop {

namespace {

int64_t element_size(const std::string& dtype) {
  if (dtype == "float64" || dtype == "int64") return 8;
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  return 1;
}

torch::ScalarType scalar_type(const std::string& dtype) {
  static const std::map<std::string, torch::ScalarType> t = {
      {"float32", torch::kFloat},  {"float64", torch::kDouble}, {"float16", torch::kHalf},
      {"bfloat16", torch::kBFloat16}, {"int64", torch::kLong},  {"int32", torch::kInt},
      {"int16", torch::kShort},    {"int8", torch::kChar},      {"uint8", torch::kByte},
      {"bool", torch::kBool}};
  return t.at(dtype);
}

// Every storage reference in a value, with its dtype.
void collect_storages(const PyRef& v, std::map<std::string, std::string>& out) {
  if (!v) return;
  if ((v->kind == PyValue::Kind::storage || v->kind == PyValue::Kind::tensor) && v->tensor) {
    out.emplace(v->tensor->storage_key, v->tensor->dtype);
  }
  for (const auto& it : v->items) collect_storages(it, out);
  for (const auto& [k, x] : v->entries) collect_storages(x, out);
}

constexpr char kLegacyMagic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

}  // namespace

TorchFile::TorchFile(const std::string& path) : path_(path) {
  try {
    file_ = std::make_unique<zip::Reader>(path);
  } catch (const zip::ZipError& e) {
    throw PickleError(path + ": " + e.what());
  }
  if (file_->file_size() < 4) fail("the file is too short to be a torch file");
  const std::string head = read_at(0, std::min<uint64_t>(file_->file_size(), 14));
  try {
    if (file_->starts_like_zip()) {
      zip_ = true;
      read_zip();
    } else if (head.size() == 14 && std::memcmp(head.data(), kLegacyMagic, 14) == 0) {
      read_legacy();
    } else {
      fail("neither a zip archive nor torch's legacy format");
    }
  } catch (const zip::ZipError& e) {
    fail(e.what());
  }
}

void TorchFile::fail(const std::string& what) const {
  throw PickleError(path_ + ": not a fairseq/torch checkpoint leanseq can read: " + what);
}

std::string TorchFile::read_at(uint64_t offset, uint64_t size) {
  try {
    return file_->read_at(offset, size);
  } catch (const zip::ZipError& e) {
    fail(e.what());
  }
}

void TorchFile::read_zip() {
  const auto& records = file_->records();
  std::string prefix;
  for (const auto& [name, r] : records) {
    const auto slash = name.rfind('/');
    if (name.size() >= 8 && name.compare(name.size() - 8, 8, "data.pkl") == 0 &&
        (slash == std::string::npos ? name == "data.pkl" : name.substr(slash + 1) == "data.pkl") &&
        std::count(name.begin(), name.end(), '/') <= 1) {
      prefix = slash == std::string::npos ? "" : name.substr(0, slash + 1);
    }
  }
  if (!records.count(prefix + "data.pkl")) fail("a zip archive without data.pkl");
  if (records.count(prefix + "constants.pkl")) fail("a TorchScript archive (a leanseq checkpoint?), not a pickle");
  if (auto it = records.find(prefix + "byteorder"); it != records.end()) {
    if (read_at(it->second.offset, std::min<uint64_t>(it->second.size, 16)) != "little") {
      fail("big-endian storages");
    }
  }
  const std::string bytes = file_->read(prefix + "data.pkl");
  size_t pos = 0;
  root_ = unpickle(bytes, pos, {path_});
  for (const auto& [name, r] : records) {
    if (name.rfind(prefix + "data/", 0) != 0) continue;
    if (r.method != 0) fail("record " + name + " is compressed; torch.save stores records uncompressed");
    storages_[name.substr(prefix.size() + 5)] = r;
  }
}

void TorchFile::read_legacy() {
  // The pickles come first and are small; read a prefix, and the whole file only when they are not in it.
  uint64_t have = std::min<uint64_t>(file_->file_size(), 64u << 20);
  std::string bytes = read_at(0, have);
  std::vector<PyRef> parts;
  size_t pos = 0;
  while (parts.size() < 5) {
    const size_t before = pos;
    try {
      parts.push_back(unpickle(bytes, pos, {path_}));
    } catch (const PickleError&) {
      if (have == file_->file_size()) throw;
      have = file_->file_size();
      bytes = read_at(0, have);
      pos = before;
    }
  }
  const auto& protocol = parts[1];
  if (protocol->kind != PyValue::Kind::integer || protocol->i != 1001) fail("an unknown legacy protocol version");
  const auto& sys_info = parts[2];
  if (auto little = sys_info->get("little_endian"); little && little->kind == PyValue::Kind::boolean && !little->b) {
    fail("big-endian storages");
  }
  root_ = parts[3];
  const auto& keys = parts[4];
  if (keys->kind != PyValue::Kind::list) fail("no list of storage keys after the pickled object");
  std::map<std::string, std::string> dtypes;
  collect_storages(root_, dtypes);
  uint64_t at = pos;
  for (const auto& k : keys->items) {
    if (k->kind != PyValue::Kind::str) fail("a storage key that is not a string");
    auto it = dtypes.find(k->s);
    if (it == dtypes.end()) fail("storage " + k->s + " is listed but nothing refers to it");
    const uint64_t numel = zip::little_endian(read_at(at, 8), 0, 8);
    const uint64_t esize = static_cast<uint64_t>(element_size(it->second));
    if (numel > (file_->file_size() - std::min(file_->file_size(), at + 8)) / esize) {
      fail("storage " + k->s + " claims " + std::to_string(numel) + " elements, more than the file holds (truncated?)");
    }
    storages_[k->s] = {at + 8, numel * esize};
    at += 8 + numel * esize;
  }
}

torch::Tensor TorchFile::tensor(const TensorRef& ref) {
  const auto type = scalar_type(ref.dtype);
  const int64_t esize = element_size(ref.dtype);
  auto it = loaded_.find(ref.storage_key);
  torch::Tensor storage;
  if (it != loaded_.end()) {
    storage = it->second;
    if (storage.scalar_type() != type) fail("storage " + ref.storage_key + " is read as two element types");
  } else {
    auto rec = storages_.find(ref.storage_key);
    if (rec == storages_.end()) fail("the bytes of storage " + ref.storage_key + " are missing");
    if (rec->second.size % static_cast<uint64_t>(esize) != 0) fail("storage " + ref.storage_key + " has a partial element");
    std::string bytes = read_at(rec->second.offset, rec->second.size);
    if (zip_) {
      try {
        zip::check_crc("data/" + ref.storage_key, bytes, rec->second.crc32);
      } catch (const zip::ZipError& e) {
        fail(e.what());
      }
    }
    const auto numel = static_cast<int64_t>(rec->second.size / static_cast<uint64_t>(esize));
    storage = torch::empty({numel}, torch::TensorOptions().dtype(type));
    if (numel > 0) std::memcpy(storage.data_ptr(), bytes.data(), bytes.size());
    loaded_[ref.storage_key] = storage;
  }
  // The view must lie inside its storage and have no more elements than it: every sum and product
  // below is checked, since the pickle's integers may be anything up to 2^63 - 1.
  const std::string what = "a tensor of size " + c10::str(c10::IntArrayRef(ref.sizes)) + ", stride " +
                           c10::str(c10::IntArrayRef(ref.strides)) + " and offset " + std::to_string(ref.offset) +
                           " in storage " + ref.storage_key + " of " + std::to_string(storage.numel()) + " elements";
  int64_t numel = 1, last = ref.offset;
  for (size_t d = 0; d < ref.sizes.size(); ++d) {
    if (ref.sizes[d] < 0 || ref.strides[d] < 0) fail(what + ": a negative size or stride");
    int64_t reach = 0;
    if (__builtin_mul_overflow(numel, ref.sizes[d], &numel) ||
        (ref.sizes[d] > 0 && (__builtin_mul_overflow(ref.sizes[d] - 1, ref.strides[d], &reach) ||
                              __builtin_add_overflow(last, reach, &last)))) {
      fail(what + ": its extent overflows 64 bits");
    }
  }
  if (ref.offset < 0) fail(what + ": a negative offset");
  if (numel == 0) return torch::empty(ref.sizes, storage.options());
  if (last >= storage.numel()) fail(what + ": it reaches past its storage");
  if (numel > storage.numel()) fail(what + ": more elements than its storage (overlapping strides)");
  // A view of the storage: tensors that share a storage in the file (tied embeddings) share it here.
  return storage.as_strided(ref.sizes, ref.strides, ref.offset);
}

bool is_torch_pickle_file(const std::string& path) {
  try {
    TorchFile f(path);
    return true;
  } catch (const PickleError&) {
    return false;
  }
}

}  // namespace leanseq::interop
