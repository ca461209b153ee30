#include "leanseq/data/prepare_passes.h"

#include <memory>
#include <string_view>

#include "leanseq/core/error.h"
#include "leanseq/core/line_reader.h"
#include "leanseq/core/progress.h"

namespace leanseq::data {

int64_t for_each_pair(const std::string& name, const std::string& prefix, const PrepareOptions& opt,
                      const std::function<void(const std::string&, const std::string&)>& fn,
                      const std::string& what, const KeptLines& keep) {
  const std::string sp = prefix + "." + opt.src_lang, tp = prefix + "." + opt.tgt_lang;
  const bool lm = opt.language_model;
  for (const auto& p : lm ? std::vector<std::string>{tp} : std::vector<std::string>{sp, tp}) {
    if (!io::file_exists(p)) throw DataError(p + ": file not found (" + name + " split, expected <prefix>.<lang>)");
  }
  std::unique_ptr<io::LineReader> src;
  if (!lm) src = std::make_unique<io::LineReader>(sp);
  io::LineReader tgt(tp);
  std::unique_ptr<Progress> progress;
  if (!what.empty()) {
    progress = std::make_unique<Progress>(what + " " + name, (src ? src->size() : 0) + tgt.size(), "", stderr_is_terminal());
  }
  std::string s, t;
  int64_t ns = 0, nt = 0;
  for (;;) {
    const bool has_s = !lm && src->next(s), has_t = tgt.next(t);
    if (has_s) io::check_utf8_line(sp, ++ns, s);
    if (has_t) io::check_utf8_line(tp, ++nt, t);
    if (has_t && (lm || has_s)) {
      if (keep.empty() || keep[static_cast<size_t>(nt - 1)]) fn(lm ? std::string() : s, t);
      if (progress && nt % 4096 == 0) progress->update((src ? src->bytes_read() : 0) + tgt.bytes_read());
    } else if (!has_s && !has_t) {
      break;
    }
  }
  if (!lm && ns == 0) throw DataError(sp + ": file is empty");
  if (nt == 0) throw DataError(tp + ": file is empty");
  if (!lm && ns != nt) {
    throw DataError(sp + " has " + std::to_string(ns) + " lines but " + tp + " has " + std::to_string(nt) +
                    "; the sides of a parallel corpus must align line by line");
  }
  return nt;
}

namespace {
uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x ^= x >> 30, x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27, x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

uint64_t pair_fingerprint(const std::string& s, const std::string& t) {
  const std::hash<std::string_view> h;
  return mix64(mix64(h(s)) ^ h(t)) ^ (static_cast<uint64_t>(s.size()) << 32 | t.size());
}

PiecesReader::PiecesReader(const std::string& path) : in_(path, std::ios::binary) {
  if (!in_) throw DataError(path + ": cannot open");
}

bool PiecesReader::next(std::vector<std::string>& pieces) {
  uint32_t n = 0;
  if (!in_.read(reinterpret_cast<char*>(&n), sizeof n)) return false;
  pieces.resize(n);
  for (auto& p : pieces) {
    uint32_t len = 0;
    in_.read(reinterpret_cast<char*>(&len), sizeof len);
    p.resize(len);
    in_.read(p.data(), len);
  }
  if (!in_) throw DataError("a temporary pieces file of prepare is truncated");
  return true;
}

}  // namespace leanseq::data
