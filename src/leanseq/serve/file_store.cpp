#include "leanseq/serve/file_store.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "leanseq/serve/request.h"

namespace leanseq::serve {

FileStore::FileStore(size_t max_bytes, double max_age_s)
    : max_bytes_(max_bytes), max_age_(max_age_s), dir_("leanseq-files") {}

std::string safe_filename(const std::string& filename) {
  std::string name = filename.substr(filename.find_last_of("/\\") == std::string::npos ? 0 : filename.find_last_of("/\\") + 1);
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  name.erase(0, name.find_first_not_of('.'));
  if (name.size() > 100) name = name.substr(name.size() - 100);
  return name.empty() ? "file" : name;
}

void FileStore::expire(Clock::time_point now, size_t room) {
  while (!entries_.empty() && (now - entries_.front().time > max_age_ || bytes_ + room > max_bytes_)) {
    std::remove((dir_.path() + "/" + entries_.front().name).c_str());
    bytes_ -= entries_.front().bytes;
    entries_.pop_front();
  }
}

std::string FileStore::put(const std::string& filename, const std::string& content) {
  if (content.size() > max_bytes_) {
    throw Refusal{413, "the translated file has " + std::to_string(content.size()) + " bytes, more than the " +
                           std::to_string(max_bytes_) + " this server keeps (--files-max-bytes)"};
  }
  static thread_local std::mt19937_64 random{std::random_device{}()};
  const uint64_t a = random(), b = random();
  char id[40];
  std::snprintf(id, sizeof id, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(a >> 32),
                static_cast<unsigned>((a >> 16) & 0xffff), static_cast<unsigned>(a & 0xffff),
                static_cast<unsigned>(b >> 48), static_cast<unsigned long long>(b & 0xffffffffffffULL));
  const std::string name = std::string(id) + "." + safe_filename(filename);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto now = Clock::now();
  expire(now, content.size());
  io::atomic_write_text(dir_.path() + "/" + name, content);
  entries_.push_back({name, content.size(), now});
  bytes_ += content.size();
  return name;
}

std::pair<std::string, std::string> FileStore::get(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  expire(Clock::now(), 0);
  const bool ours = name.size() > 37 && name[36] == '.' && safe_filename(name) == name;
  if (!ours) throw Refusal{400, "Invalid filename"};
  const auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == name; });
  if (it == entries_.end()) throw Refusal{404, "no such file (translated files are kept for a while only)"};
  return {io::read_file(dir_.path() + "/" + name, "translated file", max_bytes_), name.substr(37)};
}

size_t FileStore::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace leanseq::serve
