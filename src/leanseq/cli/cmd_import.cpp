// import-fairseq: a fairseq checkpoint (with its dictionaries and SentencePiece model) as a
// leanseq checkpoint that every other command takes.
#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/interop/fairseq.h"

namespace leanseq::cli {

void add_import_fairseq(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<interop::FairseqImportOptions>();
  auto* sub = app.add_subcommand(
      "import-fairseq",
      "a fairseq 0.9-0.12 checkpoint (transformer, lightconv/dynamicconv, fconv) as a leanseq checkpoint");
  sub->add_option("--checkpoint", o->checkpoint, "fairseq's .pt file (zip or legacy format)")->required();
  sub->add_option("--data-dir", o->data_dir, "the directory with fairseq's dict.<src>.txt and dict.<tgt>.txt")
      ->required();
  sub->add_option("--output,--out,-o", o->out, "the leanseq checkpoint to write")->required();
  auto* spm = sub->add_option("--spm", o->spm, "the SentencePiece model the data was encoded with (both languages)");
  auto* tokenizer = sub->add_option("--tokenizer", o->tokenizer,
                                    "moses: the data was Moses-tokenized (fairseq's --tokenizer moses)")
                        ->check(CLI::IsMember({"moses"}));
  sub->add_option("--bpe-codes", o->bpe_codes, "subword-nmt codes the Moses tokens were segmented with")
      ->needs(tokenizer);
  spm->excludes(tokenizer);
  sub->add_option("--source-lang", o->source_lang, "source language (default: the checkpoint's)");
  sub->add_option("--target-lang", o->target_lang, "target language (default: the checkpoint's)");
  sub->callback([o, &exit_code] {
    const auto r = interop::import_fairseq(*o);
    log::info("imported fairseq " + r.fairseq_arch + " (" + r.source_lang + "->" + r.target_lang + ", " +
              std::to_string(r.parameters) + " parameters, dictionaries of " + std::to_string(r.src_vocab) + " and " +
              std::to_string(r.tgt_vocab) + " symbols) as leanseq " + r.leanseq_arch + ": " + o->out);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
