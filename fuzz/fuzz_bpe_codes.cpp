// A BPE codes file (subword-nmt's 0.1 or 0.2, or fastBPE's "a b count" lines), as a fairseq model
// downloaded from anywhere brings it: a Bpe or a DataError naming the line. Any codes segment
// words into pieces that join back to them; the file's own lines are segmented too, so that its
// merges apply.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "leanseq/core/error.h"
#include "leanseq/text/bpe.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string codes(reinterpret_cast<const char*>(data), size);
  try {
    const auto bpe = leanseq::text::Bpe::from_text(codes, "codes.fuzz");
    for (const char* line : {"lower newest widest", "Männer , die Häuser", "a b c", "tschüß !"}) {
      if (bpe.remove(bpe.apply_line(line)) != line) __builtin_trap();
    }
    std::istringstream in(codes);
    std::string line;
    for (int i = 0; i < 16 && std::getline(in, line); ++i) (void)bpe.apply_line(line);
  } catch (const leanseq::Error&) {
  }
  return 0;
}
