// The HTTP server as a whole (serve/server.h): each input is what a client sends on one connection
// (request line, headers, body: any bytes), answered by the real handlers of a server on loopback
// that translates with a tiny random model. A crash, an answer that is not HTTP, an error without a
// JSON body, a 5xx, or /metrics growing past a fixed size fails; so does a server that stops
// answering.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/torch.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "leanseq/data/dictionary.h"
#include "leanseq/data/text_pipeline.h"
#include "leanseq/decode/translator.h"
#include "leanseq/models/registry.h"
#include "leanseq/serve/server.h"

namespace {

// Words split at spaces: the tiny model's "subwords".
class Words : public leanseq::data::TextPipeline {
 public:
  std::vector<std::string> encode(const std::string& text) const override {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
  }
  std::string decode(const std::vector<std::string>& pieces) const override {
    std::string out;
    for (const auto& p : pieces) out += (out.empty() ? "" : " ") + p;
    return out;
  }
};

std::atomic<int> port{0};
// Never destroyed: its thread serves until the process ends (a global pointer keeps it reachable,
// so that the leak checker does not count it).
leanseq::serve::Server* server = nullptr;

// What the server answers to `bytes` on a new connection (until it closes or 2 s pass quietly).
std::string exchange(const std::string& bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port.load()));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's SIGALRM (-timeout's timer, every few seconds; its handler has no SA_RESTART) can
  // interrupt this thread's calls: a connect() waiting on a busy server's backlog goes on in the
  // background, and is waited for.
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    if (errno != EINTR) __builtin_trap();  // the server is gone
    pollfd p{fd, POLLOUT, 0};
    while (::poll(&p, 1, 10000) < 0 && errno == EINTR) {
    }
    int error = 0;
    socklen_t len = sizeof error;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) __builtin_trap();
  }
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  for (size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  while (out.size() < (1 << 20)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Each answer in `reply` (several when the client pipelined requests), read one after the other by
// their Content-Length, is HTTP; a 4xx carries a JSON error; none is a 5xx but 503 (busy). An
// answer cut short by the client's timeout (a loaded machine) ends the check.
void check(const std::string& reply) {
  for (size_t at = 0; at < reply.size();) {
    if (reply.compare(at, 9, "HTTP/1.1 ") != 0) __builtin_trap();
    const int status = std::atoi(reply.c_str() + at + 9);
    if (status < 100 || status > 599 || (status >= 500 && status != 503)) __builtin_trap();
    const auto head_end = reply.find("\r\n\r\n", at);
    if (head_end == std::string::npos) return;
    const auto length_at = reply.find("\r\nContent-Length: ", at);
    const size_t length = length_at < head_end ? std::strtoull(reply.c_str() + length_at + 18, nullptr, 10) : 0;
    const size_t body = head_end + 4;
    if (status >= 400 && status != 405) {
      if (reply.size() < body + 9) return;
      if (reply.compare(body, 9, "{\"error\":") != 0) __builtin_trap();
    }
    at = body + length;
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::manual_seed(1);
  torch::set_num_threads(1);
  leanseq::data::Dictionary dict;
  for (int i = 0; i < 12; ++i) dict.add("w" + std::to_string(i));
  auto config = leanseq::models::registry().preset_config("transformer_tiny");
  auto model = leanseq::models::build_model(*config, {dict.size(), dict.size(), true});
  model->eval();
  auto words = std::make_shared<Words>();
  std::vector<leanseq::serve::ServedModel> models;
  models.push_back({{"tiny", "xx", "yy"},
                    std::make_unique<leanseq::decode::Translator>(model, dict, dict, words, words), 1});
  leanseq::serve::ServeOptions opt;
  opt.port = 0;
  opt.defaults.search.beam = 2;
  opt.defaults.search.max_len_b = 4;
  opt.max_request_bytes = 1 << 16;
  opt.request_timeout_s = 5;
  server = new leanseq::serve::Server(std::move(models), opt);
  std::thread([] { server->run([](int p) { port = p; }); }).detach();
  while (port.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int64_t runs = 0;
  const std::string request(reinterpret_cast<const char*>(data), size);
  const std::string reply = exchange(request);
  if (request.find("HEAD") == std::string::npos) check(reply);  // (a HEAD's answer has no body)
  // No request adds to /metrics but counts (its labels are a closed set).
  if (++runs % 256 == 0) {
    const std::string metrics = exchange("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if (metrics.rfind("HTTP/1.1 200", 0) != 0 || metrics.size() > 16384) __builtin_trap();
  }
  return 0;
}
