// `leanseq serve` against what an attacker sends: paths and form fields that are not UTF-8 once
// decoded (one such request once aborted the server), bad requests by the thousand whose paths
// once became /metrics labels (growing it without bound, and forging lines), and a shortlist that
// leaves fewer tokens than the beam (once a 500 whose body held the library's backtrace), a
// multipart body sent where JSON is read (once a 500).
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e/server_process.h"
#include "e2e/task.h"

using json = nlohmann::json;
using leanseq::test::health_seconds;
using leanseq::test::RawConnection;
using leanseq::test::ServerProcess;
using leanseq::test::temp_dir;

namespace {

// The answer to one request sent as raw bytes on a new connection.
std::string raw_request(int port, const std::string& request) {
  RawConnection c(port);
  EXPECT_TRUE(c.connected());
  c.send(request);
  return c.receive();
}

// The body of an answer (after its head).
std::string body_of(const std::string& answer) {
  const auto at = answer.find("\r\n\r\n");
  return at == std::string::npos ? "" : answer.substr(at + 4);
}

}  // namespace

TEST(ServeHostile, EveryPathAndMethodGetsAJsonErrorAndTheServerKeepsServing) {
  const auto dir = temp_dir("serve-hostile-paths");
  ServerProcess server("--beam 2 --max-len-b 6", dir);
  ASSERT_GT(server.port(), 0);
  const int port = server.port();
  std::string long_path = "/";
  for (int i = 0; i < 400; ++i) long_path += "%FE";
  for (const std::string path : {"/%FF", "/%C3", "/%C0%AF", "/x%00y", "/%ED%A0%80", long_path.c_str()}) {
    for (const std::string method : {"GET", "POST", "PUT", "DELETE", "PATCH"}) {
      SCOPED_TRACE(method + " " + path.substr(0, 40));
      const std::string answer =
          raw_request(port, method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      ASSERT_EQ(answer.rfind("HTTP/1.1 4", 0), 0u) << answer.substr(0, 300);
      const json error = json::parse(body_of(answer));  // valid JSON, whatever the path held
      EXPECT_TRUE(error.contains("error")) << error;
      EXPECT_LT(error.dump().size(), 1000u) << "the path is quoted without a bound";  // 200 bytes, each at most 3 as U+FFFD
    }
  }
  // A form whose field name or value is not UTF-8: 400 naming it.
  for (const std::string form : {"q=x&%FF=%FF", "q=%C3&target=en", "%FF=1"}) {
    const std::string answer = raw_request(
        port, "POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: " +
                  std::to_string(form.size()) + "\r\nConnection: close\r\n\r\n" + form);
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << form << ": " << answer.substr(0, 300);
    EXPECT_NE(body_of(answer).find("not valid UTF-8"), std::string::npos) << form << ": " << answer;
  }
  // A multipart body where a JSON one is read (once an internal error: httplib's part reader was
  // called without its callbacks): 415 naming what is read.
  const std::string part = "--B\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\nw1\r\n--B--\r\n";
  const std::string answer = raw_request(
      port, "POST /v1/translate HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\nContent-Length: " +
                std::to_string(part.size()) + "\r\nConnection: close\r\n\r\n" + part);
  EXPECT_EQ(answer.rfind("HTTP/1.1 415", 0), 0u) << answer.substr(0, 300);
  EXPECT_NE(body_of(answer).find("reads a JSON body"), std::string::npos) << answer;
  EXPECT_GE(health_seconds(port), 0) << server.log();
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(ServeHostile, BadRequestsNeitherGrowNorForgeTheMetrics) {
  const auto dir = temp_dir("serve-hostile-metrics");
  ServerProcess server("--beam 2 --max-len-b 6", dir);
  ASSERT_GT(server.port(), 0);
  const int port = server.port();
  httplib::Client client("127.0.0.1", port);
  // A request with a Content-Length that is no number, on the path `path`.
  auto bad = [&](const std::string& path) {
    const std::string answer = raw_request(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n");
    EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << path << ": " << answer.substr(0, 200);
  };
  for (int i = 0; i < 10; ++i) bad("/first-" + std::to_string(i));
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  const size_t before = metrics->body.size();
  for (int i = 0; i < 2000; ++i) bad("/p" + std::to_string(i) + "-" + std::string(static_cast<size_t>(i % 50), 'z'));
  bad("/x%22%7D%201%0Aleanseq_injected_total%7Ba%3D%22b");
  metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  // The counts grew by a few digits; no label came from a path.
  EXPECT_LT(metrics->body.size(), before + 100) << metrics->body;
  EXPECT_EQ(metrics->body.find("injected"), std::string::npos) << metrics->body;
  EXPECT_EQ(metrics->body.find("/p1"), std::string::npos) << metrics->body;
  EXPECT_NE(metrics->body.find("leanseq_requests_total{endpoint=\"other\",code=\"400\"} 2011"), std::string::npos)
      << metrics->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST(ServeHostile, AShortlistWithFewerTokensThanTheBeamTranslates) {
  const auto dir = temp_dir("serve-hostile-shortlist");
  std::ofstream(dir + "/empty.vmap").close();
  ServerProcess server("--beam 5 --max-len-b 6 --shortlist " + dir + "/empty.vmap", dir);
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Post("/v1/translate", json{{"text", "a1 a2 a3"}}.dump(), "application/json");
  ASSERT_TRUE(res);
  // As fairseq, the beam is cut to the tokens there are (less one): only the special tokens here,
  // so the translation is empty, not a failure.
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(res->body.find("0x"), std::string::npos) << res->body;
  EXPECT_EQ(server.stop(), 0) << server.log();
}
