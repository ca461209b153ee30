// What the server reads from a request body, apart from HTTP itself (httplib's): JSON bodies,
// texts and decoding options, each checked, with the status and message of a refusal. Separate
// from the server so that it can be fuzzed alone (fuzz/fuzz_request.cpp).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "leanseq/decode/translator.h"

namespace leanseq::serve {

// A request that cannot be served, with its status.
struct Refusal {
  int status;
  std::string message;
  int64_t retry_after = 0;  // seconds, for the Retry-After header of a 429 (0: none)
};

// A 500 for a failure that is not the request's: a short id for the client, and the detail (which
// may hold a backtrace with code addresses) in the server's log only, under that id.
Refusal internal_error(const std::string& detail);

// `v` as JSON text, with any invalid UTF-8 it holds (a client's bytes quoted in a message) replaced
// by U+FFFD: an answer never fails for what a request contained.
std::string json_text(const nlohmann::json& v);

// The body as a JSON value: Refusal 400 when it is not valid UTF-8 or not JSON.
nlohmann::json parse_body(const std::string& body);

// The texts of a request: one string or an array of at most `limit` of them (413 beyond), each
// valid UTF-8 and not blank (400 otherwise). `field` names them in messages.
std::vector<std::string> texts_of(const nlohmann::json& v, const std::string& field, int64_t limit);

// The decoding options of a request (/v1/translate, /translate): `defaults`, with the options
// decode/option_table.h marks per_request set from its fields (JSON values, or a form's text),
// refused (400) with decode::check_options' messages; beam also at most max_beam.
decode::TranslateOptions options_of(const nlohmann::json& req, const decode::TranslateOptions& defaults,
                                    int64_t max_beam);

// A /v1/translate body: {"text": ...} or {"texts": [...]} with options, and optionally "model",
// "source" and "target" (strings) naming the model.
struct TranslateRequest {
  std::vector<std::string> texts;
  bool one = false;  // "text" (one string) rather than "texts"
  decode::TranslateOptions options;
  std::string api_key;  // "" when the request has none
  // Which model: by name, or by language pair (each "" when not given; serve/models.h routes).
  std::string model, source, target;
  // "constraints": per text, the target texts its translation must contain (empty when not given;
  // options.search.constraint_order says how, from "constraint_order").
  std::vector<std::vector<std::string>> constraints;
};

// The most constraints one text of a request may have.
constexpr int64_t kMaxConstraintsPerText = 64;

// The request's API key: its "api_key" field (LibreTranslate's) or "apiKey" (what LibreTranslate's
// npm client sends) when present, else `header` (the X-API-Key header's value); Refusal 400 when
// the field is not a string or is over 256 bytes.
std::string api_key_of(const nlohmann::json& body, const std::string& header);
TranslateRequest parse_translate_request(const std::string& body, const decode::TranslateOptions& defaults,
                                         int64_t max_beam, int64_t max_texts);

}  // namespace leanseq::serve
