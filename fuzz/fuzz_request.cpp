// Bodies of POST /v1/translate as the server reads them (serve/request.h): texts and options, or
// a Refusal with its status.
#include <cstddef>
#include <cstdint>
#include <string>

#include "leanseq/serve/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  try {
    auto r = leanseq::serve::parse_translate_request(body, {}, 16, 256);
    (void)r.texts.size();
  } catch (const leanseq::serve::Refusal& r) {
    if (r.status < 400 || r.status > 499) __builtin_trap();  // a bad body is the client's fault
  }
  return 0;
}
