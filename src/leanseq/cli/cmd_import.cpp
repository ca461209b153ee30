// import-fairseq and import-ctranslate2: a fairseq checkpoint (with its dictionaries and text
// pipeline), a CTranslate2 model directory or an Argos Translate package as a leanseq checkpoint
// that every other command takes.
#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/interop/ctranslate2.h"
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
  auto* tokenizer =
      sub->add_option("--tokenizer", o->tokenizer,
                      "moses: fairseq's --tokenizer moses (dash splits and escaping, as fairseq's defaults); none: the "
                      "text comes tokenized")
          ->check(CLI::IsMember({"moses", "none"}));
  auto no_dash_splits = std::make_shared<bool>(false), no_escape = std::make_shared<bool>(false);
  sub->add_flag("--moses-no-dash-splits", *no_dash_splits, "fairseq's: Moses leaves hyphens inside words alone")
      ->needs(tokenizer);
  sub->add_flag("--moses-no-escape", *no_escape, "fairseq's: Moses does not escape & | < > ' \" [ ]")->needs(tokenizer);
  sub->add_option("--bpe-codes", o->bpe_codes,
                  "BPE codes the tokens were segmented with: subword-nmt's, or fastBPE's ('a b count' lines)")
      ->needs(tokenizer);
  spm->excludes(tokenizer);
  sub->add_option("--source-lang,-s", o->source_lang, "source language (default: the checkpoint's)");
  sub->add_option("--target-lang,-t", o->target_lang, "target language (default: the checkpoint's)");
  sub->callback([o, no_dash_splits, no_escape, &exit_code] {
    if ((*no_dash_splits || *no_escape) && o->tokenizer != "moses") {
      throw ConfigError("import-fairseq: --moses-no-dash-splits and --moses-no-escape go with --tokenizer moses");
    }
    if (*no_dash_splits) o->tokenizer += " no-dash-splits";
    if (*no_escape) o->tokenizer += " no-escape";
    const auto r = interop::import_fairseq(*o);
    log::info("imported fairseq " + r.fairseq_arch + " (" + r.source_lang + "->" + r.target_lang + ", " +
              std::to_string(r.parameters) + " parameters, dictionaries of " + std::to_string(r.src_vocab) + " and " +
              std::to_string(r.tgt_vocab) + " symbols) as leanseq " + r.leanseq_arch + ": " + o->out);
    exit_code = 0;
  });
}

void add_import_ctranslate2(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<interop::Ct2ImportOptions>();
  auto* sub = app.add_subcommand("import-ctranslate2",
                                 "a CTranslate2 Transformer model directory or an Argos Translate package (.argosmodel or "
                                 "unpacked) as a leanseq checkpoint (its storage type kept)");
  sub->add_option("model", o->model, "the CTranslate2 model directory or the Argos Translate package")->required();
  sub->add_option("--output,--out,-o", o->out, "the leanseq checkpoint to write")->required();
  auto* spm = sub->add_option("--spm", o->spm,
                              "the SentencePiece model of both sides (default: the package's sentencepiece.model; "
                              "without one, input is given as the model's tokens)");
  auto* tokenizer = sub->add_option("--tokenizer", o->tokenizer, "moses or none, instead of SentencePiece")
                        ->check(CLI::IsMember({"moses", "none"}));
  sub->add_option("--bpe-codes", o->bpe_codes, "BPE codes after Moses (subword-nmt's or fastBPE's)")->needs(tokenizer);
  spm->excludes(tokenizer);
  sub->add_option("--source-lang,-s", o->source_lang, "source language (default: the package's, else src)");
  sub->add_option("--target-lang,-t", o->target_lang, "target language (default: the package's, else tgt)");
  sub->callback([o, &exit_code] {
    const auto r = interop::import_ctranslate2(*o);
    log::info("imported CTranslate2 " + r.spec + " (binary version " + std::to_string(r.binary_version) + ", " +
              r.storage + " weights, " + r.source_lang + "->" + r.target_lang + ", " + std::to_string(r.parameters) +
              " parameters, vocabularies of " + std::to_string(r.src_vocab) + " and " + std::to_string(r.tgt_vocab) +
              " symbols, text: " + r.text_pipeline + "): " + o->out);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
