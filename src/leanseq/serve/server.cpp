#include "leanseq/serve/server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/serve/page.h"
#include "leanseq/serve/request.h"

namespace leanseq::serve {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Connections the kernel holds for accept(): as many as the worker pool's threads.
constexpr int kListenBacklog = 64;

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
  std::string text(int64_t queued, const ConnectionCounts& connections) const {
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
       << "leanseq_queue_length " << queued << "\n"
       << "# HELP leanseq_connections_open HTTP connections open.\n# TYPE leanseq_connections_open gauge\n"
       << "leanseq_connections_open " << connections.open << "\n"
       << "# HELP leanseq_connections_closed_total Connections the server ended: refused (every slot busy), "
          "evicted (idle, for a new one), timed_out (too slow to send a request).\n"
       << "# TYPE leanseq_connections_closed_total counter\n"
       << "leanseq_connections_closed_total{reason=\"refused\"} " << connections.refused << "\n"
       << "leanseq_connections_closed_total{reason=\"evicted\"} " << connections.evicted << "\n"
       << "leanseq_connections_closed_total{reason=\"timed_out\"} " << connections.timed_out << "\n";
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

// A request's body, read through httplib's content reader so that chunked bodies count against
// the limit as much as declared ones (httplib's own limit sees only Content-Length).
std::string read_body(const httplib::ContentReader& reader, size_t limit) {
  std::string body;
  bool over = false;
  reader([&](const char* data, size_t n) {
    if (n > limit - body.size()) {
      over = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (over) {
    GuardedHttpServer::stop_reading();
    throw Refusal{413, "the request body is larger than " + std::to_string(limit) + " bytes (--max-request-bytes)"};
  }
  return body;
}

}  // namespace

struct Server::Impl {
  ServeOptions opt;
  ModelInfo model;
  std::unique_ptr<decode::Translator> translator;
  Metrics metrics;
  std::unique_ptr<Batcher> batcher;
  GuardedHttpServer http;
  int listen_socket = -1;

  explicit Impl(const ServeOptions& o)
      : opt(o), http(o.connections) {}

  // Refuses (413) a text longer than max_input_length subword tokens, unless they are cut to it.
  void check_lengths(const std::vector<std::string>& texts, const std::string& field) {
    const int64_t limit = opt.defaults.max_input_length;
    if (limit <= 0 || opt.truncate_long_inputs) return;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto n = static_cast<int64_t>(translator->source_pieces(texts[i]).size()) + 1;
      if (n > limit) {
        throw Refusal{413, field + (texts.size() > 1 ? "[" + std::to_string(i) + "]" : "") + " has " +
                               std::to_string(n) + " subword tokens, more than the " + std::to_string(limit) +
                               " this server takes (--max-input-length)"};
      }
    }
  }

  // Translates `texts` with `o` through the batcher; throws Refusal for a full queue or a timeout
  // (which cancels what is left of the request).
  std::vector<std::vector<decode::TranslationHyp>> translate(const std::vector<std::string>& texts,
                                                              decode::TranslateOptions o) {
    // A batch's memory grows with its source tokens times the beam.
    o.max_tokens = std::max<int64_t>(1, opt.batch_token_budget / std::max<int64_t>(1, o.search.beam));
    auto pending = batcher->submit(texts, o);
    if (!pending) throw Refusal{503, "the server is busy: its queue is full; retry shortly"};
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opt.request_timeout_s * 1000));
    if (!pending->wait_until(deadline)) {
      pending->cancel();
      throw Refusal{503, "the translation timed out; retry shortly"};
    }
    if (!pending->error().empty()) throw Refusal{500, "translation failed: " + pending->error()};
    return pending->results();
  }

  // Runs `body`, answering a Refusal with its status and {"error": ...}, and counts the request.
  void handle(const std::string& endpoint, httplib::Response& res, const std::function<json()>& body) {
    GuardedHttpServer::handling();
    const auto start = Clock::now();
    try {
      res.set_content(body().dump(), "application/json");
      res.status = 200;
    } catch (const json::exception& e) {  // a field of another type than the API's
      res.status = 400;
      res.set_content(json{{"error", std::string("invalid request: ") + e.what()}}.dump(), "application/json");
    } catch (const Refusal& r) {
      res.status = r.status;
      if (r.status == 503) res.set_header("Retry-After", "1");
      res.set_content(json{{"error", r.message}}.dump(), "application/json");
    }
    metrics.request(endpoint, res.status, std::chrono::duration<double>(Clock::now() - start).count());
  }

  void routes() {
    http.Post("/v1/translate", [this](const httplib::Request&, httplib::Response& res,
                                      const httplib::ContentReader& reader) {
      const auto start = Clock::now();
      handle("/v1/translate", res, [&] {
        const auto request =
            parse_translate_request(read_body(reader, opt.max_request_bytes), opt.defaults, opt.max_beam,
                                    opt.max_sentences_per_request);
        const auto& texts = request.texts;
        const auto& o = request.options;
        check_lengths(texts, request.one ? "text" : "texts");
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
    http.Post("/translate", [this](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
      handle("/translate", res, [&] {
        // LibreTranslate's fields, from a JSON body or a form (the query string's fields too).
        const std::string raw = read_body(reader, opt.max_request_bytes);
        json body;
        if (req.get_header_value("Content-Type").rfind("application/json", 0) == 0) {
          body = parse_body(raw);
          if (!body.is_object()) throw Refusal{400, "the body must be a JSON object"};
        } else {
          httplib::Params params = req.params;
          httplib::detail::parse_query_text(raw, params);
          for (const auto& [k, v] : params) {
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
        const auto texts = texts_of(body["q"], "q", opt.max_sentences_per_request);
        check_lengths(texts, "q");
        const auto results = translate(texts, opt.defaults);
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
      GuardedHttpServer::handling();
      res.set_content(metrics.text(batcher->queued(), http.counts()), "text/plain; version=0.0.4");
    });
    http.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      GuardedHttpServer::handling();
      res.set_content(page_html(model.name, model.source_lang, model.target_lang), "text/html; charset=utf-8");
    });
    // A request head is complete: its body comes next (the watchdog's body timeout); a declared
    // length must be a number within the limit, or the request is answered now and the
    // connection ends (what follows would not be a request).
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      GuardedHttpServer::head_read();
      if (!req.has_header("Content-Length")) return httplib::Server::HandlerResponse::Unhandled;
      const std::string v = req.get_header_value("Content-Length");
      const bool number = !v.empty() && v.size() <= 19 && v.find_first_not_of("0123456789") == std::string::npos;
      if (number && std::stoull(v) <= opt.max_request_bytes) return httplib::Server::HandlerResponse::Unhandled;
      GuardedHttpServer::stop_reading();
      res.status = number ? 413 : 400;
      const std::string what = number ? "the request body is larger than " + std::to_string(opt.max_request_bytes) +
                                            " bytes (--max-request-bytes)"
                                      : "Content-Length is not a number of bytes: '" + v.substr(0, 40) + "'";
      res.set_header("Connection", "close");
      res.set_content(json{{"error", what}}.dump(), "application/json");
      metrics.request(req.path, res.status, 0);
      return httplib::Server::HandlerResponse::Handled;
    });
    http.set_post_routing_handler([](const httplib::Request&, httplib::Response&) { GuardedHttpServer::answering(); });
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

Server::Server(std::unique_ptr<decode::Translator> translator, int workers, ModelInfo model, ServeOptions opt)
    : impl_(std::make_unique<Impl>(opt)) {
  impl_->model = std::move(model);
  impl_->translator = std::move(translator);
  impl_->batcher = std::make_unique<Batcher>(*impl_->translator, workers, impl_->opt.batching,
                                             [this](int64_t n, double s, int64_t tokens) { impl_->metrics.batch(n, s, tokens); });
  impl_->http.set_payload_max_length(impl_->opt.max_request_bytes);
  // Answers go out at once, not held back by Nagle's algorithm for the client's delayed ACK.
  impl_->http.set_tcp_nodelay(true);
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

void Server::stop() {
  impl_->http.stop();
  impl_->http.end_waiting_connections();  // idle keep-alive clients do not hold the exit up
}

}  // namespace leanseq::serve
