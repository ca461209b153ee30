// LibreTranslate's API over the models a server serves, apart from HTTP: /translate (texts split
// into sentences, format text or html, source "auto", alternatives), /detect, /frontend/settings
// and the limits and error texts of LibreTranslate (its app.py), so that its clients and its own
// API tests work unchanged. JSON fields in, JSON out; the server (serve/server.cpp) reads bodies
// and calls these. Separate from the server so that it is tested and fuzzed alone.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "leanseq/decode/translator.h"
#include "leanseq/serve/models.h"

namespace leanseq::serve {

struct LibreTranslateOptions {
  int64_t char_limit = -1;          // characters (code points) per text at most (-1: no limit)
  int64_t batch_limit = -1;         // texts per request at most (-1: only the server's own bound)
  int64_t alternatives_limit = -1;  // alternatives a request may ask for (-1: up to the widest beam)
  int64_t frontend_timeout_ms = 500;
  bool files = true;                // /translate_file
  std::vector<std::string> file_formats{".txt", ".html"};
};

// Translates sentences with models[model]: for each sentence, its distinct n-best texts, best
// first (at least one). Throws Refusal (busy, a sentence too long, ...).
using SentenceTranslator = std::function<std::vector<std::vector<std::string>>(
    size_t model, const std::vector<std::string>& sentences, const decode::TranslateOptions& options)>;

class LibreTranslate {
 public:
  // `max_texts`: texts per request at most (413 beyond); `max_sentences`: sentences per request
  // after splitting (413 beyond: the batcher's queue).
  LibreTranslate(std::vector<ModelInfo> models, LibreTranslateOptions opt, decode::TranslateOptions defaults,
                 int64_t max_beam, int64_t max_texts, int64_t max_sentences, SentenceTranslator translate);

  // POST /translate: `fields` from a JSON body (`json_body`) or a form (strings); `char_limit`
  // replaces the options' for this request (an API key's own limit).
  nlohmann::json translate(const nlohmann::json& fields, bool json_body,
                           std::optional<int64_t> char_limit = std::nullopt) const;
  // POST /detect: [{"language", "confidence"}] best first, among the languages served.
  nlohmann::json detect(const nlohmann::json& fields) const;
  // POST /translate_file's work: the file's text (.txt or .html by `filename`) translated; `fields`
  // give source and target. Refusal 400 for another format or a file that is not UTF-8 text.
  std::string translate_file(const std::string& filename, const std::string& content, const nlohmann::json& fields,
                             std::optional<int64_t> char_limit = std::nullopt) const;
  // GET /frontend/settings.
  nlohmann::json frontend_settings(bool keys_required) const;
  const LibreTranslateOptions& options() const { return opt_; }

 private:
  struct Route {
    size_t model;
    nlohmann::json detected;  // {"confidence", "language"} when the source was "auto"
  };
  // The model for `source` (or "auto": detected in `texts`) into `target`, with LibreTranslate's
  // refusals.
  Route route(const std::string& source, const std::string& target, const std::vector<std::string>& texts) const;
  // Each text translated (format "text" or "html"), sentence by sentence in one batch; with
  // `alternatives`, the distinct other texts of the n-best.
  std::vector<std::vector<std::string>> translate_texts(size_t model, const std::vector<std::string>& texts,
                                                        bool html, int64_t alternatives,
                                                        decode::TranslateOptions o) const;

  std::vector<ModelInfo> models_;
  std::vector<std::string> served_, sources_;  // every language served; those models read
  LibreTranslateOptions opt_;
  decode::TranslateOptions defaults_;
  int64_t max_beam_, max_texts_, max_sentences_;
  SentenceTranslator translate_;
};

}  // namespace leanseq::serve
