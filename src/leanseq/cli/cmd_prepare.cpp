#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/data/prepare.h"

namespace leanseq::cli {

void add_prepare(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<data::PrepareOptions>();
  auto separate = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("prepare", "SentencePiece model, fairseq dictionaries and binarized splits");
  sub->add_option("--src", opt->src_lang, "source language suffix (train.<src>)")->required();
  sub->add_option("--tgt", opt->tgt_lang, "target language suffix")->required();
  sub->add_option("--train", opt->train, "training file prefix")->required();
  sub->add_option("--valid", opt->valid, "validation file prefix")->required();
  sub->add_option("--test", opt->test, "test file prefix (optional)");
  sub->add_option("--out", opt->out_dir, "output directory")->required();
  sub->add_option("--vocab-size", opt->vocab_size, "SentencePiece vocabulary size")->capture_default_str();
  sub->add_flag("--separate-vocab", *separate, "one SentencePiece model and dictionary per language");
  sub->add_option("--spm-model", opt->spm_model, "reuse this SentencePiece model instead of training one");
  sub->add_option("--spm-type", opt->model_type, "unigram or bpe")->capture_default_str();
  sub->add_option("--min-len", opt->min_len, "drop training pairs shorter than this (subwords)")->capture_default_str();
  sub->add_option("--max-len", opt->max_len, "drop training pairs longer than this (subwords)")->capture_default_str();
  sub->add_option("--max-ratio", opt->max_ratio, "drop training pairs with a longer length ratio (0: off)")
      ->capture_default_str();
  sub->callback([opt, separate, &exit_code] {
    opt->joint = !*separate;
    auto report = data::prepare(*opt);
    std::cout << report.format() << "wrote " << opt->out_dir << "\n";
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
