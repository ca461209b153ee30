#include "leanseq/serve/server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/memory.h"
#include <leanseq/version.h>
#include "leanseq/serve/file_store.h"
#include "leanseq/serve/form.h"
#include "leanseq/serve/libretranslate.h"
#include "leanseq/serve/metrics.h"
#include "leanseq/serve/models.h"
#include "leanseq/serve/page.h"
#include "leanseq/serve/request.h"
#include "leanseq/serve/spec.h"

namespace leanseq::serve {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// Connections the kernel holds for accept(): as many as the worker pool's threads.
constexpr int kListenBacklog = 64;

// The endpoints and the method each answers: another method gets 405 (LibreTranslate's clients and
// tests expect it), an unknown path 404. /metrics counts each by name (any other path as "other").
const std::map<std::string, std::string> kMethods{
    {"/v1/translate", "POST"},   {"/v1/health", "GET"},     {"/translate", "POST"}, {"/detect", "POST"},
    {"/translate_file", "POST"}, {"/download_file", "GET"}, {"/languages", "GET"},  {"/frontend/settings", "GET"},
    {"/spec", "GET"},            {"/suggest", "POST"},      {"/health", "GET"},     {"/metrics", "GET"},
    {"/", "GET"}};

std::vector<std::string> endpoint_names() {
  std::vector<std::string> names;
  for (const auto& [path, method] : kMethods) names.push_back(path);
  return names;
}

// A path as a message may quote it: at most 200 bytes (the JSON answer replaces invalid UTF-8).
std::string quoted_path(const std::string& path) {
  return path.size() <= 200 ? path : path.substr(0, 200) + "...";
}

}  // namespace

struct Server::Impl {
  // A model with its decoding workers; a lazy one is loaded by its first request.
  struct Model {
    ModelInfo info;
    int workers = 1;
    bool lazy = false;
    std::function<std::unique_ptr<decode::Translator>()> load;
    std::mutex loading;
    std::atomic<bool> ready{false};
    std::unique_ptr<decode::Translator> translator;
    std::unique_ptr<Batcher> batcher;
    int64_t queued() const { return ready ? batcher->queued() : 0; }
  };
  ServeOptions opt;
  std::vector<std::unique_ptr<Model>> models;
  std::vector<ModelInfo> infos;  // the models' names and pairs, in order (for routing)
  Metrics metrics{endpoint_names()};
  GuardedHttpServer http;
  Access access;
  std::unique_ptr<LibreTranslate> libre;  // LibreTranslate's API over `models`
  std::unique_ptr<FileStore> files;       // /translate_file's results (none when it is off)
  int listen_socket = -1;

  explicit Impl(const ServeOptions& o) : opt(o), http(o.connections), access(o.access) {}

  // The Access-Control-Allow-Origin header, where CORS is on and the origin allowed.
  void add_cors(const httplib::Request& req, httplib::Response& res) const {
    if (!access.cors()) return;
    const std::string origin = access.allowed_origin(req.get_header_value("Origin"));
    if (origin.empty()) return;
    res.set_header("Access-Control-Allow-Origin", origin);
    if (origin != "*") res.set_header("Vary", "Origin");
  }

  // Model i, loaded now if it is not yet (requests for it wait; a failure is a 500 and the next
  // request tries again).
  Model& loaded(size_t i) {
    Model& m = *models.at(i);
    if (m.ready) return m;
    std::lock_guard<std::mutex> lock(m.loading);
    if (m.ready) return m;
    try {
      m.translator = m.load();
    } catch (const std::exception& e) {
      throw internal_error("loading model " + m.info.name + ": " + e.what());
    }
    m.batcher = std::make_unique<Batcher>(*m.translator, m.workers, opt.batching,
                                          [this, name = m.info.name](int64_t n, double s, int64_t tokens) {
                                            metrics.batch(name, n, s, tokens);
                                          });
    m.ready = true;
    return_freed_memory();  // what reading the checkpoint took and gave back
    if (m.lazy) log::info("loaded model " + m.info.name + " (" + m.info.source_lang + "->" + m.info.target_lang + ")");
    return m;
  }

