// The translated files of LibreTranslate's /translate_file, until /download_file fetches them: in
// a private directory of their own (core/io.h), at most max_bytes in all and max_age_s old, the
// oldest removed first; only names this store gave out are served.
#pragma once
#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "leanseq/core/io.h"

namespace leanseq::serve {

class FileStore {
 public:
  FileStore(size_t max_bytes, double max_age_s);
  // Keeps `content` as "<random id>.<filename made safe>" and returns that name; Refusal 413 when
  // it alone is larger than the store.
  std::string put(const std::string& filename, const std::string& content);
  // The file called `name` and the name to download it as (`name` without its id): Refusal 400
  // ("Invalid filename") for a name this store never gave out, 404 once it expired.
  std::pair<std::string, std::string> get(const std::string& name);
  size_t bytes() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Entry {
    std::string name;
    size_t bytes;
    Clock::time_point time;
  };
  void expire(Clock::time_point now, size_t room);  // with mutex_ held
  size_t max_bytes_;
  std::chrono::duration<double> max_age_;
  io::PrivateDirectory dir_;
  mutable std::mutex mutex_;
  std::deque<Entry> entries_;  // oldest first
  size_t bytes_ = 0;
};

// `filename`'s last path component with every byte but letters, digits, '.', '_' and '-' made '_',
// without leading dots, at most 100 bytes ("file" when nothing is left).
std::string safe_filename(const std::string& filename);

}  // namespace leanseq::serve
