// The restricted unpickler on arbitrary bytes: a value or PickleError, never a crash, a hang, or
// memory beyond the input's size.
#include <cstddef>
#include <cstdint>
#include <string>

#include "leanseq/interop/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    size_t pos = 0;
    auto value = leanseq::interop::unpickle(bytes, pos, {"fuzz.pkl"});
    (void)value->describe();
  } catch (const leanseq::interop::PickleError&) {
  }
  return 0;
}
