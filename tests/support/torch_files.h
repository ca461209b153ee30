// Hostile and valid torch.save files made by the tests and the fuzz seeds themselves: pickles
// from hex, a tensor's pickle with any offset, sizes and strides, and stored zip archives with
// each record's CRC32 (zlib's), or a wrong one when asked.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace leanseq::test {

struct ZipRecord {
  std::string name, bytes;
  bool wrong_crc = false;
};

inline void write_stored_zip(const std::string& path, const std::vector<ZipRecord>& records) {
  auto put = [](std::string& s, uint64_t v, int n) {
    for (int i = 0; i < n; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  std::string out, central;
  for (const auto& r : records) {
    uint32_t crc = static_cast<uint32_t>(::crc32(0, reinterpret_cast<const Bytef*>(r.bytes.data()),
                                                 static_cast<uInt>(r.bytes.size())));
    if (r.wrong_crc) crc ^= 0x5a5a5a5a;
    const uint64_t local = out.size();
    put(out, 0x04034b50, 4), put(out, 20, 2), put(out, 0, 2), put(out, 0, 2), put(out, 0, 4);
    put(out, crc, 4), put(out, r.bytes.size(), 4), put(out, r.bytes.size(), 4), put(out, r.name.size(), 2), put(out, 0, 2);
    out += r.name + r.bytes;
    put(central, 0x02014b50, 4), put(central, 20, 2), put(central, 20, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0, 4), put(central, crc, 4), put(central, r.bytes.size(), 4), put(central, r.bytes.size(), 4);
    put(central, r.name.size(), 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2), put(central, 0, 2);
    put(central, 0, 4), put(central, local, 4);
    central += r.name;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  put(out, 0x06054b50, 4), put(out, 0, 2), put(out, 0, 2), put(out, records.size(), 2), put(out, records.size(), 2);
  put(out, central.size(), 4), put(out, cd_offset, 4), put(out, 0, 2);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
}


// Bytes from their hex digits.
inline std::string pkl(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// A little-endian uint32, as BINUNICODE and LONG_BINPUT take their lengths and keys.
inline std::string u32(uint32_t v) {
  std::string s(4, '\0');
  for (int i = 0; i < 4; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

// A pickled {'w': tensor} whose storage '0' holds `numel` float32s, with the view's offset, sizes
// and strides as given (each an 8-byte LONG1, so that any int64 can be written). `legacy`: the
// persistent id of torch's legacy format (a sixth item, the view, None).
inline std::string tensor_pickle(int64_t numel, uint64_t offset, const std::vector<uint64_t>& sizes,
                                 const std::vector<uint64_t>& strides, bool legacy = false) {
  auto long8 = [](uint64_t v) {
    std::string s = "\x8a\x08";
    for (int i = 0; i < 8; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
  };
  std::string p = pkl("8002") + "}X" + u32(1) + "w" + "ctorch._utils\n_rebuild_tensor_v2\n(";
  p += "(X" + u32(7) + "storage" + "ctorch\nFloatStorage\nX" + u32(1) + "0" + "X" + u32(3) + "cpu" + long8(numel) + (legacy ? "N" : "") + "tQ";
  p += long8(offset) + "(";
  for (auto v : sizes) p += long8(v);
  p += "t(";
  for (auto v : strides) p += long8(v);
  p += std::string("t\x89") + "ccollections\nOrderedDict\n)RtRs.";
  return p;
}

// A torch.save zip archive at `path` with that pickle and the storage's bytes (1, 2, 3, ...).
inline void write_torch_zip(const std::string& path, int64_t numel, uint64_t offset, const std::vector<uint64_t>& sizes,
                            const std::vector<uint64_t>& strides, bool corrupt_storage = false) {
  std::string storage(static_cast<size_t>(numel) * 4, '\0');
  for (int64_t i = 0; i < numel; ++i) {
    const float v = static_cast<float>(i + 1);
    std::memcpy(&storage[static_cast<size_t>(i) * 4], &v, 4);
  }
  write_stored_zip(path, {{"archive/data.pkl", tensor_pickle(numel, offset, sizes, strides)},
                          {"archive/data/0", storage, corrupt_storage}});
}

}  // namespace leanseq::test
