#include "leanseq/serve/spec.h"

#include <limits>

#include "leanseq/decode/option_table.h"

namespace leanseq::serve {

using json = nlohmann::json;

namespace {

json schema_of(const decode::DecodingOption& o, const decode::TranslateOptions& defaults) {
  using Kind = decode::DecodingOption::Kind;
  json s;
  switch (o.kind()) {
    case Kind::integer: s["type"] = "integer"; break;
    case Kind::number: s["type"] = "number"; break;
    case Kind::flag: s["type"] = "boolean"; break;
    case Kind::text: s["type"] = "string"; break;
  }
  if (o.kind() == Kind::integer || o.kind() == Kind::number) {
    const double big = std::numeric_limits<double>::max();
    if (o.range.lo > -big) {
      s["minimum"] = o.range.lo;
      if (o.range.lo_open) s["exclusiveMinimum"] = true;
    }
    if (o.range.hi < big) {
      s["maximum"] = o.range.hi;
      if (o.range.hi_open) s["exclusiveMaximum"] = true;
    }
  }
  s["description"] = std::string(o.help) + " (" + o.expected() + "; default " + o.value_text(defaults) + ")";
  return s;
}

json text_or_list(const std::string& what) {
  return {{"oneOf", json::array({{{"type", "string"}}, {{"type", "array"}, {"items", {{"type", "string"}}}}})},
          {"description", what}};
}

json error_responses() {
  json schema = {{"type", "object"}, {"properties", {{"error", {{"type", "string"}}}}}};
  json error = {{"description", "the request cannot be served"}};
  error["content"]["application/json"]["schema"] = schema;
  return {{"400", error}, {"403", error}, {"413", error}, {"429", error}, {"503", error}};
}

json operation(const std::string& summary, const json& body, const std::string& body_type = "application/json") {
  json op = {{"summary", summary}, {"responses", error_responses()}};
  op["responses"]["200"] = {{"description", "OK"}};
  if (!body.is_null()) {
    op["requestBody"] = {{"required", true}, {"content", {{body_type, {{"schema", body}}}}}};
    if (body_type == "application/json") {
      op["requestBody"]["content"]["application/x-www-form-urlencoded"] = {{"schema", body}};
    }
  }
  return op;
}

}  // namespace

json openapi_spec(const std::vector<ModelInfo>& models, const LibreTranslateOptions& lt,
                  const decode::TranslateOptions& defaults, const std::string& version) {
  std::vector<std::string> codes{"auto"};
  for (const auto& l : languages_json(models)) codes.push_back(l["code"]);
  json options = json::object();
  for (const auto& o : decode::decoding_options()) {
    if (o.per_request) options[o.name] = schema_of(o, defaults);
  }
  json libre = {{"type", "object"},
                {"required", {"q", "source", "target"}},
                {"properties",
                 {{"q", text_or_list("the text, or texts, to translate")},
                  {"source", {{"type", "string"}, {"enum", codes}, {"description", "source language, or auto"}}},
                  {"target", {{"type", "string"}, {"description", "target language"}}},
                  {"format", {{"type", "string"}, {"enum", {"text", "html"}}}},
                  {"alternatives", {{"type", "integer"}, {"minimum", 0}, {"description", "other translations to return"}}},
                  {"api_key", {{"type", "string"}}}}}};
  libre["properties"].update(options);
  json own = {{"type", "object"},
              {"properties",
               {{"text", {{"type", "string"}}},
                {"texts", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                {"model", {{"type", "string"}}},
                {"source", {{"type", "string"}}},
                {"target", {{"type", "string"}}},
                {"constraints", {{"type", "array"}}},
                {"constraint_order", {{"type", "string"}, {"enum", {"ordered", "unordered"}}}}}}};
  own["properties"].update(options);
  json detect = {{"type", "object"}, {"required", {"q"}}, {"properties", {{"q", text_or_list("the text")}, {"api_key", {{"type", "string"}}}}}};
  json file = {{"type", "object"},
               {"required", {"file", "source", "target"}},
               {"properties",
                {{"file", {{"type", "string"}, {"format", "binary"}, {"description", "one of " + json(lt.file_formats).dump()}}},
                 {"source", {{"type", "string"}}},
                 {"target", {{"type", "string"}}},
                 {"api_key", {{"type", "string"}}}}}};
  json paths = {
      {"/translate", {{"post", operation("Translate text (LibreTranslate's API)", libre)}}},
      {"/detect", {{"post", operation("Detect the language of a text, among those served", detect)}}},
      {"/languages", {{"get", operation("The languages served, each with its targets", nullptr)}}},
      {"/frontend/settings", {{"get", operation("The settings of the web page", nullptr)}}},
      {"/suggest", {{"post", operation("Suggestions are not taken (403)", nullptr)}}},
      {"/health", {{"get", operation("{\"status\": \"ok\"} while the server runs", nullptr)}}},
      {"/metrics", {{"get", operation("Prometheus metrics", nullptr)}}},
      {"/spec", {{"get", operation("This document", nullptr)}}},
      {"/v1/translate", {{"post", operation("Translate text (leanseq's API: scores, tokens, n-best, constraints)", own)}}},
      {"/v1/health", {{"get", operation("Each model served, with its queue", nullptr)}}}};
  if (lt.files) {
    paths["/translate_file"] = {{"post", operation("Translate a file (" + json(lt.file_formats).dump() + ")", file, "multipart/form-data")}};
    paths["/download_file/{filename}"] = {
        {"get", operation("Download a translated file", nullptr)}};
    paths["/download_file/{filename}"]["get"]["parameters"] = {
        {{"name", "filename"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}}};
  }
  return {{"openapi", "3.0.3"},
          {"info", {{"title", "leanseq serve"}, {"version", version}, {"description", "Translation with " + std::to_string(models.size()) + " model(s)"}}},
          {"paths", paths}};
}

}  // namespace leanseq::serve
