#include "leanseq/serve/server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "leanseq/core/io.h"
#include "leanseq/serve/page.h"

namespace leanseq::serve {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Connections the kernel holds for accept(): as many as the worker pool's threads.
constexpr int kListenBacklog = 64;

// A request that cannot be served, with its status.
struct Refusal {
  int status;
  std::string message;
};

// Counters and histograms in Prometheus' text format.
class Metrics {
 public:
  void request(const std::string& endpoint, int status, double seconds) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++requests_[endpoint + "\",code=\"" + std::to_string(status)];
    observe(latency_, latency_bounds_, seconds);
  }
  void batch(int64_t sentences, double seconds, int64_t tokens) {
    std::lock_guard<std::mutex> lock(mutex_);
    observe(batch_, batch_bounds_, static_cast<double>(sentences));
    sentences_ += sentences;
    tokens_ += tokens;
    decode_seconds_ += seconds;
  }
  std::string text(int64_t queued) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::ostringstream os;
    os << "# HELP leanseq_requests_total HTTP requests by endpoint and status code.\n"
          "# TYPE leanseq_requests_total counter\n";
    for (const auto& [k, n] : requests_) os << "leanseq_requests_total{endpoint=\"" << k << "\"} " << n << "\n";
    histogram(os, "leanseq_request_duration_seconds", "Time from a request's arrival to its answer.", latency_,
              latency_bounds_);
    histogram(os, "leanseq_batch_size_sentences", "Sentences per decoding batch.", batch_, batch_bounds_);
    os << "# HELP leanseq_translated_sentences_total Sentences translated.\n# TYPE leanseq_translated_sentences_total counter\n"
       << "leanseq_translated_sentences_total " << sentences_ << "\n"
       << "# HELP leanseq_target_tokens_total Target tokens produced (</s> included).\n# TYPE leanseq_target_tokens_total counter\n"
       << "leanseq_target_tokens_total " << tokens_ << "\n"
       << "# HELP leanseq_tokens_per_second Target tokens per second of decoding time.\n# TYPE leanseq_tokens_per_second gauge\n"
       << "leanseq_tokens_per_second " << (decode_seconds_ > 0 ? static_cast<double>(tokens_) / decode_seconds_ : 0.0) << "\n"
       << "# HELP leanseq_queue_length Sentences waiting for a decoding batch.\n# TYPE leanseq_queue_length gauge\n"
       << "leanseq_queue_length " << queued << "\n";
    return os.str();
  }

 private:
  struct Histogram {
    std::vector<int64_t> counts;
    double sum = 0;
    int64_t total = 0;
  };
  static void observe(Histogram& h, const std::vector<double>& bounds, double v) {
    if (h.counts.empty()) h.counts.assign(bounds.size(), 0);
    for (size_t i = 0; i < bounds.size(); ++i) {
      if (v <= bounds[i]) ++h.counts[i];
    }
    h.sum += v;
    ++h.total;
  }
  static void histogram(std::ostream& os, const std::string& name, const std::string& help, const Histogram& h,
                        const std::vector<double>& bounds) {
    os << "# HELP " << name << " " << help << "\n# TYPE " << name << " histogram\n";
    for (size_t i = 0; i < bounds.size(); ++i) {
      os << name << "_bucket{le=\"" << bounds[i] << "\"} " << (h.counts.empty() ? 0 : h.counts[i]) << "\n";
    }
    os << name << "_bucket{le=\"+Inf\"} " << h.total << "\n" << name << "_sum " << h.sum << "\n"
       << name << "_count " << h.total << "\n";
  }
  mutable std::mutex mutex_;
  std::map<std::string, int64_t> requests_;
  Histogram latency_, batch_;
  const std::vector<double> latency_bounds_{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  const std::vector<double> batch_bounds_{1, 2, 4, 8, 16, 32, 64, 128, 256};
  int64_t sentences_ = 0, tokens_ = 0;
  double decode_seconds_ = 0;
};

std::string language_name(const std::string& code) {
  static const std::map<std::string, std::string> names = {
      {"ar", "Arabic"},  {"cs", "Czech"},   {"de", "German"},   {"en", "English"},    {"es", "Spanish"},
      {"fi", "Finnish"}, {"fr", "French"},  {"hi", "Hindi"},    {"it", "Italian"},    {"ja", "Japanese"},
      {"ko", "Korean"},  {"nl", "Dutch"},   {"pl", "Polish"},   {"pt", "Portuguese"}, {"ro", "Romanian"},
      {"ru", "Russian"}, {"sv", "Swedish"}, {"tr", "Turkish"},  {"uk", "Ukrainian"},  {"zh", "Chinese"}};
  auto it = names.find(code);
  return it == names.end() ? code : it->second;
}

