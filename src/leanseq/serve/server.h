// `leanseq serve`: translation over HTTP (cpp-httplib). POST /v1/translate (leanseq's API), the
// LibreTranslate API (GET /languages, POST /translate with JSON or form bodies), GET /health,
// GET /metrics (Prometheus text) and GET / (a page to try it). Sentences of concurrent requests are
// batched together (serve/batcher.h); results are those of `leanseq translate`. Bad requests get a
// 4xx status with {"error": "..."}; a full queue 503 with Retry-After; the server keeps serving.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "leanseq/decode/translator.h"
#include "leanseq/serve/batcher.h"

namespace leanseq::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (the log says which)
  BatchingOptions batching;
  size_t max_request_bytes = 1 << 20;
  int64_t max_sentences_per_request = 256;
  double request_timeout_s = 60;
  int64_t max_beam = 16;
  decode::TranslateOptions defaults;  // decoding options of requests that do not override them
};

struct ModelInfo {
  std::string name, source_lang, target_lang;
};

class Server {
 public:
  // One translator per decoding worker (each with its own model copy).
  Server(std::vector<std::unique_ptr<decode::Translator>> translators, ModelInfo model, ServeOptions opt);
  ~Server();
  // Binds and serves until stop(); returns false when the address cannot be bound. `on_listening`
  // receives the port once bound.
  bool run(const std::function<void(int)>& on_listening);
  // Stops accepting; requests in flight finish. Safe from a signal-watching thread.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leanseq::serve
