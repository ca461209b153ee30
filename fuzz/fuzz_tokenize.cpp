// A text a client sends to a model trained on Moses-tokenized, BPE-segmented text (fairseq's
// --tokenizer moses --bpe subword_nmt, served or translated): tokenized and segmented, then joined
// and detokenized back, in English's, German's and French's rules, with and without escaping and
// dash splits.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "leanseq/core/error.h"
#include "leanseq/text/moses_bpe.h"

namespace {

const std::vector<std::unique_ptr<leanseq::text::MosesBpePipeline>>& pipelines() {
  static const auto all = [] {
    const std::string codes = "#version: 0.2\ne r</w>\nl o\nlo w\nn e\nne w\ne s\nes t</w>\nM ä\nMä n\n";
    std::vector<std::unique_ptr<leanseq::text::MosesBpePipeline>> p;
    for (const char* lang : {"en", "de", "fr"}) {
      for (const char* spec : {"moses", "moses no-dash-splits no-escape"}) {
        p.push_back(std::make_unique<leanseq::text::MosesBpePipeline>(
            lang, leanseq::text::parse_tokenizer_spec(spec, "fuzz"), codes, "codes.fuzz"));
      }
    }
    return p;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const auto& p : pipelines()) {
    try {
      (void)p->decode(p->encode(text));
    } catch (const leanseq::Error&) {
    }
  }
  return 0;
}
