// `leanseq serve` end to end on loopback: the APIs give `leanseq translate`'s translations (a batch,
// and 20 concurrent single requests), every class of bad request gets its status and a JSON error,
// /metrics counts, the page translates in a real headless Chromium (where one is installed), and
// SIGTERM ends the server with exit code 0.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "e2e/task.h"

extern char** environ;

using json = nlohmann::json;
using leanseq::test::kCli;
using leanseq::test::read_text;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

namespace {

// A server started in the background; stopped with SIGTERM by stop() or the destructor.
class ServerProcess {
 public:
  ServerProcess(const std::string& flags, const std::string& dir) : log_(dir + "/serve.log") {
    const std::string cmd = "exec " + kCli + " serve --checkpoint " + leanseq::test::tiny_checkpoint() +
                            " --host 127.0.0.1 --port 0 " + flags + " > " + log_ + " 2>&1";
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    EXPECT_EQ(posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)/");
    for (int i = 0; i < 300 && port_ == 0; ++i) {
      std::smatch m;
      const std::string text = read_text(log_);
      if (std::regex_search(text, m, listening)) port_ = std::stoi(m[1]);
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_GT(port_, 0) << read_text(log_);
  }
  ~ServerProcess() {
    if (pid_ > 0) stop();
  }
  int port() const { return port_; }
  // SIGTERM; the exit status (-1 if it did not end within 20 s).
  int stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
  }
  std::string log() const { return read_text(log_); }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

// The synthetic task's lines need only their spaces escaped in a URL or a form.
std::string url_encode(const std::string& s) {
  std::string out;
  for (char c : s) out += c == ' ' ? std::string("%20") : std::string(1, c);
  return out;
}

const std::vector<std::string> kLines = {"a1 a2 a3", "a4 a5 a6 a7", "a8", "a9 a10 a11", "a12 a13"};

std::vector<std::string> translate_cli(const std::vector<std::string>& lines, const std::string& dir) {
  std::ofstream f(dir + "/in.txt");
  for (const auto& l : lines) f << l << "\n";
  f.close();
  std::string out;
  EXPECT_EQ(run_command("{ " + kCli + " translate --checkpoint " + leanseq::test::tiny_checkpoint() + " -i " + dir +
                            "/in.txt --beam 2 --max-len-b 6 2>/dev/null; }",
                        out),
            0);
  std::vector<std::string> got;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) got.push_back(l);
  return got;
}

}  // namespace

