// fairseq dict.txt contents: a Dictionary or DataError naming the line.
#include <cstddef>
#include <cstdint>
#include <string>

#include "leanseq/core/error.h"
#include "leanseq/data/dictionary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto d = leanseq::data::Dictionary::parse(text, "dict.fuzz.txt");
    (void)d.encode({"a", "b"}, true);
  } catch (const leanseq::Error&) {
  }
  return 0;
}
