// Who may use the server and how often: API keys (LibreTranslate's `api_key`), requests per minute
// per key and per client address, and the CORS headers browsers need to call it from another
// origin. Separate from the server so that it is tested alone.
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace leanseq::serve {

struct AccessOptions {
  // One key per line, with optional limits: requests per minute, and characters per text (what
  // LibreTranslate's per-key char_limit is: it replaces --char-limit for that key's requests).
  std::string api_keys_file;
  int64_t req_limit = 0;      // requests per minute per client address without a key (0: no limit)
  std::string cors;           // allowed origins, comma-separated, or "*"; empty: no CORS headers
};

// Requests per minute: each client's count in a window of 60 s that starts with its first
// request. At most max_clients are remembered (those whose window ended go first, then the oldest).
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(size_t max_clients = 65536) : max_clients_(max_clients) {}
  // Counts a request of `who` against `per_minute` (<= 0: no limit): 0 when it may go on, else the
  // seconds until its window ends (its Retry-After).
  int64_t admit(const std::string& who, int64_t per_minute, Clock::time_point now);
  size_t clients() const;

 private:
  struct Window {
    Clock::time_point start;
    int64_t count = 0;
  };
  void make_room(Clock::time_point now);
  size_t max_clients_;
  mutable std::mutex mutex_;
  std::map<std::string, Window> windows_;
};

class Access {
 public:
  // Reads the keys file: ConfigError naming the file and line for a malformed line, a repeated key
  // or a file without keys.
  explicit Access(AccessOptions opt);
  bool keys_required() const { return !keys_.empty(); }

  // Whether a request that carries `key` (empty: none) from `address` may be served now; throws
  // Refusal 403 (no key where one is needed, or one that is not valid) or 429 (over its limit, with
  // the seconds to wait as its retry_after). A key given to a server without keys is not checked.
  void admit(const std::string& key, const std::string& address);

  // The Access-Control-Allow-Origin value for a request from `origin` ("" when no header is due).
  std::string allowed_origin(const std::string& origin) const;
  bool cors() const { return !origins_.empty(); }

  // "KEY [REQUESTS_PER_MINUTE|- [CHAR_LIMIT]]" lines (blank lines and '#' comments skipped; "-":
  // no limit of requests), as a map; `origin` names the text in errors.
  struct KeyLimits {
    int64_t per_minute = 0;   // 0: no limit
    int64_t char_limit = -1;  // -1: the server's --char-limit
  };
  static std::map<std::string, KeyLimits> parse_keys(const std::string& text, const std::string& origin);
  // The character limit of `key`'s requests: its own, else `otherwise`.
  int64_t char_limit(const std::string& key, int64_t otherwise) const;

 private:
  AccessOptions opt_;
  std::map<std::string, KeyLimits> keys_;
  std::vector<std::string> origins_;
  RateLimiter limiter_;
};

}  // namespace leanseq::serve