// The texts of a request: one string or an array of them, each non-empty valid UTF-8.
std::vector<std::string> texts_of(const json& v, const std::string& field, int64_t limit) {
  std::vector<std::string> out;
  auto add = [&](const json& t, const std::string& where) {
    if (!t.is_string()) throw Refusal{400, where + " must be a string"};
    const std::string s = t.get<std::string>();
    if (io::utf8_invalid_offset(s) >= 0) throw Refusal{400, where + " is not valid UTF-8"};
    if (s.find_first_not_of(" \t\r\n") == std::string::npos) throw Refusal{400, where + " is empty"};
    out.push_back(s);
  };
  if (v.is_array()) {
    if (v.empty()) throw Refusal{400, field + " is an empty list"};
    if (static_cast<int64_t>(v.size()) > limit) {
      throw Refusal{413, field + " has " + std::to_string(v.size()) + " texts, more than " + std::to_string(limit)};
    }
    for (size_t i = 0; i < v.size(); ++i) add(v[i], field + "[" + std::to_string(i) + "]");
  } else {
    add(v, field);
  }
  return out;
}

json parse_body(const std::string& body) {
  if (io::utf8_invalid_offset(body) >= 0) throw Refusal{400, "the body is not valid UTF-8"};
  try {
    return json::parse(body);
  } catch (const json::parse_error& e) {
    throw Refusal{400, std::string("invalid JSON: ") + e.what()};
  }
}

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  ModelInfo model;
  std::vector<std::unique_ptr<decode::Translator>> translators;
  Metrics metrics;
  std::unique_ptr<Batcher> batcher;
  httplib::Server http;
  int listen_socket = -1;

  // Translates `texts` with `opt` through the batcher; throws Refusal for a full queue or a timeout.
  std::vector<std::vector<decode::TranslationHyp>> translate(const std::vector<std::string>& texts,
                                                              const decode::TranslateOptions& o) {
    auto pending = batcher->submit(texts, o);
    if (!pending) throw Refusal{503, "the server is busy: its queue is full; retry shortly"};
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opt.request_timeout_s * 1000));
    if (!pending->wait_until(deadline)) throw Refusal{503, "the translation timed out; retry shortly"};
    if (!pending->error().empty()) throw Refusal{500, "translation failed: " + pending->error()};
    return pending->results();
  }

  // The decoding options of a /v1/translate request: the server's, with the overrides it allows.
  decode::TranslateOptions options_of(const json& req) const {
    decode::TranslateOptions o = opt.defaults;
    auto integer = [&](const char* key, int64_t lo, int64_t hi, int64_t& field) {
      if (!req.contains(key)) return;
      if (!req[key].is_number_integer() || req[key].get<int64_t>() < lo || req[key].get<int64_t>() > hi) {
        throw Refusal{400, std::string(key) + " must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi)};
      }
      field = req[key].get<int64_t>();
    };
    auto number = [&](const char* key, double lo, double hi, double& field) {
      if (!req.contains(key)) return;
      if (!req[key].is_number() || req[key].get<double>() < lo || req[key].get<double>() > hi) {
        throw Refusal{400, std::string(key) + " must be a number from " + std::to_string(lo) + " to " + std::to_string(hi)};
      }
      field = req[key].get<double>();
    };
    integer("beam", 1, opt.max_beam, o.search.beam);
    integer("nbest", 1, o.search.beam, o.search.nbest);
    number("lenpen", 0, 10, o.search.lenpen);
    number("max_len_a", 0, 10, o.search.max_len_a);
    integer("max_len_b", 1, 1024, o.search.max_len_b);
    if (o.search.nbest > o.search.beam) throw Refusal{400, "nbest cannot exceed beam"};
    return o;
  }

  // Runs `body`, answering a Refusal with its status and {"error": ...}, and counts the request.
  void handle(const std::string& endpoint, httplib::Response& res, const std::function<json()>& body) {
    const auto start = Clock::now();
    try {
      res.set_content(body().dump(), "application/json");
      res.status = 200;
    } catch (const Refusal& r) {
      res.status = r.status;
      if (r.status == 503) res.set_header("Retry-After", "1");
      res.set_content(json{{"error", r.message}}.dump(), "application/json");
    }
    metrics.request(endpoint, res.status, std::chrono::duration<double>(Clock::now() - start).count());
  }

  void routes() {
    http.Post("/v1/translate", [this](const httplib::Request& req, httplib::Response& res) {
      const auto start = Clock::now();
      handle("/v1/translate", res, [&] {
        const json body = parse_body(req.body);
        if (!body.is_object()) throw Refusal{400, "the body must be a JSON object with \"text\" or \"texts\""};
        if (body.contains("text") == body.contains("texts")) throw Refusal{400, "give one of \"text\" and \"texts\""};
        const bool one = body.contains("text");
        const auto texts = texts_of(one ? body["text"] : body["texts"], one ? "text" : "texts", opt.max_sentences_per_request);
        const auto o = options_of(body);
        const auto results = translate(texts, o);
        json out = json::array();
        for (const auto& hyps : results) {
          json t = {{"text", hyps.empty() ? "" : hyps[0].text},
                    {"score", hyps.empty() ? 0.0 : hyps[0].hyp.score},
                    {"tokens", hyps.empty() ? std::vector<std::string>{} : hyps[0].pieces}};
          if (o.search.nbest > 1) {
            t["hypotheses"] = json::array();
            for (const auto& h : hyps) t["hypotheses"].push_back({{"text", h.text}, {"score", h.hyp.score}, {"tokens", h.pieces}});
          }
          out.push_back(t);
        }
        return json{{"translations", out},
                    {"model", model.name},
                    {"elapsed_ms", std::chrono::duration<double, std::milli>(Clock::now() - start).count()}};
      });
    });
    http.Get("/languages", [this](const httplib::Request&, httplib::Response& res) {
      handle("/languages", res, [&] {
        return json::array({{{"code", model.source_lang}, {"name", language_name(model.source_lang)}, {"targets", {model.target_lang}}},
                            {{"code", model.target_lang}, {"name", language_name(model.target_lang)}, {"targets", json::array()}}});
      });
    });
    http.Post("/translate", [this](const httplib::Request& req, httplib::Response& res) {
      handle("/translate", res, [&] {
        // LibreTranslate's fields, from a JSON body or a form.
        json body;
        if (req.get_header_value("Content-Type").rfind("application/json", 0) == 0) {
          body = parse_body(req.body);
          if (!body.is_object()) throw Refusal{400, "the body must be a JSON object"};
        } else {
          for (const auto& [k, v] : req.params) {
            if (io::utf8_invalid_offset(v) >= 0) throw Refusal{400, k + " is not valid UTF-8"};
            body[k] = v;
          }
        }
        if (!body.contains("q")) throw Refusal{400, "Invalid request: missing q parameter"};
        const std::string source = body.value("source", std::string("auto"));
        const std::string target = body.value("target", model.target_lang);
        if (source != "auto" && source != model.source_lang) {
          throw Refusal{400, source + " is not supported: this server translates " + model.source_lang + " to " + model.target_lang};
        }
        if (target != model.target_lang) {
          throw Refusal{400, target + " is not supported: this server translates " + model.source_lang + " to " + model.target_lang};
        }
        if (body.value("format", std::string("text")) != "text") throw Refusal{400, "only format \"text\" is supported"};
        const bool list = body["q"].is_array();
        const auto results = translate(texts_of(body["q"], "q", opt.max_sentences_per_request), opt.defaults);
        json translated = json::array();
        for (const auto& hyps : results) translated.push_back(hyps.empty() ? "" : hyps[0].text);
        json out = {{"translatedText", list ? translated : translated[0]}};
        if (source == "auto") out["detectedLanguage"] = {{"confidence", 100.0}, {"language", model.source_lang}};
        return out;
      });
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      handle("/health", res, [&] { return json{{"status", "ok"}, {"model", model.name}, {"queue", batcher->queued()}}; });
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics.text(batcher->queued()), "text/plain; version=0.0.4");
    });
    http.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(page_html(model.name, model.source_lang, model.target_lang), "text/html; charset=utf-8");
    });
    http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      const std::string what = res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                               : res.status == 413 ? "the request body is too large"
                                                   : "the request cannot be served";
      res.set_content(json{{"error", what}}.dump(), "application/json");
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        what = ex.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(json{{"error", what}}.dump(), "application/json");
    });
  }
};