TEST(Serve, TranslatesAsTranslateBatchedOrConcurrentAndRefusesBadRequests) {
  const auto dir = temp_dir("serve");
  const auto expected = translate_cli(kLines, dir);
  ASSERT_EQ(expected.size(), kLines.size());
  ServerProcess server("--beam 2 --max-len-b 6 --batch-timeout-ms 20 --max-request-bytes 4000 --queue-limit 100", dir);
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(60, 0);

  // A batch through leanseq's API, and through LibreTranslate's.
  auto res = client.Post("/v1/translate", json{{"texts", kLines}}.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  auto body = json::parse(res->body);
  ASSERT_EQ(body["translations"].size(), kLines.size());
  for (size_t i = 0; i < kLines.size(); ++i) EXPECT_EQ(body["translations"][i]["text"], expected[i]) << i;
  EXPECT_TRUE(body.contains("elapsed_ms"));
  res = client.Post("/translate", json{{"q", kLines}, {"source", "src"}, {"target", "tgt"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  for (size_t i = 0; i < kLines.size(); ++i) EXPECT_EQ(json::parse(res->body)["translatedText"][i], expected[i]);
  res = client.Post("/translate", "q=" + url_encode(kLines[0]) + "&source=auto&target=tgt",
                    "application/x-www-form-urlencoded");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["translatedText"], expected[0]) << res->body;
  res = client.Get("/languages");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)[0]["code"], "src");
  EXPECT_EQ(json::parse(res->body)[0]["targets"][0], "tgt");

  // 20 concurrent single requests: batched together, each its own translation.
  std::vector<std::string> got(20);
  std::vector<std::thread> clients;
  for (int i = 0; i < 20; ++i) {
    clients.emplace_back([&, i] {
      httplib::Client c("127.0.0.1", server.port());
      c.set_read_timeout(60, 0);
      auto r = c.Post("/v1/translate", json{{"text", kLines[i % kLines.size()]}}.dump(), "application/json");
      if (r && r->status == 200) got[i] = json::parse(r->body)["translations"][0]["text"];
    });
  }
  for (auto& t : clients) t.join();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(got[i], expected[i % kLines.size()]) << "request " << i;

  // Every class of bad request: its status, a JSON error, and the server goes on.
  auto expect_error = [&](int status, const httplib::Result& r, const std::string& what) {
    ASSERT_TRUE(r) << what;
    EXPECT_EQ(r->status, status) << what << ": " << r->body;
    json j;
    EXPECT_NO_THROW(j = json::parse(r->body)) << what << ": " << r->body;
    EXPECT_TRUE(j.contains("error")) << what << ": " << r->body;
  };
  expect_error(400, client.Post("/v1/translate", "{\"texts\": [", "application/json"), "invalid JSON");
  expect_error(400, client.Post("/v1/translate", "{\"text\": 3}", "application/json"), "a number as text");
  expect_error(400, client.Post("/v1/translate", "{\"texts\": [\"a1\", \"\"]}", "application/json"), "an empty text");
  expect_error(400, client.Post("/v1/translate", std::string("{\"text\": \"a1 \xff\"}"), "application/json"), "invalid UTF-8");
  expect_error(400, client.Post("/v1/translate", "{\"text\": \"a1\", \"beam\": 99}", "application/json"), "beam 99");
  expect_error(400, client.Post("/translate", "{\"q\": \"a1\", \"target\": \"fr\"}", "application/json"), "another target");
  expect_error(413, client.Post("/v1/translate", json{{"text", std::string(5000, 'a')}}.dump(), "application/json"),
               "too large");
  expect_error(503, client.Post("/v1/translate", json{{"texts", std::vector<std::string>(200, "a1")}}.dump(), "application/json"),
               "a full queue");
  expect_error(404, client.Get("/nothing"), "an unknown endpoint");
  res = client.Post("/v1/translate", json{{"text", kLines[0]}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << "still serving";

  // The metrics count what happened.
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  for (const char* m : {"leanseq_requests_total{endpoint=\"/v1/translate\",code=\"200\"}",
                        "leanseq_requests_total{endpoint=\"/v1/translate\",code=\"400\"} 5",
                        "leanseq_request_duration_seconds_bucket", "leanseq_batch_size_sentences_bucket",
                        "leanseq_tokens_per_second", "leanseq_queue_length 0"}) {
    EXPECT_NE(res->body.find(m), std::string::npos) << m << " in\n" << res->body;
  }
  // More than one sentence went into some batch: the 20 requests were batched.
  std::smatch m;
  const std::string metrics = res->body;
  ASSERT_TRUE(std::regex_search(metrics, m, std::regex("leanseq_batch_size_sentences_bucket\\{le=\"1\"\\} ([0-9]+)")));
  const int64_t single = std::stoll(m[1]);
  ASSERT_TRUE(std::regex_search(metrics, m, std::regex("leanseq_batch_size_sentences_count ([0-9]+)")));
  EXPECT_LT(single, std::stoll(m[1])) << metrics;

  // SIGTERM: the server stops and exits 0.
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(Serve, ThePageTranslatesInAHeadlessChromium) {
  const auto dir = temp_dir("serve-page");
  const auto expected = translate_cli(kLines, dir);
  ServerProcess server("--beam 2 --max-len-b 6", dir);
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("<textarea"), std::string::npos);
  if (!std::filesystem::exists("/usr/bin/chromium")) GTEST_SKIP() << "no /usr/bin/chromium: the page was not tried in a browser";
  // Loading /?q=... fills the box and translates; the translation shows in the DOM.
  std::string dom;
  const int rc = run_command("/usr/bin/chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
                             "--disable-background-networking --disable-component-update --disable-sync --user-data-dir=" +
                                 dir + "/chrome --virtual-time-budget=15000 --dump-dom 'http://127.0.0.1:" +
                                 std::to_string(server.port()) + "/?q=" + url_encode(kLines[1]) +
                                 "' 2>/dev/null",
                             dom);
  EXPECT_EQ(rc, 0) << dom;
  EXPECT_NE(dom.find("<div id=\"out\" aria-live=\"polite\">" + expected[1] + "</div>"), std::string::npos) << dom;
  EXPECT_EQ(server.stop(), 0) << server.log();
}
