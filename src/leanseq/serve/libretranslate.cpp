#include "leanseq/serve/libretranslate.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "leanseq/core/io.h"
#include "leanseq/serve/html.h"
#include "leanseq/serve/language_id.h"
#include "leanseq/serve/request.h"
#include "leanseq/serve/segments.h"

namespace leanseq::serve {

using json = nlohmann::json;

namespace {

// A string field ("" when absent or null); LibreTranslate's codes and formats are strings.
std::string field(const json& fields, const char* name) {
  if (!fields.contains(name) || fields[name].is_null()) return "";
  if (!fields[name].is_string()) throw Refusal{400, std::string("Invalid request: ") + name + " parameter must be a string"};
  std::string v = fields[name].get<std::string>();
  if (v.size() > 64) throw Refusal{400, std::string("Invalid request: ") + name + " parameter is longer than 64 bytes"};
  return v;
}

Refusal missing(const std::string& name) { return Refusal{400, "Invalid request: missing " + name + " parameter"}; }

// A string field that must be there (LibreTranslate's "missing ... parameter" otherwise).
std::string required(const json& fields, const char* name) {
  std::string v = field(fields, name);
  if (v.empty()) throw missing(name);
  return v;
}

// What language identification reads of `texts`: them, a line each, up to its bound.
std::string detection_text(const std::vector<std::string>& texts) {
  std::string all;
  for (const auto& t : texts) {
    if (all.size() >= kMaxDetectBytes) break;
    all += t + "\n";
  }
  return all;
}

Refusal over_limit(size_t size, int64_t limit) {
  return Refusal{400, "Invalid request: request (" + std::to_string(size) + ") exceeds text limit (" +
                          std::to_string(limit) + ")"};
}

// "alternatives" as LibreTranslate reads it: an integer (or a form's text of one), at least 0.
int64_t alternatives_of(const json& fields) {
  if (!fields.contains("alternatives") || fields["alternatives"].is_null()) return 0;
  const json& a = fields["alternatives"];
  const Refusal not_number{400, "Invalid request: alternatives parameter is not a number"};
  int64_t n = 0;
  if (a.is_number_integer()) {
    n = a.is_number_unsigned() && a.get<uint64_t>() > 1000000 ? 1000000 : a.get<int64_t>();
  } else if (a.is_number_float()) {
    const double d = a.get<double>();
    n = d > 1e6 ? 1000000 : d < -1e6 ? -1000000 : static_cast<int64_t>(d);
  } else if (a.is_string()) {
    std::string s = a.get<std::string>();
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    const size_t digits = s.find_first_not_of("0123456789", s.empty() || (s[0] != '-' && s[0] != '+') ? 0 : 1);
    if (s.empty() || digits != std::string::npos || s.size() > 8 || s == "-" || s == "+") throw not_number;
    n = std::stoll(s);
  } else {
    throw not_number;
  }
  return std::max<int64_t>(0, n);
}

// A form's line breaks as LibreTranslate counts them: "\r\n" and "\r" become "\n".
std::string unix_newlines(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string lower_extension(const std::string& filename) {
  const size_t dot = filename.rfind('.');
  if (dot == std::string::npos) return "";
  std::string ext = filename.substr(dot);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

}  // namespace

LibreTranslate::LibreTranslate(std::vector<ModelInfo> models, LibreTranslateOptions opt, decode::TranslateOptions defaults,
                               int64_t max_beam, int64_t max_texts, int64_t max_sentences, SentenceTranslator translate)
    : models_(std::move(models)),
      opt_(std::move(opt)),
      defaults_(std::move(defaults)),
      max_beam_(max_beam),
      max_texts_(max_texts),
      max_sentences_(max_sentences),
      translate_(std::move(translate)) {
  for (const auto& lang : languages_json(models_)) served_.push_back(lang["code"]);
  for (const auto& m : models_) {
    if (std::find(sources_.begin(), sources_.end(), m.source_lang) == sources_.end()) sources_.push_back(m.source_lang);
  }
}

LibreTranslate::Route LibreTranslate::route(const std::string& source, const std::string& target,
                                            const std::vector<std::string>& texts) const {
  auto is_served = [&](const std::string& code) { return std::find(served_.begin(), served_.end(), code) != served_.end(); };
  const bool automatic = source == "auto";
  if (!automatic && !is_served(source)) throw Refusal{400, source + " is not supported"};
  if (!is_served(target)) throw Refusal{400, target + " is not supported"};
  Route r{0, json()};
  std::string from = source;
  if (automatic) {
    // Among the languages some model translates into the target (any source when none does).
    std::vector<std::string> candidates;
    for (const auto& m : models_) {
      if (m.target_lang == target && std::find(candidates.begin(), candidates.end(), m.source_lang) == candidates.end()) {
        candidates.push_back(m.source_lang);
      }
    }
    const auto guess = identify_language(detection_text(texts), candidates.empty() ? sources_ : candidates).front();
    from = guess.language;
    r.detected = {{"confidence", guess.confidence}, {"language", guess.language}};
  }
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i].source_lang == from && models_[i].target_lang == target) {
      r.model = i;
      return r;
    }
  }
  throw Refusal{400, language_name(target) + " (" + target + ") is not available as a target language from " +
                         language_name(from) + " (" + from + ")"};
}