Server::Server(std::vector<std::unique_ptr<decode::Translator>> translators, ModelInfo model, ServeOptions opt)
    : impl_(std::make_unique<Impl>()) {
  impl_->opt = std::move(opt);
  impl_->model = std::move(model);
  impl_->translators = std::move(translators);
  std::vector<decode::Translator*> workers;
  for (auto& t : impl_->translators) workers.push_back(t.get());
  impl_->batcher = std::make_unique<Batcher>(workers, impl_->opt.batching, [this](int64_t n, double s, int64_t tokens) {
    impl_->metrics.batch(n, s, tokens);
  });
  impl_->http.set_payload_max_length(impl_->opt.max_request_bytes);
  impl_->http.set_read_timeout(std::chrono::seconds(30));
  // Clients that send request after request keep their connection (httplib closes it after 5).
  impl_->http.set_keep_alive_max_count(100000);
  impl_->http.set_keep_alive_timeout(30);
  // Answers go out at once, not held back by Nagle's algorithm for the client's delayed ACK.
  impl_->http.set_tcp_nodelay(true);
  impl_->http.new_task_queue = [] { return new httplib::ThreadPool(64); };
  // httplib's own socket options (address reuse), and the socket remembered so that run() can
  // widen the listen backlog, which this httplib fixes at 5: a burst of clients overflowed it.
  impl_->http.set_socket_options([this](int sock) {
    httplib::default_socket_options(sock);
    impl_->listen_socket = sock;
  });
  impl_->routes();
}

Server::~Server() = default;

bool Server::run(const std::function<void(int)>& on_listening) {
  int port = impl_->opt.port;
  if (port == 0) {
    port = impl_->http.bind_to_any_port(impl_->opt.host);
    if (port < 0) return false;
  } else if (!impl_->http.bind_to_port(impl_->opt.host, port)) {
    return false;
  }
  if (impl_->listen_socket >= 0) ::listen(impl_->listen_socket, kListenBacklog);
  if (on_listening) on_listening(port);
  return impl_->http.listen_after_bind();
}

void Server::stop() { impl_->http.stop(); }

}  // namespace leanseq::serve