  // Refuses (413) a text longer than max_input_length subword tokens, unless they are cut to it.
  // `field` names texts[i] in messages: "text", "texts[i]"; "sentence" for LibreTranslate's
  // sentences ("sentence 3 of the request").
  void check_lengths(const Model& m, const std::vector<std::string>& texts, const std::string& field) {
    auto name = [&](size_t i) {
      if (field == "sentence") return "sentence " + std::to_string(i + 1) + " of the request";
      return field + (texts.size() > 1 ? "[" + std::to_string(i) + "]" : "");
    };
    const int64_t limit = opt.defaults.max_input_length;
    if (limit <= 0 || opt.truncate_long_inputs) return;
    for (size_t i = 0; i < texts.size(); ++i) {
      // A text past the bytes its limit's tokens can span in real text is refused before it is
      // tokenized (which costs a few hundred times its bytes).
      const auto bytes_limit = static_cast<size_t>(limit) * decode::kMaxBytesPerToken;
      if (texts[i].size() > bytes_limit) {
        throw Refusal{413, name(i) + " has more than " +
                               std::to_string(bytes_limit) + " bytes, more than the " + std::to_string(limit) +
                               " subword tokens this server takes can span (--max-input-length)"};
      }
      const auto n = static_cast<int64_t>(m.translator->source_pieces(texts[i]).size()) + 1;
      if (n > limit) {
        throw Refusal{413, name(i) + " has " +
                               std::to_string(n) + " subword tokens, more than the " + std::to_string(limit) +
                               " this server takes (--max-input-length)"};
      }
    }
  }

