// API keys, request limits and CORS origins (serve/access.h), without a server: the keys file's
// format and its errors, which requests are admitted, refused (403) or told to wait (429), and the
// limiter's memory bound.
#include <gtest/gtest.h>

#include <fstream>

#include "leanseq/core/error.h"
#include "leanseq/serve/access.h"
#include "leanseq/serve/request.h"
#include "support/fixtures.h"

using leanseq::ConfigError;
using leanseq::serve::Access;
using leanseq::serve::AccessOptions;
using leanseq::serve::RateLimiter;
using leanseq::serve::Refusal;

namespace {
// The status of a refused request, or 0 when it was admitted (and its retry_after in `retry`).
int status_of(Access& access, const std::string& key, const std::string& address, int64_t* retry = nullptr) {
  try {
    access.admit(key, address);
    return 0;
  } catch (const Refusal& r) {
    if (retry) *retry = r.retry_after;
    return r.status;
  }
}

std::string config_error(const std::string& text) {
  try {
    Access::parse_keys(text, "keys.txt");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(ApiKeys, FileFormatAndItsErrors) {
  const auto keys = Access::parse_keys("# keys\nalpha 3\n\n  beta\ngamma 1000000000\r\ndelta - 5000\neps 7 20\n", "keys.txt");
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_EQ(keys.at("alpha").per_minute, 3);
  EXPECT_EQ(keys.at("alpha").char_limit, -1);
  EXPECT_EQ(keys.at("beta").per_minute, 0);
  EXPECT_EQ(keys.at("gamma").per_minute, 1000000000);
  EXPECT_EQ(keys.at("delta").per_minute, 0);
  EXPECT_EQ(keys.at("delta").char_limit, 5000);
  EXPECT_EQ(keys.at("eps").per_minute, 7);
  EXPECT_EQ(keys.at("eps").char_limit, 20);
  EXPECT_EQ(config_error("alpha 3\nalpha 4\n"), "keys.txt:2: this key is listed twice");
  EXPECT_EQ(config_error("alpha 3 4 5\n"), "keys.txt:1: expected 'KEY [REQUESTS_PER_MINUTE|- [CHAR_LIMIT]]', found a fourth field");
  EXPECT_EQ(config_error("alpha 3 0\n"), "keys.txt:1: the character limit must be a number from 1 to 1000000000, got '0'");
  EXPECT_NE(config_error("alpha 0\n").find("keys.txt:1: the limit must be a number of requests per minute"),
            std::string::npos);
  EXPECT_NE(config_error("alpha -5\n").find("got '-5'"), std::string::npos);
  EXPECT_NE(config_error("alpha 99999999999999999999\n").find("keys.txt:1: the limit"), std::string::npos);
  EXPECT_EQ(config_error("al\x01pha\n"), "keys.txt:1: a key is printable ASCII without spaces");
  EXPECT_EQ(config_error(std::string(300, 'k') + "\n"), "keys.txt:1: a key has at most 256 bytes");
  EXPECT_EQ(config_error("# nothing\n\n"), "keys.txt: no API key in the file (one 'KEY [REQUESTS_PER_MINUTE|- [CHAR_LIMIT]]' per line)");
}

TEST(ApiKeys, WrongKeysAreRefusedAndEachKeyHasItsLimit) {
  const auto dir = leanseq::test::temp_dir("access");
  std::ofstream(dir + "/keys.txt") << "limited 2\nfree\nshort - 100\n";
  AccessOptions opt;
  opt.api_keys_file = dir + "/keys.txt";
  Access access(opt);
  EXPECT_EQ(access.char_limit("short", 5000), 100);  // the key's own character limit
  EXPECT_EQ(access.char_limit("free", 5000), 5000);
  EXPECT_EQ(access.char_limit("", -1), -1);
  EXPECT_EQ(status_of(access, "wrong", "10.0.0.1"), 403);
  EXPECT_EQ(status_of(access, "", "10.0.0.1"), 403);  // keys and no keyless limit: a key is needed
  EXPECT_EQ(status_of(access, "limited", "10.0.0.1"), 0);
  EXPECT_EQ(status_of(access, "limited", "10.0.0.2"), 0);  // the key's limit, whatever the address
  int64_t retry = 0;
  EXPECT_EQ(status_of(access, "limited", "10.0.0.3", &retry), 429);
  EXPECT_GE(retry, 1);
  EXPECT_LE(retry, 61);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(status_of(access, "free", "10.0.0.1"), 0);
  // Keyless requests at --req-limit per address.
  opt.req_limit = 2;
  Access with_keyless(opt);
  EXPECT_EQ(status_of(with_keyless, "", "10.0.0.1"), 0);
  EXPECT_EQ(status_of(with_keyless, "", "10.0.0.1"), 0);
  EXPECT_EQ(status_of(with_keyless, "", "10.0.0.1"), 429);
  EXPECT_EQ(status_of(with_keyless, "", "10.0.0.2"), 0);
  EXPECT_EQ(status_of(with_keyless, "wrong", "10.0.0.2"), 403);

  opt.api_keys_file = dir + "/missing.txt";
  EXPECT_THROW(Access{opt}, ConfigError);
  opt.api_keys_file.clear();
  opt.req_limit = -1;
  EXPECT_THROW(Access{opt}, ConfigError);
  // Without keys, a key is not checked and no limit applies unless --req-limit is set.
  Access open(AccessOptions{});
  for (int i = 0; i < 100; ++i) ASSERT_EQ(status_of(open, i % 2 ? "anything" : "", "10.0.0.1"), 0);
}

TEST(RateLimiter, AWindowOfAMinuteAndABoundedNumberOfClients) {
  RateLimiter limiter(4);
  const auto t0 = RateLimiter::Clock::now();
  EXPECT_EQ(limiter.admit("a", 2, t0), 0);
  EXPECT_EQ(limiter.admit("a", 2, t0 + std::chrono::seconds(10)), 0);
  EXPECT_EQ(limiter.admit("a", 2, t0 + std::chrono::seconds(20)), 41);  // the window ends at t0 + 60 s
  EXPECT_EQ(limiter.admit("a", 2, t0 + std::chrono::seconds(60)), 0);   // a new window
  EXPECT_EQ(limiter.admit("b", 0, t0), 0);                             // no limit: not remembered
  for (int i = 0; i < 10; ++i) limiter.admit("client" + std::to_string(i), 5, t0 + std::chrono::seconds(i));
  EXPECT_EQ(limiter.clients(), 4u);
}

TEST(Cors, AllowedOriginsAndBadOnes) {
  AccessOptions opt;
  opt.cors = "https://a.example, http://b.example:8080";
  Access access(opt);
  EXPECT_TRUE(access.cors());
  EXPECT_EQ(access.allowed_origin("https://a.example"), "https://a.example");
  EXPECT_EQ(access.allowed_origin("http://b.example:8080"), "http://b.example:8080");
  EXPECT_EQ(access.allowed_origin("https://evil.example"), "");
  opt.cors = "*";
  EXPECT_EQ(Access(opt).allowed_origin("https://any.example"), "*");
  EXPECT_FALSE(Access(AccessOptions{}).cors());
  opt.cors = "a.example";
  EXPECT_THROW(Access{opt}, ConfigError);
}
