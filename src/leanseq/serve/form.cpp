#include "leanseq/serve/form.h"

#include "leanseq/core/io.h"
#include "leanseq/serve/connections.h"
#include "leanseq/serve/request.h"

namespace leanseq::serve {

namespace {
Refusal too_large(size_t limit) {
  GuardedHttpServer::stop_reading();
  return Refusal{413, "the request body is larger than " + std::to_string(limit) + " bytes (--max-request-bytes)"};
}

void add_field(Form& form, const std::string& name, const std::string& value) {
  if (io::utf8_invalid_offset(name) >= 0) throw Refusal{400, "a form field's name is not valid UTF-8"};
  if (io::utf8_invalid_offset(value) >= 0) throw Refusal{400, name.substr(0, 64) + " is not valid UTF-8"};
  form.fields[name] = value;
}
}  // namespace

std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader, size_t limit) {
  if (req.is_multipart_form_data()) {
    // httplib reads a multipart body only part by part; this body is one document.
    GuardedHttpServer::stop_reading();
    throw Refusal{415, "this endpoint reads a JSON body, not multipart/form-data"};
  }
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
  if (over) throw too_large(limit);
  return body;
}

Form read_form(const httplib::Request& req, const httplib::ContentReader& reader, size_t limit) {
  Form form;
  const std::string type = req.get_header_value("Content-Type");
  if (req.is_multipart_form_data()) {
    std::vector<httplib::MultipartFormData> parts;
    size_t bytes = 0;
    bool over = false, too_many = false;
    const bool ok = reader(
        [&](const httplib::MultipartFormData& part) {
          if (parts.size() >= kMaxFormParts) {
            too_many = true;
            return false;
          }
          bytes += part.name.size() + part.filename.size();
          parts.push_back(part);
          over = bytes > limit;
          return !over;
        },
        [&](const char* data, size_t n) {
          if (n > limit - std::min(limit, bytes)) {
            over = true;
            return false;
          }
          bytes += n;
          parts.back().content.append(data, n);
          return true;
        });
    if (over) throw too_large(limit);
    if (too_many) throw Refusal{400, "the form has more than " + std::to_string(kMaxFormParts) + " parts"};
    if (!ok) throw Refusal{400, "the multipart body cannot be read"};
    for (auto& p : parts) {
      if (p.filename.empty()) {
        add_field(form, p.name, p.content);
      } else {
        if (io::utf8_invalid_offset(p.name) >= 0 || io::utf8_invalid_offset(p.filename) >= 0) {
          throw Refusal{400, "a file's field or name is not valid UTF-8"};
        }
        form.files.push_back({p.name, p.filename, std::move(p.content)});
      }
    }
    for (const auto& [k, v] : req.params) add_field(form, k, v);
    return form;
  }
  const std::string raw = read_body(req, reader, limit);
  if (type.rfind("application/json", 0) == 0) {
    form.fields = parse_body(raw);
    if (!form.fields.is_object()) throw Refusal{400, "Invalid JSON format"};
    form.json = true;
    return form;
  }
  httplib::Params params = req.params;
  httplib::detail::parse_query_text(raw, params);
  for (const auto& [k, v] : params) add_field(form, k, v);
  return form;
}

}  // namespace leanseq::serve
