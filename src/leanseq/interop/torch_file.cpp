#include "leanseq/interop/torch_file.h"

#include <algorithm>
#include <cstring>
#include <functional>

namespace leanseq::interop {

namespace {

uint64_t le(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

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

constexpr uint32_t kLocalHeader = 0x04034b50, kCentralHeader = 0x02014b50, kEnd = 0x06054b50;
constexpr uint32_t kEnd64 = 0x06064b50, kEnd64Locator = 0x07064b50;
constexpr char kLegacyMagic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

}  // namespace

TorchFile::TorchFile(const std::string& path) : path_(path) {
  in_.open(path, std::ios::binary);
  if (!in_) throw PickleError(path + ": cannot open the file");
  in_.seekg(0, std::ios::end);
  file_size_ = static_cast<uint64_t>(in_.tellg());
  if (file_size_ < 4) fail("the file is too short to be a torch file");
  const std::string head = read_at(0, std::min<uint64_t>(file_size_, 14));
  if (le(head, 0, 4) == kLocalHeader) {
    zip_ = true;
    read_zip();
  } else if (head.size() == 14 && std::memcmp(head.data(), kLegacyMagic, 14) == 0) {
    read_legacy();
  } else {
    fail("neither a zip archive nor torch's legacy format");
  }
}

void TorchFile::fail(const std::string& what) const {
  throw PickleError(path_ + ": not a fairseq/torch checkpoint leanseq can read: " + what);
}

std::string TorchFile::read_at(uint64_t offset, uint64_t size) {
  if (offset > file_size_ || size > file_size_ - offset) {
    fail("a record at byte " + std::to_string(offset) + " of " + std::to_string(size) + " bytes runs past the end (" +
         std::to_string(file_size_) + " bytes): truncated?");
  }
  std::string out(size, '\0');
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  in_.read(out.data(), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in_.gcount()) != size) fail("a read failed at byte " + std::to_string(offset));
  return out;
}

void TorchFile::read_zip() {
  // The end-of-central-directory record is in the last 64 KiB + 22 bytes.
  const uint64_t tail_size = std::min<uint64_t>(file_size_, 65536 + 22);
  const std::string tail = read_at(file_size_ - tail_size, tail_size);
  size_t end = std::string::npos;
  for (size_t i = tail.size() >= 22 ? tail.size() - 22 + 1 : 0; i-- > 0;) {
    if (le(tail, i, 4) == kEnd) {
      end = i;
      break;
    }
  }
  if (end == std::string::npos) fail("a zip archive without its central directory (truncated?)");
  uint64_t entries = le(tail, end + 10, 2), cd_size = le(tail, end + 12, 4), cd_offset = le(tail, end + 16, 4);
  if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {  // zip64
    if (end < 20 || le(tail, end - 20, 4) != kEnd64Locator) fail("a zip64 archive without its locator");
    const std::string rec = read_at(le(tail, end - 20 + 8, 8), 56);
    if (le(rec, 0, 4) != kEnd64) fail("a zip64 archive without its end record");
    entries = le(rec, 32, 8), cd_size = le(rec, 40, 8), cd_offset = le(rec, 48, 8);
  }
  if (entries > file_size_ / 46) fail("a central directory claiming " + std::to_string(entries) + " entries");
  const std::string cd = read_at(cd_offset, cd_size);
  std::map<std::string, Record> records;
  size_t p = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > cd.size() || le(cd, p, 4) != kCentralHeader) fail("a damaged central directory");
    const uint64_t method = le(cd, p + 10, 2), name_len = le(cd, p + 28, 2), extra_len = le(cd, p + 30, 2),
                   comment_len = le(cd, p + 32, 2);
    uint64_t csize = le(cd, p + 20, 4), usize = le(cd, p + 24, 4), local = le(cd, p + 42, 4);
    if (p + 46 + name_len + extra_len + comment_len > cd.size()) fail("a damaged central directory");
    const std::string name = cd.substr(p + 46, name_len);
    // zip64 sizes and offset, in this order, for the fields that say 0xFFFFFFFF.
    for (size_t x = p + 46 + name_len; x + 4 <= p + 46 + name_len + extra_len;) {
      const uint64_t id = le(cd, x, 2), len = le(cd, x + 2, 2);
      if (x + 4 + len > p + 46 + name_len + extra_len) fail("a damaged zip64 field");
      if (id == 1) {
        size_t q = x + 4;
        auto next = [&](uint64_t& field) {
          if (field != 0xFFFFFFFF) return;
          if (q + 8 > x + 4 + len) fail("a damaged zip64 field");
          field = le(cd, q, 8);
          q += 8;
        };
        next(usize), next(csize), next(local);
      }
      x += 4 + len;
    }
    p += 46 + name_len + extra_len + comment_len;
    if (method != 0 || csize != usize) fail("record " + name + " is compressed; torch.save stores records uncompressed");
    const std::string lh = read_at(local, 30);
    if (le(lh, 0, 4) != kLocalHeader) fail("record " + name + " has no local header");
    const uint64_t data = local + 30 + le(lh, 26, 2) + le(lh, 28, 2);
    if (data > file_size_ || usize > file_size_ - data) fail("record " + name + " runs past the end (truncated?)");
    records[name] = {data, usize};
  }
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
  const auto& pkl = records[prefix + "data.pkl"];
  const std::string bytes = read_at(pkl.offset, pkl.size);
  size_t pos = 0;
  root_ = unpickle(bytes, pos, {path_});
  for (const auto& [name, r] : records) {
    if (name.rfind(prefix + "data/", 0) == 0) storages_[name.substr(prefix.size() + 5)] = r;
  }
}

