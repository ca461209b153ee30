#include "leanseq/serve/models.h"

#include <algorithm>
#include <map>

#include "leanseq/serve/request.h"

namespace leanseq::serve {

namespace {
std::string served(const std::vector<ModelInfo>& models) {
  std::string s;
  for (const auto& m : models) s += (s.empty() ? "" : ", ") + m.name + " (" + m.source_lang + " to " + m.target_lang + ")";
  return "this server translates with " + s;
}
}  // namespace

size_t route(const std::vector<ModelInfo>& models, const std::string& name, const std::string& source,
             const std::string& target) {
  if (!name.empty()) {
    for (size_t i = 0; i < models.size(); ++i) {
      if (models[i].name == name) {
        const auto& m = models[i];
        if ((!source.empty() && source != "auto" && source != m.source_lang) || (!target.empty() && target != m.target_lang)) {
          throw Refusal{400, "model " + name + " translates " + m.source_lang + " to " + m.target_lang + ", not " +
                                 (source.empty() ? "auto" : source) + " to " + (target.empty() ? "any" : target)};
        }
        return i;
      }
    }
    throw Refusal{400, "no model called " + name + ": " + served(models)};
  }
  const bool any_source = source.empty() || source == "auto";
  std::vector<size_t> found;
  for (size_t i = 0; i < models.size(); ++i) {
    if ((any_source || models[i].source_lang == source) && (target.empty() || models[i].target_lang == target)) {
      found.push_back(i);
    }
  }
  if (found.size() == 1) return found[0];
  const std::string asked = (any_source ? std::string("auto") : source) + " to " + (target.empty() ? "any" : target);
  if (found.empty()) throw Refusal{400, asked + " is not supported: " + served(models)};
  throw Refusal{400, asked + " is ambiguous: give " + (target.empty() ? "target" : "source") + " (or model); " +
                         served(models)};
}

nlohmann::json languages_json(const std::vector<ModelInfo>& models) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> targets;
  auto add = [&](const std::string& code) {
    if (targets.emplace(code, std::vector<std::string>{}).second) order.push_back(code);
  };
  for (const auto& m : models) {
    add(m.source_lang);
    add(m.target_lang);
    auto& t = targets[m.source_lang];
    if (std::find(t.begin(), t.end(), m.target_lang) == t.end()) t.push_back(m.target_lang);
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& code : order) out.push_back({{"code", code}, {"name", language_name(code)}, {"targets", targets[code]}});
  return out;
}

std::string language_name(const std::string& code) {
  static const std::map<std::string, std::string> names = {
      {"ar", "Arabic"},  {"cs", "Czech"},   {"de", "German"},   {"en", "English"},    {"es", "Spanish"},
      {"fi", "Finnish"}, {"fr", "French"},  {"hi", "Hindi"},    {"it", "Italian"},    {"ja", "Japanese"},
      {"ko", "Korean"},  {"nl", "Dutch"},   {"pl", "Polish"},   {"pt", "Portuguese"}, {"ro", "Romanian"},
      {"ru", "Russian"}, {"sv", "Swedish"}, {"tr", "Turkish"},  {"uk", "Ukrainian"},  {"zh", "Chinese"}};
  auto it = names.find(code);
  return it == names.end() ? code : it->second;
}

}  // namespace leanseq::serve
