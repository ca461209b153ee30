// `leanseq serve` end to end on loopback: the APIs give `leanseq translate`'s translations (a batch,
// and 20 concurrent single requests), every class of bad request gets its status and a JSON error,
// /metrics counts, the page translates in a real headless Chromium (where one is installed), and
// SIGTERM ends the server with exit code 0.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "e2e/server_process.h"
#include "e2e/task.h"

using json = nlohmann::json;
using leanseq::test::health_seconds;
using leanseq::test::kCli;
using leanseq::test::RawConnection;
using leanseq::test::read_text;
using leanseq::test::ServerProcess;
using leanseq::test::run_command;
using leanseq::test::temp_dir;

namespace {

// The synthetic task's lines need only their spaces escaped in a URL or a form.
std::string url_encode(const std::string& s) {
  std::string out;
  for (char c : s) out += c == ' ' ? std::string("%20") : std::string(1, c);
  return out;
}

const std::vector<std::string> kLines = {"a1 a2 a3", "a4 a5 a6 a7", "a8", "a9 a10 a11", "a12 a13"};

std::vector<std::string> translate_cli(const std::vector<std::string>& lines, const std::string& dir,
                                       const std::string& checkpoint = leanseq::test::tiny_checkpoint(),
                                       const std::string& flags = "") {
  std::ofstream f(dir + "/in.txt");
  for (const auto& l : lines) f << l << "\n";
  f.close();
  std::string out;
  EXPECT_EQ(run_command("{ " + kCli + " translate --checkpoint " + checkpoint + " -i " + dir +
                            "/in.txt --beam 2 --max-len-b 6 " + flags + " 2>/dev/null; }",
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
  expect_error(400, client.Post("/v1/translate", "{\"text\": \"a1\", \"beam\": 8e8888}", "application/json"),
               "a number past a double's range");  // found by fuzz_request: it was a 500
  expect_error(400, client.Post("/translate", "{\"q\": \"a1\", \"source\": 3}", "application/json"), "a number as source");
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
                        "leanseq_requests_total{endpoint=\"/v1/translate\",code=\"400\"} 6",
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

// Served from a checkpoint path longer than a request's "model" field may be (the page once sent
// the path as the model's name, and every translation was refused).
TEST(Serve, ThePageTranslatesInAHeadlessChromium) {
  const auto dir = temp_dir("serve-page");
  const auto expected = translate_cli(kLines, dir);
  const std::string long_path = dir + "/" + std::string(80, 'c') + ".pt";
  std::filesystem::create_symlink(leanseq::test::tiny_checkpoint(), long_path);
  ServerProcess server("--beam 2 --max-len-b 6", dir, "--checkpoint " + long_path);
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

// What took the server down before: a 100 000-character sentence (decoded for minutes, 23.7 GB),
// 200 idle connections (/health took 89 s), slowloris clients, a chunked body past the limit
// (accepted), a Content-Length of 10^20 or -5 (no answer). Each now gets a quick answer or is
// cut off, and /health answers within a second throughout.
TEST(Serve, HostileClientsCannotStallOrExhaustIt) {
  const auto dir = temp_dir("serve-hostile");
  ServerProcess server("--beam 2 --max-len-b 6 --max-request-bytes 200000 --header-timeout 2 --max-connections 32", dir);
  ASSERT_GT(server.port(), 0);
  const int port = server.port();
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(30, 0);

  // One 100 000-character sentence: refused at once, named; the rest of the server unaffected.
  std::string huge;
  while (huge.size() < 100000) huge += "a1 a2 a3 ";
  auto start = std::chrono::steady_clock::now();
  auto res = client.Post("/v1/translate", json{{"text", huge}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  EXPECT_NE(res->body.find("subword tokens, more than the 1024"), std::string::npos) << res->body;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);
  res = client.Post("/translate", json{{"q", {"a1", huge}}, {"source", "src"}, {"target", "tgt"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 413) << res->body;
  EXPECT_NE(res->body.find("sentence 2 of the request has"), std::string::npos) << res->body;

  // 200 idle connections: /health still answers within a second.
  {
    std::vector<std::unique_ptr<RawConnection>> idle;
    for (int i = 0; i < 200; ++i) idle.push_back(std::make_unique<RawConnection>(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double s = health_seconds(port);
    EXPECT_GE(s, 0) << "no answer";
    EXPECT_LT(s, 1.0);
  }

  // 40 slowloris clients, a header line every half second: /health answers within a second, and
  // the server ends them once --header-timeout (2 s) has passed.
  {
    std::vector<std::unique_ptr<RawConnection>> slow;
    for (int i = 0; i < 40; ++i) {
      slow.push_back(std::make_unique<RawConnection>(port));
      slow.back()->send("GET /health HTTP/1.1\r\nHost: x\r\n");
    }
    bool cut = false;
    for (int t = 0; t < 8 && !cut; ++t) {
      for (auto& c : slow) c->send("X-Slow-" + std::to_string(t) + ": 1\r\n");
      const double s = health_seconds(port);
      EXPECT_GE(s, 0) << "no answer at " << t;
      EXPECT_LT(s, 1.0) << "at " << t;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      cut = slow.front()->closed_by_server();
    }
    EXPECT_TRUE(cut) << "a slowloris client was still connected after 4 s";
  }

  // A chunked body past --max-request-bytes: 413, however it is sent.
  {
    RawConnection c(port);
    ASSERT_TRUE(c.connected());
    c.send("POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk(10000, ' ');
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
    for (int i = 0; i < 30 && c.send(size + chunk + "\r\n"); ++i) {
    }
    const std::string answer = c.receive();
    EXPECT_NE(answer.find("413"), std::string::npos) << answer.substr(0, 200);
    EXPECT_NE(answer.find("--max-request-bytes"), std::string::npos) << answer.substr(0, 400);
  }

  // A Content-Length that is not a size, or far past the limit: answered at once.
  for (const std::string length : {"100000000000000000000", "-5", "5000000"}) {
    RawConnection c(port);
    start = std::chrono::steady_clock::now();
    c.send("POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + length +
           "\r\n\r\n{\"text\": \"a1\"}");
    const std::string answer = c.receive();
    EXPECT_TRUE(answer.rfind("HTTP/1.1 400", 0) == 0 || answer.rfind("HTTP/1.1 413", 0) == 0)
        << length << ": " << answer.substr(0, 200);
    EXPECT_NE(answer.find("\"error\""), std::string::npos) << length << ": " << answer;
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3) << length;
  }

  // Still serving, and the connection metrics say what happened.
  res = client.Post("/v1/translate", json{{"text", kLines[0]}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("leanseq_connections_closed_total{reason=\"timed_out\"}"), std::string::npos);
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// With --truncate-long-inputs a long text is cut and translated instead of refused.
TEST(Serve, TruncatesLongInputsWhenAsked) {
  const auto dir = temp_dir("serve-truncate");
  ServerProcess server("--beam 2 --max-len-b 6 --max-input-length 8 --truncate-long-inputs", dir);
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(30, 0);
  std::string longer;
  for (int i = 1; i <= 40; ++i) longer += "a" + std::to_string(i) + " ";
  auto res = client.Post("/v1/translate", json{{"text", longer}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

// --api-keys, --req-limit and --cors through HTTP: LibreTranslate's api_key checked (403 with a
// JSON error for a wrong one), each key's limit per minute (429 with Retry-After), keyless requests
// at --req-limit per address, a preflight answered 204 with the allowed origin, which also comes
// with every answer, and the refusals counted in /metrics. A bad keys file stops the start.
TEST(Serve, ApiKeysRequestLimitsAndCors) {
  const auto dir = temp_dir("serve-access");
  std::ofstream(dir + "/keys.txt") << "# key, requests per minute\nteam-a 2\nteam-b\n";
  ServerProcess server("--beam 1 --max-len-b 4 --api-keys " + dir + "/keys.txt --req-limit 1 --cors https://app.example",
                       dir);
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(30, 0);
  auto translate = [&](const json& body, const httplib::Headers& headers = {}) {
    auto res = client.Post("/translate", headers, body.dump(), "application/json");
    EXPECT_TRUE(res);
    return res;
  };
  const json q = {{"q", "a1 a2"}, {"source", "src"}, {"target", "tgt"}};
  auto with_key = [&](const std::string& key) {
    json b = q;
    b["api_key"] = key;
    return b;
  };
  auto res = translate(with_key("wrong"));
  EXPECT_EQ(res->status, 403);
  EXPECT_EQ(json::parse(res->body)["error"], "Invalid API key");
  for (int i = 0; i < 2; ++i) EXPECT_EQ(translate(with_key("team-a"))->status, 200) << i;
  res = translate(with_key("team-a"));
  EXPECT_EQ(res->status, 429) << res->body;
  EXPECT_NE(json::parse(res->body)["error"].get<std::string>().find("2 per minute"), std::string::npos) << res->body;
  EXPECT_GE(std::stoi(res->get_header_value("Retry-After")), 1);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(translate(with_key("team-b"))->status, 200) << i;  // no limit of its own
  json npm_style = q;  // LibreTranslate's npm client sends the key as apiKey
  npm_style["apiKey"] = "team-b";
  EXPECT_EQ(translate(npm_style)->status, 200);
  npm_style["apiKey"] = "wrong";
  EXPECT_EQ(translate(npm_style)->status, 403);
  // A key in the X-API-Key header, on leanseq's API.
  res = client.Post("/v1/translate", {{"X-API-Key", "team-b"}}, json{{"text", "a1"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  res = client.Post("/v1/translate", json{{"text", "a1"}, {"api_key", "nope"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403) << res->body;
  // Keyless: one per minute from this address.
  EXPECT_EQ(translate(q)->status, 200);
  EXPECT_EQ(translate(q)->status, 429);

  // CORS: a preflight, and the header on answers to the allowed origin only.
  res = client.Options("/translate", {{"Origin", "https://app.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 204);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_NE(res->get_header_value("Access-Control-Allow-Headers").find("Content-Type"), std::string::npos);
  res = translate(with_key("team-b"), {{"Origin", "https://app.example"}});
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  res = translate(with_key("wrong"), {{"Origin", "https://app.example"}});
  EXPECT_EQ(res->get_header_value("Access-Control-Allow-Origin"), "https://app.example");  // on refusals too
  res = translate(with_key("team-b"), {{"Origin", "https://evil.example"}});
  EXPECT_FALSE(res->has_header("Access-Control-Allow-Origin"));
  res = client.Get("/languages");  // not limited
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("endpoint=\"/translate\",code=\"429\"} 2"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("endpoint=\"/translate\",code=\"403\"} 3"), std::string::npos) << res->body;
  EXPECT_EQ(server.stop(), 0) << server.log();

  std::ofstream(dir + "/bad-keys.txt") << "team-a 2\nteam-a 3\n";
  std::string out;
  EXPECT_EQ(run_command(kCli + " serve --checkpoint " + leanseq::test::tiny_checkpoint() + " --port 0 --api-keys " + dir +
                            "/bad-keys.txt",
                        out),
            2);
  EXPECT_NE(out.find("bad-keys.txt:2: this key is listed twice"), std::string::npos) << out;
}

// One server, two models (src->tgt and tgt->src): /languages lists both pairs, LibreTranslate's
// /translate routes by source and target (auto where one pair matches), /v1/translate by model
// name or pair, each model gives what `leanseq translate` gives with it, /health and /metrics
// speak of each, and a request that names no served model gets 400 naming those it could use.
TEST(Serve, ServesSeveralModelsRoutedByLanguagePairOrName) {
  const auto dir = temp_dir("serve-models");
  leanseq::test::write_task_splits(dir);
  std::string out;
  ASSERT_EQ(run_command(kCli + " prepare --src tgt --tgt src --train " + dir + "/train --valid " + dir + "/valid --out " +
                            dir + "/back --vocab-size 60",
                        out),
            0)
      << out;
  ASSERT_EQ(run_command(kCli + " train --arch transformer_tiny --data " + dir + "/back --save-dir " + dir +
                            "/back-ck --max-update 20 --seed 2 --set batch.max_tokens=1000 --set optim.lr=0.003",
                        out),
            0)
      << out;
  const std::string forward = leanseq::test::tiny_checkpoint(), back = dir + "/back-ck/checkpoint_last.pt";
  const auto expected_forward = translate_cli(kLines, dir, forward);
  const std::vector<std::string> back_lines = {"b1 b2 b3", "b4 b5"};
  const auto expected_back = translate_cli(back_lines, dir, back);
  ServerProcess server("--beam 2 --max-len-b 6", dir, "--model fwd=" + forward + " --model back=" + back);
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(30, 0);

  auto res = client.Get("/languages");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body),
            json::parse(R"([{"code":"src","name":"src","targets":["tgt"]},{"code":"tgt","name":"tgt","targets":["src"]}])"));
  auto libre = [&](const json& body) {
    auto r = client.Post("/translate", body.dump(), "application/json");
    EXPECT_TRUE(r);
    return r;
  };
  res = libre({{"q", kLines}, {"source", "src"}, {"target", "tgt"}});
  ASSERT_EQ(res->status, 200) << res->body;
  for (size_t i = 0; i < kLines.size(); ++i) EXPECT_EQ(json::parse(res->body)["translatedText"][i], expected_forward[i]);
  res = libre({{"q", back_lines}, {"source", "auto"}, {"target", "src"}});
  ASSERT_EQ(res->status, 200) << res->body;
  for (size_t i = 0; i < back_lines.size(); ++i) EXPECT_EQ(json::parse(res->body)["translatedText"][i], expected_back[i]);
  EXPECT_EQ(json::parse(res->body)["detectedLanguage"][0]["language"], "tgt");  // one per text, as LibreTranslate
  res = libre({{"q", "a1"}, {"source", "src"}, {"target", "fr"}});
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"], "fr is not supported") << res->body;  // LibreTranslate's words
  res = libre({{"q", "a1"}});
  EXPECT_EQ(res->status, 400);
  EXPECT_EQ(json::parse(res->body)["error"], "Invalid request: missing source parameter") << res->body;

  res = client.Post("/v1/translate", json{{"texts", back_lines}, {"model", "back"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["model"], "back");
  for (size_t i = 0; i < back_lines.size(); ++i) {
    EXPECT_EQ(json::parse(res->body)["translations"][i]["text"], expected_back[i]);
  }
  res = client.Post("/v1/translate", json{{"text", kLines[0]}, {"source", "src"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["translations"][0]["text"], expected_forward[0]) << res->body;
  res = client.Post("/v1/translate", json{{"text", "a1"}, {"model", "nope"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("no model called nope"), std::string::npos) << res->body;
  res = client.Post("/v1/translate", json{{"text", "a1"}, {"model", "fwd"}, {"target", "src"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;

  res = client.Get("/v1/health");
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["models"].size(), 2u) << res->body;
  EXPECT_EQ(json::parse(res->body)["models"][1]["target"], "src") << res->body;
  res = client.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("leanseq_model_translated_sentences_total{model=\"fwd\"} 6"), std::string::npos) << res->body;
  EXPECT_NE(res->body.find("leanseq_model_translated_sentences_total{model=\"back\"} 4"), std::string::npos) << res->body;
  res = client.Get("/?model=back");
  ASSERT_TRUE(res);
  EXPECT_NE(res->body.find("model: \"back\""), std::string::npos);
  EXPECT_NE(res->body.find("href=\"/?model=fwd\""), std::string::npos);
  EXPECT_EQ(server.stop(), 0) << server.log();

  EXPECT_EQ(run_command(kCli + " serve --model fwd=" + forward + " --model fwd=" + back + " --port 0", out), 2);
  EXPECT_NE(out.find("two models are called fwd"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " serve --checkpoint " + forward + " --model fwd=" + forward + " --port 0", out), 2);
  EXPECT_NE(out.find("give one of --checkpoint"), std::string::npos) << out;
  EXPECT_EQ(run_command(kCli + " serve --model =" + forward + " --port 0", out), 2);
  EXPECT_NE(out.find("a model's name is 1 to 64 letters"), std::string::npos) << out;

  // A models file: each model its own workers and compute type.
  std::ofstream(dir + "/models.yaml") << "- name: fwd\n  checkpoint: " << forward
                                      << "\n  workers: 2\n  compute_type: int8\n- name: back\n  checkpoint: " << back
                                      << "\n";
  const auto expected_int8 = translate_cli(kLines, dir, forward, "--compute-type int8");
  std::filesystem::create_directories(dir + "/from-file");  // its own log: the first server's names another port
  ServerProcess from_file("--beam 2 --max-len-b 6", dir + "/from-file", "--models " + dir + "/models.yaml");
  ASSERT_GT(from_file.port(), 0);
  httplib::Client c2("127.0.0.1", from_file.port());
  c2.set_read_timeout(30, 0);
  res = c2.Post("/v1/translate", json{{"texts", kLines}, {"model", "fwd"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  for (size_t i = 0; i < kLines.size(); ++i) {
    EXPECT_EQ(json::parse(res->body)["translations"][i]["text"], expected_int8[i]) << i;
  }
  EXPECT_NE(from_file.log().find("fwd (src->tgt, 2 workers), back (tgt->src, 1 worker)"), std::string::npos)
      << from_file.log();
  EXPECT_NE(from_file.log().find("compute type int8"), std::string::npos) << from_file.log();
  EXPECT_EQ(from_file.stop(), 0) << from_file.log();
  std::ofstream(dir + "/bad.yaml") << "- name: fwd\n  checkpoint: " << forward << "\n  workerz: 2\n";
  EXPECT_EQ(run_command(kCli + " serve --models " + dir + "/bad.yaml --port 0", out), 2);
  EXPECT_NE(out.find("bad.yaml: model 1: unknown key 'workerz'"), std::string::npos) << out;
  std::ofstream(dir + "/bad.yaml") << "- name: fwd\n  checkpoint: " << forward << "\n  compute_type: int4\n";
  EXPECT_EQ(run_command(kCli + " serve --models " + dir + "/bad.yaml --port 0", out), 2);
  EXPECT_NE(out.find("bad.yaml: model 1: compute_type:"), std::string::npos) << out;
}
