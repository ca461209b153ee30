// fairseq 0.12 checkpoints made leanseq checkpoints (docs/fairseq.md). Part of the stable API
// (docs/versioning.md).
#pragma once
#include <cstdint>
#include <string>

namespace leanseq {

struct FairseqImportOptions {
  std::string checkpoint;  // fairseq's .pt
  std::string data_dir;    // holds dict.<src>.txt and dict.<tgt>.txt (a language model's: dict.txt)
  std::string out;         // the leanseq checkpoint to write (atomically)
  std::string spm;         // SentencePiece model of both sides, or:
  std::string tokenizer;   // "moses" (fairseq's, with its dash splits and escaping), "moses no-dash-splits",
                           // "moses no-escape", both, or "none"
  std::string bpe_codes;   // with BPE from these codes, subword-nmt's or fastBPE's (optional with moses)
  std::string source_lang, target_lang;  // default: the checkpoint's task options
};

struct FairseqImportResult {
  std::string fairseq_arch, leanseq_arch, source_lang, target_lang;
  int64_t parameters = 0, src_vocab = 0, tgt_vocab = 0;
};

// Reads the fairseq checkpoint without running any of its code, maps it, checks that every weight
// loads into the leanseq model (and no other), and writes `out`. Errors name the file and the problem.
FairseqImportResult import_fairseq(const FairseqImportOptions& options);

}  // namespace leanseq