  // Translates `texts` with `o` through the batcher; throws Refusal for a full queue or a timeout
  // (which cancels what is left of the request).
  // `constraints`: one list of texts per text, when o is constrained (a text without a token: 400).
  std::vector<std::vector<decode::TranslationHyp>> translate(Model& m, const std::vector<std::string>& texts,
                                                              decode::TranslateOptions o,
                                                              const std::vector<std::vector<std::string>>* constraints = nullptr) {
    // A batch's memory grows with its source tokens times the beam: --batch-token-budget bounds
    // that, --max-tokens (when given) the source tokens too.
    const int64_t budget = std::max<int64_t>(1, opt.batch_token_budget / std::max<int64_t>(1, o.search.beam));
    o.max_tokens = o.max_tokens > 0 ? std::min(o.max_tokens, budget) : budget;
    std::vector<decode::Constraints> encoded;
    if (constraints) {
      for (size_t i = 0; i < constraints->size(); ++i) {
        try {
          encoded.push_back(m.translator->encode_constraints((*constraints)[i]));
        } catch (const DataError& e) {
          throw Refusal{400, "constraints" + (texts.size() > 1 ? "[" + std::to_string(i) + "]" : "") + ": " + e.what()};
        }
      }
    }
    auto pending = m.batcher->submit(texts, o, constraints ? &encoded : nullptr);
    if (!pending) throw Refusal{503, "the server is busy: its queue is full; retry shortly"};
    const auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(opt.request_timeout_s * 1000));
    if (!pending->wait_until(deadline)) {
      pending->cancel();
      throw Refusal{503, "the translation timed out; retry shortly"};
    }
    if (!pending->error().empty()) throw internal_error("translation failed: " + pending->error());
    return pending->results();
  }

  // Runs `body`, answering a Refusal with its status and {"error": ...}, and counts the request.
  // Runs `write` (which sets the answer's content), answering a Refusal with its status and
  // {"error": ...}, and counts the request.
  void answer(const std::string& endpoint, httplib::Response& res, const std::function<void()>& write) {
    GuardedHttpServer::handling();
    const auto start = Clock::now();
    try {
      write();
      res.status = 200;
    } catch (const json::exception& e) {  // a field of another type than the API's
      res.status = 400;
      res.set_content(json_text({{"error", std::string("invalid request: ") + e.what()}}), "application/json");
    } catch (const Refusal& r) {
      res.status = r.status;
      if (r.retry_after > 0) {
        res.set_header("Retry-After", std::to_string(r.retry_after));
      } else if (r.status == 503) {
        res.set_header("Retry-After", "1");
      }
      res.set_content(json_text({{"error", r.message}}), "application/json");
    }
    metrics.request(endpoint, res.status, std::chrono::duration<double>(Clock::now() - start).count());
  }

  // answer() for a JSON answer.
  void handle(const std::string& endpoint, httplib::Response& res, const std::function<json()>& body) {
    answer(endpoint, res, [&] { res.set_content(json_text(body()), "application/json"); });
  }

  // Each model's distinct n-best texts of `sentences` (LibreTranslate's API translates sentence by
  // sentence); a sentence longer than --max-input-length is refused as a text would be.
  std::vector<std::vector<std::string>> translate_sentences(size_t model, const std::vector<std::string>& sentences,
                                                            const decode::TranslateOptions& o) {
    auto& m = loaded(model);
    check_lengths(m, sentences, "sentence");
    std::vector<std::vector<std::string>> out;
    for (const auto& hyps : translate(m, sentences, o)) {
      std::vector<std::string> texts;
      for (const auto& h : hyps) {
        if (std::find(texts.begin(), texts.end(), h.text) == texts.end()) texts.push_back(h.text);
      }
      if (texts.empty()) texts.emplace_back();
      out.push_back(std::move(texts));
    }
    return out;
  }

  // The request's API key (its fields' api_key or apiKey, else the X-API-Key header) admitted;
  // its character limit (the key's own, else --char-limit).
  int64_t admit(const httplib::Request& req, const json& fields) {
    const std::string key = api_key_of(fields, req.get_header_value("X-API-Key"));
    access.admit(key, req.remote_addr);
    return access.char_limit(key, opt.libretranslate.char_limit);
  }

  void routes() {
    routes_leanseq();
    routes_libretranslate();
    routes_http();
  }

  // leanseq's own API, the page and the metrics.
  void routes_leanseq() {
    http.Post("/v1/translate", [this](const httplib::Request& req, httplib::Response& res,
                                      const httplib::ContentReader& reader) {
      const auto start = Clock::now();
      handle("/v1/translate", res, [&] {
        auto request = parse_translate_request(read_body(req, reader, opt.max_request_bytes), opt.defaults, opt.max_beam,
                                               opt.max_sentences_per_request);
        access.admit(request.api_key.empty() ? req.get_header_value("X-API-Key") : request.api_key, req.remote_addr);
        auto& m = loaded(route(infos, request.model, request.source, request.target));
        const auto& texts = request.texts;
        const auto& o = request.options;
        check_lengths(m, texts, request.one ? "text" : "texts");
        const auto results = translate(m, texts, o, request.constraints.empty() ? nullptr : &request.constraints);
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
                    {"model", m.info.name},
                    {"elapsed_ms", std::chrono::duration<double, std::milli>(Clock::now() - start).count()}};
      });
    });
    http.Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
      handle("/v1/health", res, [&] {
        json list = json::array();
        int64_t queued = 0;
        for (const auto& m : models) {
          list.push_back({{"name", m->info.name}, {"source", m->info.source_lang}, {"target", m->info.target_lang},
                          {"queue", m->queued()}, {"loaded", m->ready.load()}});
          queued += m->queued();
        }
        return json{{"status", "ok"}, {"model", models.front()->info.name}, {"queue", queued}, {"models", list}};
      });
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      GuardedHttpServer::handling();
      std::vector<std::pair<std::string, int64_t>> queues;
      for (const auto& m : models) queues.emplace_back(m->info.name, m->queued());
      res.set_content(metrics.text(queues, http.counts()), "text/plain; version=0.0.4");
    });
    http.Get("/", [this](const httplib::Request& req, httplib::Response& res) {
      GuardedHttpServer::handling();
      size_t selected = 0;
      for (size_t i = 0; i < infos.size(); ++i) {
        if (infos[i].name == req.get_param_value("model")) selected = i;
      }
      res.set_content(page_html(infos, selected), "text/html; charset=utf-8");
    });
  }

  // LibreTranslate's API (serve/libretranslate.h).
  void routes_libretranslate() {
    http.Post("/translate", [this](const httplib::Request& req, httplib::Response& res,
                                   const httplib::ContentReader& reader) {
      handle("/translate", res, [&] {
        const Form form = read_form(req, reader, opt.max_request_bytes);
        const int64_t chars = admit(req, form.fields);
        return libre->translate(form.fields, form.json, chars);
      });
    });
    http.Post("/detect", [this](const httplib::Request& req, httplib::Response& res,
                                const httplib::ContentReader& reader) {
      handle("/detect", res, [&] {
        const Form form = read_form(req, reader, opt.max_request_bytes);
        admit(req, form.fields);
        return libre->detect(form.fields);
      });
    });
    http.Post("/translate_file", [this](const httplib::Request& req, httplib::Response& res,
                                        const httplib::ContentReader& reader) {
      handle("/translate_file", res, [&] {
        if (!files) throw Refusal{403, "Files translation are disabled on this server."};
        const Form form = read_form(req, reader, opt.max_request_bytes);
        const int64_t chars = admit(req, form.fields);
        const auto file = std::find_if(form.files.begin(), form.files.end(), [](const Form::File& f) { return f.field == "file"; });
        if (file == form.files.end()) throw Refusal{400, "Invalid request: missing file parameter"};
        const std::string name = files->put(file->filename, libre->translate_file(file->filename, file->content, form.fields, chars));
        return json{{"translatedFileUrl", base_url(req) + "/download_file/" + name}};
      });
    });
    http.Get(R"(/download_file/([^/]+))", [this](const httplib::Request& req, httplib::Response& res) {
      answer("/download_file", res, [&] {
        if (!files) throw Refusal{400, "Files translation are disabled on this server."};
        auto [content, download_name] = files->get(req.matches[1]);
        res.set_header("Content-Disposition", "attachment; filename=\"" + download_name + "\"");
        const bool html = download_name.size() > 5 && (download_name.rfind(".html") == download_name.size() - 5 ||
                                                       download_name.rfind(".htm") == download_name.size() - 4);
        res.set_content(std::move(content), html ? "text/html; charset=utf-8" : "text/plain; charset=utf-8");
      });
    });
    http.Get("/languages", [this](const httplib::Request&, httplib::Response& res) {
      handle("/languages", res, [&] { return languages_json(infos); });
    });
    http.Get("/frontend/settings", [this](const httplib::Request&, httplib::Response& res) {
      handle("/frontend/settings", res, [&] { return libre->frontend_settings(access.keys_required()); });
    });
    http.Get("/spec", [this](const httplib::Request&, httplib::Response& res) {
      handle("/spec", res, [&] { return openapi_spec(infos, libre->options(), opt.defaults, kVersion); });
    });
    http.Post("/suggest", [this](const httplib::Request&, httplib::Response& res, const httplib::ContentReader&) {
      handle("/suggest", res, [&]() -> json { throw Refusal{403, "Suggestions are disabled on this server."}; });
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      handle("/health", res, [&] { return json{{"status", "ok"}}; });
    });
  }

  // The URL this server was reached at, from the request's Host header (LibreTranslate's
  // translatedFileUrl is absolute); a Host of other bytes than a host name's gives the bound address.
  std::string base_url(const httplib::Request& req) const {
    std::string host = req.get_header_value("Host");
    const bool plain = !host.empty() && host.size() <= 255 &&
                       host.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") ==
                           std::string::npos;
    if (!plain) host = opt.host + ":" + std::to_string(req.local_port);
    return "http://" + host;
  }

  // What every request goes through: the body's declared length, CORS, 404 and 405, exceptions.
  void routes_http() {
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
      add_cors(req, res);
      res.set_content(json_text({{"error", what}}), "application/json");
      metrics.request(req.path, res.status, 0);
      return httplib::Server::HandlerResponse::Handled;
    });
    if (access.cors()) {
      // A browser's preflight: which methods and headers a cross-origin request may use.
      http.Options(R"(/.*)", [this](const httplib::Request&, httplib::Response& res) {
        GuardedHttpServer::handling();
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Content-Type, X-API-Key");
        res.set_header("Access-Control-Max-Age", "600");
      });
    }
    http.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      add_cors(req, res);
      GuardedHttpServer::answering();
    });
    http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      add_cors(req, res);
      if (!res.body.empty()) return;
      // A known path asked with another method.
      const std::string path = req.path.rfind("/download_file/", 0) == 0 ? "/download_file" : req.path;
      const auto known = kMethods.find(path);
      if (res.status == 404 && known != kMethods.end() && req.method != known->second &&
          !(req.method == "HEAD" && known->second == "GET")) {
        res.status = 405;
        res.set_header("Allow", known->second);
        res.set_content(json_text({{"error", "method not allowed: " + known->second + " " + path}}), "application/json");
        return;
      }
      const std::string what = res.status == 404   ? "no such endpoint: " + req.method.substr(0, 20) + " " + quoted_path(req.path)
                               : res.status == 413 ? "the request body is too large"
                                                   : "the request cannot be served";
      res.set_content(json_text({{"error", what}}), "application/json");
    });
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
      std::string what = "an exception of unknown type";
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        what = ex.what();
      } catch (...) {
      }
      res.status = 500;
      res.set_content(json_text({{"error", internal_error(what).message}}), "application/json");
    });
  }
};

