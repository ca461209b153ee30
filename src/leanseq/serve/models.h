// The models one server serves: their names and language pairs, which one a request means, and
// LibreTranslate's list of languages. Separate from the server so that it is tested alone.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace leanseq::serve {

struct ModelInfo {
  std::string name, source_lang, target_lang;
};

// The model a request means: the one called `name` when it is given; else the one that translates
// `source` ("auto" or empty: any source) into `target` (empty: any target). Refusal 400 naming
// what is served when no model or several match.
size_t route(const std::vector<ModelInfo>& models, const std::string& name, const std::string& source,
             const std::string& target);

// LibreTranslate's GET /languages: every language a model reads or writes, with the languages
// some model translates it into, in the order the models were given.
nlohmann::json languages_json(const std::vector<ModelInfo>& models);

// An English name for a language code ("de": "German"), or the code itself.
std::string language_name(const std::string& code);

}  // namespace leanseq::serve
