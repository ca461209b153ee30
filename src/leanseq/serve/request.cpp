#include "leanseq/serve/request.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <random>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/decode/option_table.h"

namespace leanseq::serve {

using json = nlohmann::json;

Refusal internal_error(const std::string& detail) {
  static std::atomic<uint64_t> next{0};
  static const uint32_t run = std::random_device{}();
  char id[32];
  std::snprintf(id, sizeof id, "%08x-%llu", run, static_cast<unsigned long long>(++next));
  log::error("internal error " + std::string(id) + ": " + detail.substr(0, 4096));
  return Refusal{500, "internal error " + std::string(id) + " (the server's log has its detail)"};
}

std::string json_text(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_body(const std::string& body) {
  if (io::utf8_invalid_offset(body) >= 0) throw Refusal{400, "the body is not valid UTF-8"};
  try {
    return json::parse(body);
  } catch (const json::exception& e) {  // a syntax error, or a number past a double's range
    throw Refusal{400, std::string("invalid JSON: ") + e.what()};
  }
}

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

decode::OptionValue option_value(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return v.get<double>();
    return v.get<int64_t>();
  }
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  return json_text(v).substr(0, 100);  // a list or an object: refused as text by every option but prefix's
}

decode::TranslateOptions options_of(const json& req, const decode::TranslateOptions& defaults, int64_t max_beam) {
  decode::TranslateOptions o = defaults;
  try {
    for (const auto& option : decode::decoding_options()) {
      if (option.per_request && req.contains(option.name)) decode::set_option(o, option, option_value(req[option.name]));
    }
    decode::check_options(o);
  } catch (const ConfigError& e) {
    throw Refusal{400, e.what()};
  }
  if (req.contains("beam") && o.search.beam > max_beam) {  // (the server's own --beam may be wider)
    throw Refusal{400, "beam: at most " + std::to_string(max_beam) + " on this server (--max-beam), got " +
                           std::to_string(o.search.beam)};
  }
  return o;
}

TranslateRequest parse_translate_request(const std::string& body, const decode::TranslateOptions& defaults,
                                         int64_t max_beam, int64_t max_texts) {
  const json j = parse_body(body);
  if (!j.is_object()) throw Refusal{400, "the body must be a JSON object with \"text\" or \"texts\""};
  if (j.contains("text") == j.contains("texts")) throw Refusal{400, "give one of \"text\" and \"texts\""};
  TranslateRequest r;
  r.one = j.contains("text");
  r.texts = texts_of(r.one ? j["text"] : j["texts"], r.one ? "text" : "texts", max_texts);
  // The constraints' order goes into the options before they are checked (not with sampling).
  decode::TranslateOptions with_order = defaults;
  if (j.contains("constraint_order") && !j.contains("constraints")) {
    throw Refusal{400, "constraint_order goes with constraints"};
  }
  if (j.contains("constraints")) {
    const json order = j.value("constraint_order", json("ordered"));
    try {
      with_order.search.constraint_order = decode::parse_constraint_order(order.is_string() ? order.get<std::string>() : order.dump());
    } catch (const ConfigError& e) {
      throw Refusal{400, std::string("constraint_order must be ") + e.what()};
    }
  }
  r.options = options_of(j, with_order, max_beam);
  r.api_key = api_key_of(j, "");
  for (auto [field, value] : {std::pair<const char*, std::string*>{"model", &r.model}, {"source", &r.source},
                              {"target", &r.target}}) {
    if (!j.contains(field)) continue;
    if (!j[field].is_string() || j[field].get<std::string>().size() > 64) {
      throw Refusal{400, std::string(field) + " must be a string of at most 64 bytes"};
    }
    *value = j[field].get<std::string>();
  }
  if (j.contains("constraints")) {
    // "text": a list of strings; "texts": one such list per text.
    const json& c = j["constraints"];
    auto one_list = [&](const json& v, const std::string& where) {
      if (!v.is_array()) throw Refusal{400, where + " must be a list of strings"};
      if (static_cast<int64_t>(v.size()) > kMaxConstraintsPerText) {
        throw Refusal{413, where + " has " + std::to_string(v.size()) + " constraints, more than " +
                               std::to_string(kMaxConstraintsPerText)};
      }
      return v.empty() ? std::vector<std::string>{} : texts_of(v, where, kMaxConstraintsPerText);
    };
    if (r.one) {
      r.constraints.push_back(one_list(c, "constraints"));
    } else {
      if (!c.is_array() || c.size() != r.texts.size()) {
        throw Refusal{400, "constraints must be a list with one list of strings per text"};
      }
      for (size_t i = 0; i < c.size(); ++i) r.constraints.push_back(one_list(c[i], "constraints[" + std::to_string(i) + "]"));
    }
  }
  return r;
}

std::string api_key_of(const json& body, const std::string& header) {
  std::string key = header;
  // LibreTranslate's name, and the one its npm client sends.
  for (const char* field : {"apiKey", "api_key"}) {
    if (!body.is_object() || !body.contains(field)) continue;
    if (!body[field].is_string()) throw Refusal{400, std::string(field) + " must be a string"};
    key = body[field].get<std::string>();
  }
  if (key.size() > 256) throw Refusal{400, "api_key is longer than 256 bytes"};
  return key;
}

}  // namespace leanseq::serve
