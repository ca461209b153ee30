// A request's body as fields: a JSON object, a form (application/x-www-form-urlencoded, with the
// query string's fields) or multipart/form-data (fields and uploaded files), read through
// httplib's content reader under one byte limit whatever the transfer encoding.
#pragma once
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace leanseq::serve {

// Parts of a multipart body at most (a field or a file each).
constexpr size_t kMaxFormParts = 32;

struct Form {
  nlohmann::json fields = nlohmann::json::object();  // JSON values, or a form's text
  bool json = false;                                 // the body was JSON
  struct File {
    std::string field, filename, content;
  };
  std::vector<File> files;
};

// The body's bytes: Refusal 413 past `limit`, 415 for a multipart body (and in both cases the
// connection is not read further).
std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader, size_t limit);

// The body's fields: Refusal 400 for invalid JSON or UTF-8 (a field's name or value; files are
// bytes), a JSON body that is not an object, a multipart body that cannot be read or has more than
// kMaxFormParts parts; 413 past `limit` bytes.
Form read_form(const httplib::Request& req, const httplib::ContentReader& reader, size_t limit);

}  // namespace leanseq::serve