void TorchFile::read_legacy() {
  // The pickles come first and are small; read a prefix, and the whole file only when they are not in it.
  uint64_t have = std::min<uint64_t>(file_size_, 64u << 20);
  std::string bytes = read_at(0, have);
  std::vector<PyRef> parts;
  size_t pos = 0;
  while (parts.size() < 5) {
    const size_t before = pos;
    try {
      parts.push_back(unpickle(bytes, pos, {path_}));
    } catch (const PickleError&) {
      if (have == file_size_) throw;
      have = file_size_;
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
    const uint64_t numel = le(read_at(at, 8), 0, 8);
    const uint64_t esize = static_cast<uint64_t>(element_size(it->second));
    if (numel > (file_size_ - std::min(file_size_, at + 8)) / esize) {
      fail("storage " + k->s + " claims " + std::to_string(numel) + " elements, more than the file holds (truncated?)");
    }
    storages_[k->s] = {at + 8, numel * esize};
    at += 8 + numel * esize;
  }
}

torch::Tensor TorchFile::tensor(const TensorRef& ref) {
  auto it = loaded_.find(ref.storage_key);
  torch::Tensor storage;
  const int64_t esize = element_size(ref.dtype);
  if (it != loaded_.end()) {
    storage = it->second;
  } else {
    auto rec = storages_.find(ref.storage_key);
    if (rec == storages_.end()) fail("the bytes of storage " + ref.storage_key + " are missing");
    if (rec->second.size % static_cast<uint64_t>(esize) != 0) fail("storage " + ref.storage_key + " has a partial element");
    std::string bytes = read_at(rec->second.offset, rec->second.size);
    const auto numel = static_cast<int64_t>(rec->second.size / static_cast<uint64_t>(esize));
    storage = torch::empty({numel}, torch::TensorOptions().dtype(scalar_type(ref.dtype)));
    if (numel > 0) std::memcpy(storage.data_ptr(), bytes.data(), bytes.size());
    loaded_[ref.storage_key] = storage;
  }
  // The view must stay inside its storage.
  int64_t last = ref.offset;
  bool empty = false;
  for (size_t d = 0; d < ref.sizes.size(); ++d) {
    if (ref.sizes[d] == 0) empty = true;
    if (ref.sizes[d] > 0 && ref.strides[d] > (int64_t{1} << 40) / std::max<int64_t>(ref.sizes[d], 1)) {
      fail("a tensor with an impossible stride");
    }
    last += (ref.sizes[d] > 0 ? ref.sizes[d] - 1 : 0) * ref.strides[d];
  }
  if (!empty && last >= storage.numel()) {
    fail("a tensor of size " + c10::str(c10::IntArrayRef(ref.sizes)) + " reaches past its storage " + ref.storage_key);
  }
  if (empty) return torch::empty(ref.sizes, storage.options());
  return storage.as_strided(ref.sizes, ref.strides, ref.offset).clone();
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