Server::Server(std::vector<ServedModel> models, ServeOptions opt) : impl_(std::make_unique<Impl>(opt)) {
  if (models.empty()) throw ConfigError("serve: no model to serve");
  for (auto& served : models) {
    for (const auto& other : impl_->infos) {
      if (other.name == served.info.name) throw ConfigError("serve: two models are called " + other.name);
    }
    if (!served.translator && !served.load) throw ConfigError("serve: model " + served.info.name + " has no translator");
    const bool lazy = served.lazy();
    auto m = std::make_unique<Impl::Model>();
    m->info = served.info;
    m->workers = served.workers;
    m->lazy = lazy;
    m->load = std::move(served.load);
    if (served.translator) {
      // Given loaded: its workers start now.
      auto given = std::make_shared<std::unique_ptr<decode::Translator>>(std::move(served.translator));
      m->load = [given] { return std::move(*given); };
    }
    impl_->infos.push_back(m->info);
    impl_->models.push_back(std::move(m));
    if (!lazy) impl_->loaded(impl_->models.size() - 1);
  }
  const auto& o = impl_->opt;
  impl_->libre = std::make_unique<LibreTranslate>(
      impl_->infos, o.libretranslate, o.defaults, o.max_beam, o.max_sentences_per_request, o.batching.queue_limit,
      [this](size_t model, const std::vector<std::string>& sentences, const decode::TranslateOptions& options) {
        return impl_->translate_sentences(model, sentences, options);
      });
  if (o.libretranslate.files) impl_->files = std::make_unique<FileStore>(o.files_max_bytes, o.files_max_age_s);
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