std::vector<std::vector<std::string>> LibreTranslate::translate_texts(size_t model, const std::vector<std::string>& texts,
                                                                      bool html, int64_t alternatives,
                                                                      decode::TranslateOptions o) const {
  const std::string& language = models_[model].source_lang;
  // Each text's sentences (an HTML text's: those of each run of text between tags), all in one batch.
  struct Unit {
    std::optional<HtmlText> html;
    std::vector<Segments> runs;
  };
  std::vector<Unit> units(texts.size());
  std::vector<std::string> sentences;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto& u = units[i];
    if (html) u.html.emplace(texts[i]);
    for (const auto& run : html ? u.html->parts() : std::vector<std::string>{texts[i]}) {
      u.runs.push_back(sentences_of(run, language));
      sentences.insert(sentences.end(), u.runs.back().parts.begin(), u.runs.back().parts.end());
      if (static_cast<int64_t>(sentences.size()) > max_sentences_) {
        throw Refusal{413, "the request has more than " + std::to_string(max_sentences_) +
                               " sentences, more than this server queues (--queue-limit)"};
      }
    }
  }
  o.search.nbest = alternatives + 1;
  o.search.beam = std::max(o.search.beam, o.search.nbest);
  const auto hyps = sentences.empty() ? std::vector<std::vector<std::string>>{} : translate_(model, sentences, o);
  // Version k of every text: each sentence's k-th hypothesis (its last when it has fewer).
  std::vector<std::vector<std::string>> out(texts.size());
  for (int64_t k = 0; k <= alternatives; ++k) {
    size_t next = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      std::vector<std::string> runs;
      for (const auto& run : units[i].runs) {
        std::vector<std::string> translated;
        for (size_t s = 0; s < run.parts.size(); ++s, ++next) {
          const auto& h = hyps.at(next);
          translated.push_back(h.at(std::min<size_t>(static_cast<size_t>(k), h.size() - 1)));
        }
        runs.push_back(run.join(translated));
      }
      std::string text = html ? units[i].html->join(runs) : runs.at(0);
      // LibreTranslate's alternatives: distinct, neither empty nor the translation itself.
      auto& versions = out[i];
      if (k == 0 || (!text.empty() && std::find(versions.begin(), versions.end(), text) == versions.end())) {
        versions.push_back(std::move(text));
      }
    }
  }
  return out;
}

