// `leanseq serve`: translation over HTTP (cpp-httplib). POST /v1/translate (leanseq's API),
// LibreTranslate's API (serve/libretranslate.h: /translate, /detect, /translate_file, /languages,
// /frontend/settings, /spec, /health, ...), GET /metrics (Prometheus text) and GET / (a page to
// try it); API keys, request limits and CORS (serve/access.h). Sentences of concurrent requests are
// batched together (serve/batcher.h); results are those of `leanseq translate`. Bad requests get a
// 4xx status with {"error": "..."}; a full queue 503 with Retry-After; the server keeps serving.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "leanseq/decode/translator.h"
#include "leanseq/serve/access.h"
#include "leanseq/serve/batcher.h"
#include "leanseq/serve/connections.h"
#include "leanseq/serve/libretranslate.h"
#include "leanseq/serve/models.h"

namespace leanseq::serve {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (the log says which)
  BatchingOptions batching;
  ConnectionLimits connections;
  size_t max_request_bytes = 1 << 20;  // a body's bytes, chunked or not; and Content-Length
  int64_t max_sentences_per_request = 256;
  // A request that waits longer is answered 503 and its sentences are dropped from the queue or
  // their batch stops decoding.
  double request_timeout_s = 60;
  int64_t max_beam = 16;
  // Texts longer than defaults.max_input_length subword tokens are refused (413), or cut to it.
  bool truncate_long_inputs = false;
  // Source tokens x beam in one decoding batch at most: what bounds a batch's memory (its
  // attention caches grow with both).
  int64_t batch_token_budget = 16384;
  decode::TranslateOptions defaults;  // decoding options of requests that do not override them
  AccessOptions access;               // API keys, requests per minute, CORS
  LibreTranslateOptions libretranslate;  // its limits, and whether /translate_file is on
  size_t files_max_bytes = 64 << 20;     // translated files kept for /download_file, in all
  double files_max_age_s = 1800;         // and for how long
};

// A model to serve: its name and language pair, its translator (one copy of the weights) and how
// many decoding threads share it. Without a translator, `load` makes it at the model's first
// request (a lazy model: no memory until it is used).
struct ServedModel {
  ModelInfo info;
  std::unique_ptr<decode::Translator> translator;
  int workers = 1;
  std::function<std::unique_ptr<decode::Translator>()> load;
  bool lazy() const { return !translator; }
};

class Server {
 public:
  // Serves `models`, each with its own queue and decoding threads; requests are routed by model
  // name or language pair (serve/models.h). ConfigError for two models of one name, a bad API keys
  // file or CORS origin.
  Server(std::vector<ServedModel> models, ServeOptions opt);
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
