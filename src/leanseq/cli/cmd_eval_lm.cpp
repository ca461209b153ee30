// eval-lm: perplexity of a language model on a split of a corpus prepared with --lm.
#include <iostream>
#include <nlohmann/json.hpp>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/timer.h"
#include "leanseq/data/prepare.h"
#include "leanseq/train/evaluate.h"

namespace leanseq::cli {

void add_eval_lm(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, data, split = "test", format = "text";
    int64_t max_tokens = 4096;
  };
  auto o = std::make_shared<Options>();
  auto* sub = app.add_subcommand("eval-lm", "perplexity of a language model on a prepared --lm corpus");
  sub->add_option("--checkpoint", o->checkpoint, "language-model checkpoint")->required();
  sub->add_option("--data", o->data, "directory written by leanseq prepare --lm")->required();
  sub->add_option("--split", o->split, "split to evaluate (train, valid or test)")->capture_default_str();
  sub->add_option("--max-tokens", o->max_tokens, "tokens per batch")->capture_default_str();
  sub->add_option("--format", o->format, "text or json")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  sub->callback([o, &exit_code] {
    auto loaded = checkpoint::load_model(o->checkpoint);
    if (!loaded.model_config->language_model()) {
      throw ConfigError(o->checkpoint + ": arch " + loaded.arch + " is not a language model");
    }
    auto meta = data::load_prepared(o->data);
    if (!meta.language_model()) throw ConfigError(o->data + ": not a language-model corpus (prepare --lm)");
    if (meta.tgt_lang != loaded.vocab.tgt_lang) {
      throw ConfigError(o->data + ": corpus language '" + meta.tgt_lang + "' differs from the checkpoint's '" +
                        loaded.vocab.tgt_lang + "'");
    }
    if (io::read_file(meta.tgt_dict) != loaded.vocab.tgt_dict) {
      throw DataError(meta.tgt_dict + ": this corpus was prepared with another dictionary than the checkpoint's");
    }
    std::string prefix = meta.split_prefix(o->split, meta.tgt_lang);
    data::PairDataset ds(prefix, prefix);
    Timer timer;
    data::BatchingOptions bo;
    bo.max_tokens = o->max_tokens;
    auto t = train::dataset_loss(*loaded.model, ds, bo, 0.0);
    const double seconds = timer.seconds();
    if (o->format == "json") {
      std::cout << nlohmann::json{{"split", o->split},
                                  {"sentences", ds.size()},
                                  {"tokens", t.tokens},
                                  {"nll_loss_base2", t.nll_base2()},
                                  {"perplexity", t.perplexity()},
                                  {"tokens_per_second", t.tokens / std::max(seconds, 1e-9)}}
                       .dump()
                << "\n";
    } else {
      std::cout << o->split << ": " << ds.size() << " sentences, " << t.tokens << " tokens (</s> included), loss "
                << t.nll_base2() << " bits/token, perplexity " << t.perplexity() << "\n";
    }
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
