#include "leanseq/serve/access.h"

#include <algorithm>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/serve/request.h"

namespace leanseq::serve {

namespace {
constexpr auto kWindow = std::chrono::seconds(60);
constexpr size_t kMaxKeyBytes = 256;
constexpr int64_t kMaxPerMinute = 1000000000;
constexpr int64_t kMaxCharLimit = 1000000000;
constexpr uint64_t kMaxKeysFileBytes = uint64_t{64} << 20;
}  // namespace

int64_t RateLimiter::admit(const std::string& who, int64_t per_minute, Clock::time_point now) {
  if (per_minute <= 0) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = windows_.find(who);
  if (it == windows_.end()) {
    make_room(now);
    it = windows_.emplace(who, Window{now, 0}).first;
  } else if (now - it->second.start >= kWindow) {
    it->second = Window{now, 0};
  }
  if (it->second.count >= per_minute) {
    const auto left = std::chrono::duration_cast<std::chrono::seconds>(it->second.start + kWindow - now).count();
    return std::max<int64_t>(1, left + 1);
  }
  ++it->second.count;
  return 0;
}

size_t RateLimiter::clients() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return windows_.size();
}

void RateLimiter::make_room(Clock::time_point now) {
  if (windows_.size() < max_clients_) return;
  for (auto it = windows_.begin(); it != windows_.end();) {
    it = now - it->second.start >= kWindow ? windows_.erase(it) : std::next(it);
  }
  while (windows_.size() >= max_clients_) {
    auto oldest = std::min_element(windows_.begin(), windows_.end(), [](const auto& a, const auto& b) {
      return a.second.start < b.second.start;
    });
    windows_.erase(oldest);
  }
}

std::map<std::string, Access::KeyLimits> Access::parse_keys(const std::string& text, const std::string& origin) {
  std::map<std::string, KeyLimits> keys;
  int64_t number = 0;
  const std::string format = "'KEY [REQUESTS_PER_MINUTE|- [CHAR_LIMIT]]'";
  for (const auto& line : io::split_lines(text, origin)) {
    const std::string where = origin + ":" + std::to_string(++number) + ": ";
    std::istringstream fields(line);
    std::string key, limit, chars, extra;
    fields >> key >> limit >> chars >> extra;
    if (key.empty() || key[0] == '#') continue;
    if (!extra.empty()) throw ConfigError(where + "expected " + format + ", found a fourth field");
    if (key.size() > kMaxKeyBytes) throw ConfigError(where + "a key has at most " + std::to_string(kMaxKeyBytes) + " bytes");
    for (unsigned char c : key) {
      if (c < 0x21 || c > 0x7e) throw ConfigError(where + "a key is printable ASCII without spaces");
    }
    auto number_of = [&](const std::string& v, int64_t hi, const std::string& what) {
      const bool digits = v.size() <= 10 && v.find_first_not_of("0123456789") == std::string::npos;
      if (!digits || std::stoll(v) < 1 || std::stoll(v) > hi) {
        throw ConfigError(where + "the " + what + " from 1 to " + std::to_string(hi) + ", got '" + v.substr(0, 20) + "'");
      }
      return std::stoll(v);
    };
    KeyLimits limits;
    if (!limit.empty() && limit != "-") limits.per_minute = number_of(limit, kMaxPerMinute, "limit must be a number of requests per minute");
    if (!chars.empty()) limits.char_limit = number_of(chars, kMaxCharLimit, "character limit must be a number");
    if (!keys.emplace(key, limits).second) throw ConfigError(where + "this key is listed twice");
  }
  if (keys.empty()) throw ConfigError(origin + ": no API key in the file (one " + format + " per line)");
  return keys;
}

int64_t Access::char_limit(const std::string& key, int64_t otherwise) const {
  const auto it = keys_.find(key);
  return it == keys_.end() || it->second.char_limit < 0 ? otherwise : it->second.char_limit;
}

Access::Access(AccessOptions opt) : opt_(std::move(opt)) {
  if (opt_.req_limit < 0 || opt_.req_limit > kMaxPerMinute) {
    throw ConfigError("--req-limit must be from 0 (no limit) to " + std::to_string(kMaxPerMinute) + " requests per minute");
  }
  if (!opt_.api_keys_file.empty()) {
    // The keys file is configuration: whatever is wrong with it is a usage error (exit 2).
    try {
      keys_ = parse_keys(io::read_file(opt_.api_keys_file, "API keys file (--api-keys)", kMaxKeysFileBytes),
                         opt_.api_keys_file);
    } catch (const DataError& e) {
      throw ConfigError(e.what());
    }
  }
  std::istringstream list(opt_.cors);
  for (std::string o; std::getline(list, o, ',');) {
    o.erase(0, o.find_first_not_of(' '));
    o.erase(o.find_last_not_of(' ') + 1);
    if (o.empty()) continue;
    if (o != "*" && o.find("://") == std::string::npos) {
      throw ConfigError("--cors: '" + o + "' is not an origin (scheme://host[:port], or *)");
    }
    origins_.push_back(o);
  }
}

void Access::admit(const std::string& key, const std::string& address) {
  const auto now = RateLimiter::Clock::now();
  if (!keys_.empty() && !key.empty()) {
    const auto it = keys_.find(key);
    if (it == keys_.end()) throw Refusal{403, "Invalid API key"};
    const int64_t retry_after = limiter_.admit("key " + key, it->second.per_minute, now);
    if (retry_after > 0) {
      throw Refusal{429,
                    "too many requests: this API key may make " + std::to_string(it->second.per_minute) + " per minute; retry in " +
                        std::to_string(retry_after) + " s",
                    retry_after};
    }
    return;
  }
  if (!keys_.empty() && opt_.req_limit == 0) {
    throw Refusal{403, "an API key is required: give it as api_key"};
  }
  const int64_t retry_after = limiter_.admit("address " + address, opt_.req_limit, now);
  if (retry_after > 0) {
    throw Refusal{429,
                  "too many requests: " + std::to_string(opt_.req_limit) + " per minute from one address" +
                      (keys_.empty() ? "" : " without an API key") + "; retry in " + std::to_string(retry_after) + " s",
                  retry_after};
  }
}

std::string Access::allowed_origin(const std::string& origin) const {
  for (const auto& o : origins_) {
    if (o == "*") return "*";
    if (o == origin) return origin;
  }
  return "";
}

}  // namespace leanseq::serve
