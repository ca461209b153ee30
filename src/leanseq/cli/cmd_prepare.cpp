#include <sys/resource.h>

#include <cstdio>
#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/timer.h"
#include "leanseq/data/prepare.h"

namespace leanseq::cli {

void add_prepare(CLI::App& app, int& exit_code) {
  auto opt = std::make_shared<data::PrepareOptions>();
  auto separate = std::make_shared<bool>(false);
  auto lang = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("prepare", "SentencePiece model, fairseq dictionaries and binarized splits");
  sub->add_option("--src,--source-lang,-s", opt->src_lang, "source language suffix (train.<src>)");
  sub->add_option("--tgt,--target-lang,-t", opt->tgt_lang, "target language suffix");
  sub->add_flag("--lm", opt->language_model, "a monolingual corpus for a language model (with --lang)");
  sub->add_option("--lang", *lang, "language suffix of a --lm corpus (train.<lang>)");
  sub->add_option("--train,--trainpref", opt->train, "training file prefix")->required();
  sub->add_option("--valid,--validpref", opt->valid, "validation file prefix")->required();
  sub->add_option("--test,--testpref", opt->test, "test file prefix (optional)");
  sub->add_option("--output-dir,--out,--destdir,-o", opt->out_dir, "output directory")->required();
  sub->add_option("--vocab-size", opt->vocab_size, "SentencePiece vocabulary size")->capture_default_str();
  sub->add_flag("--separate-vocab", *separate, "one SentencePiece model and dictionary per language");
  sub->add_option("--spm-model", opt->spm_model, "reuse this SentencePiece model instead of training one");
  sub->add_option("--spm-type", opt->model_type, "unigram or bpe")->capture_default_str();
  sub->add_option("--workers", opt->workers, "SentencePiece encoders at once (one helper process pair each)")
      ->capture_default_str();
  sub->add_flag("--dedup", opt->dedup, "leave out exact duplicates of an earlier training pair");
  sub->add_option("--shard-size", opt->shard_size,
                  "write train as shard-000/, shard-001/, ... of this many pairs each (0: one directory)")
      ->capture_default_str();
  sub->add_option("--spm-sample-mb", opt->spm_sample_mb,
                  "megabytes of training text SentencePiece trains on at most: pairs sampled at random (its trainer "
                  "needs about 23x this in memory)")
      ->capture_default_str();
  sub->add_option("--min-len", opt->min_len, "drop training pairs shorter than this (subwords)")->capture_default_str();
  sub->add_option("--max-len", opt->max_len, "drop training pairs longer than this (subwords)")->capture_default_str();
  sub->add_option("--max-ratio", opt->max_ratio, "drop training pairs with a longer length ratio (0: off)")
      ->capture_default_str();
  sub->callback([opt, separate, lang, &exit_code] {
    opt->joint = !*separate;
    if (opt->language_model) {
      if (!opt->tgt_lang.empty()) throw ConfigError("prepare --lm: use --lang for the corpus language, not --tgt");
      opt->tgt_lang = *lang;
    } else if (!lang->empty()) {
      throw ConfigError("prepare: --lang applies to --lm corpora; a parallel corpus takes --src and --tgt");
    }
    Timer timer;
    auto report = data::prepare(*opt);
    std::cout << report.format() << "wrote " << opt->out_dir << "\n";
    if (!report.shards.empty()) {
      std::string data;
      for (const auto& d : report.shards) data += (data.empty() ? "" : ":") + opt->out_dir + "/" + d;
      std::cout << "train on all shards with --data " << opt->out_dir << " (or --data " << data << ")\n";
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    char buf[128];
    std::snprintf(buf, sizeof buf, "prepared in %.1f s; peak memory %.0f MiB", timer.seconds(), usage.ru_maxrss / 1024.0);
    log::info(buf);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