json LibreTranslate::translate(const json& fields, bool json_body, std::optional<int64_t> char_limit) const {
  const int64_t chars = char_limit.value_or(opt_.char_limit);
  if (!fields.is_object()) throw Refusal{400, "Invalid JSON format"};
  const json q = fields.contains("q") ? fields["q"] : json();
  if (q.is_null() || (q.is_string() && q.get<std::string>().empty()) || (q.is_array() && q.empty()) ||
      (q.is_boolean() && !q.get<bool>())) {
    throw missing("q");
  }
  const std::string source = required(fields, "source");
  const std::string target = required(fields, "target");
  const int64_t alternatives = alternatives_of(fields);
  if (opt_.alternatives_limit != -1 && alternatives > opt_.alternatives_limit) {
    throw Refusal{400, "Invalid request: alternatives parameter must be <= " + std::to_string(opt_.alternatives_limit)};
  }
  if (alternatives + 1 > max_beam_) {  // the n-best comes from one beam (--max-beam)
    throw Refusal{400, "Invalid request: alternatives parameter must be <= " + std::to_string(max_beam_ - 1)};
  }
  const bool list = q.is_array();
  auto texts = texts_of(q, "q", max_texts_);
  if (!json_body) {
    for (auto& t : texts) t = unix_newlines(t);
  }
  if (list && opt_.batch_limit != -1 && static_cast<int64_t>(texts.size()) > opt_.batch_limit) {
    throw over_limit(texts.size(), opt_.batch_limit);
  }
  if (chars != -1) {
    for (const auto& t : texts) {
      if (static_cast<int64_t>(code_points(t)) > chars) throw over_limit(code_points(t), chars);
    }
  }
  const Route r = route(source, target, texts);
  std::string format = field(fields, "format");
  if (format.empty()) format = "text";
  if (format != "text" && format != "html") throw Refusal{400, format + " format is not supported"};
  const auto versions = translate_texts(r.model, texts, format == "html", alternatives,
                                        options_of(fields, defaults_, max_beam_));
  json translated = json::array(), others = json::array();
  for (const auto& v : versions) {
    translated.push_back(v.front());
    others.push_back(std::vector<std::string>(v.begin() + 1, v.end()));
  }
  json out = {{"translatedText", list ? translated : translated[0]}};
  if (source == "auto") out["detectedLanguage"] = list ? json(std::vector<json>(texts.size(), r.detected)) : r.detected;
  if (alternatives > 0) out["alternatives"] = list ? others : others[0];
  return out;
}

json LibreTranslate::detect(const json& fields) const {
  if (!fields.is_object()) throw Refusal{400, "Invalid JSON format"};
  const json q = fields.contains("q") ? fields["q"] : json();
  if (q.is_null() || (q.is_string() && q.get<std::string>().empty()) || (q.is_array() && q.empty())) throw missing("q");
  json out = json::array();
  for (const auto& g : identify_language(detection_text(texts_of(q, "q", max_texts_)), served_)) out.push_back({{"confidence", g.confidence}, {"language", g.language}});
  return out;
}

std::string LibreTranslate::translate_file(const std::string& filename, const std::string& content,
                                           const json& fields, std::optional<int64_t> char_limit) const {
  const int64_t chars = char_limit.value_or(opt_.char_limit);
  if (!opt_.files) throw Refusal{403, "Files translation are disabled on this server."};
  const std::string source = required(fields, "source");
  const std::string target = required(fields, "target");
  if (content.empty()) throw Refusal{400, "Invalid request: empty file"};
  const std::string ext = lower_extension(filename);
  const bool html = ext == ".html" || ext == ".htm";
  if (!html && ext != ".txt") throw Refusal{400, "Invalid request: file format not supported"};
  if (io::utf8_invalid_offset(content) >= 0) throw Refusal{400, "Invalid request: the file is not UTF-8 text"};
  if (chars != -1 && static_cast<int64_t>(code_points(content)) > chars) throw over_limit(code_points(content), chars);
  const Route r = route(source, target, {content});
  return translate_texts(r.model, {content}, html, 0, defaults_).at(0).at(0);
}

json LibreTranslate::frontend_settings(bool keys_required) const {
  const auto& first = models_.front();
  return {{"charLimit", opt_.char_limit},
          {"frontendTimeout", opt_.frontend_timeout_ms},
          {"apiKeys", keys_required},
          {"keyRequired", keys_required},
          {"suggestions", false},
          {"filesTranslation", opt_.files},
          {"supportedFilesFormat", opt_.files ? opt_.file_formats : std::vector<std::string>{}},
          {"language",
           {{"source", {{"code", first.source_lang}, {"name", language_name(first.source_lang)}}},
            {"target", {{"code", first.target_lang}, {"name", language_name(first.target_lang)}}}}}};
}

}  // namespace leanseq::serve
