// fairseq's evaluation command lines. fairseq-eval-lm: the perplexity of a fairseq (or leanseq)
// language model on a split of a fairseq-preprocess --only-source directory, cut into fairseq's
// blocks (data/lm_blocks.h) and scored as fairseq's SequenceScorer scores them, with its lines.
// fairseq-validate: a checkpoint's validation loss on a split, as its training criterion
// (label smoothing included) computes it, in fairseq's "valid on ..." line.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <set>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/loop_options.h"
#include "leanseq/cli/commands.h"
#include "leanseq/cli/decoding_options.h"
#include "leanseq/core/config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/timer.h"
#include "leanseq/data/batching.h"
#include "leanseq/data/dictionary.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/lm_blocks.h"
#include "leanseq/data/raw_split.h"
#include "leanseq/interop/fairseq.h"
#include "leanseq/interop/fairseq_command_line.h"
#include "leanseq/interop/torch_file.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/runtime/language_model.h"
#include "leanseq/train/evaluate.h"

namespace leanseq::cli {

namespace {

struct EvalLmArgs : interop::FairseqModelPaths {
  std::string gen_subset = "test", sample_break_mode = "none", post_process, task = "language_modeling";
  int64_t tokens_per_sample = 1024, context_window = 0, max_tokens = 36000, batch_size = 0, softmax_batch = 0;
  bool output_word_probs = false, cpu = false;
};

struct ValidateArgs : interop::FairseqModelPaths {
  std::string valid_subset = "valid", task, sample_break_mode;
  int64_t tokens_per_sample = 0, max_tokens = 4096, batch_size = 0;
  bool cpu = false;
};

// 1234567 as fairseq's "{:,}" writes it: 1,234,567.
std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string format(const char* fmt, double v) {
  char buf[128];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// fairseq's --output-word-probs line of a block: its words (subwords joined where the dictionary
// symbol ends with the --post-process continuation mark, whose score moves to the word's last
// piece) with their natural log-probabilities.
std::string word_probs_line(size_t id, const std::vector<int64_t>& tokens, std::vector<float> scores,
                            const data::Dictionary& dict, const std::set<int64_t>& continued, size_t mark) {
  std::string line = std::to_string(id) + " ", word;
  bool first = true;
  for (size_t i = 0; i < tokens.size(); ++i) {
    word += dict.symbol(tokens[i]);
    if (continued.count(tokens[i]) && i + 1 < tokens.size()) {
      word.resize(word.size() - mark);
      scores[i + 1] += scores[i];
      continue;
    }
    line += (first ? "" : "\t") + word + " [" + format("%2f", scores[i]) + "]";
    first = false;
    word.clear();
  }
  return line;
}

// The one model of `m.path` (a fairseq file imported with the data directory's dictionaries), in
// float32, on the GPU unless `cpu` or there is none.
runtime::LoadedTranslator load_model(const interop::FairseqModelPaths& m, bool cpu) {
  io::PrivateDirectory tmp("leanseq-fairseq");
  const auto paths = colon_separated_paths(interop::models_for_decoding(m, interop::FairseqPipeline{}, tmp.path(), nullptr),
                                           "--path");
  if (paths.size() > 1) throw ConfigError("--path: one model is evaluated");
  kernels::ResolvedComputeType resolved;
  return runtime::load_for_inference(
      paths, checkpoint::resolve_device(cpu || !torch::cuda::is_available() ? "cpu" : "cuda", "--cpu"),
      kernels::ComputeTypeRequest{}, resolved);
}

// A language model's scores of a split in fairseq's blocks.
struct LmScores {
  std::vector<data::LmBlock> blocks;
  std::vector<std::vector<float>> scores;
  int64_t batches = 0, tokens = 0;
  double seconds = 0;
};

struct LmBlocking {
  int64_t tokens_per_sample = 1024, context_window = 0, max_tokens = 36000, batch_size = 0;
  data::BreakMode mode = data::BreakMode::none;
};

LmScores score_split(models::Seq2SeqModel& model, const data::Dictionary& dict, const std::string& data,
                     const std::string& subset, const LmBlocking& o) {
  io::PrivateDirectory scratch("leanseq-raw");  // a raw (text) split binarized
  // The split's ids are the data directory's dictionary's: the model's must begin with it.
  const std::string dict_path = data + "/dict.txt";
  const auto data_dict = data::Dictionary::parse(io::read_file(dict_path, "dictionary"), dict_path);
  for (int64_t i = 0; i < data_dict.size(); ++i) {
    if (i >= dict.size() || dict.symbol(i) != data_dict.symbol(i)) {
      throw DataError(dict_path + ": symbol " + std::to_string(i) + " '" + data_dict.symbol(i) + "' is not the model's (" +
                      (i < dict.size() ? "'" + dict.symbol(i) + "'" : "it has " + std::to_string(dict.size())) + ")");
    }
  }
  const std::string prefix = data + "/" + subset;
  const auto sentences =
      data::checked_sentences(data::IndexedDataset(data::binarized(prefix, dict, scratch.path())), dict.size(), prefix);
  // As fairseq-eval-lm: with a context window the blocks are shorter by the window.
  const int64_t block = o.tokens_per_sample - o.context_window;
  auto blocks = data::lm_blocks(sentences, block, o.mode, data::Dictionary::kEos);
  // Blocks longer than the model's positions are left out, as fairseq's batches leave them.
  const auto limit = static_cast<size_t>(model.max_target_positions());
  LmScores out;
  for (auto& b : blocks) {
    if (b.target.size() <= limit) out.blocks.push_back(std::move(b));
  }
  if (out.blocks.size() < blocks.size()) {
    log::warn(std::to_string(blocks.size() - out.blocks.size()) + " blocks longer than the model's " +
              std::to_string(limit) + " positions are left out, as fairseq leaves them");
  }
  data::add_context_window(out.blocks, o.context_window, block);
  Timer timer;
  const int64_t max_tokens =
      o.batch_size > 0 ? std::min(o.max_tokens, o.batch_size * (block + o.context_window)) : o.max_tokens;
  out.scores = runtime::score_lm_blocks(model, out.blocks, max_tokens, dict.size(), &out.batches);
  out.seconds = timer.seconds();
  for (const auto& b : out.blocks) out.tokens += static_cast<int64_t>(b.target.size());
  return out;
}

void run_eval_lm(const EvalLmArgs& a) {
  LmBlocking blocking;
  blocking.mode = data::parse_break_mode(a.sample_break_mode, "--sample-break-mode");
  if (a.task != "language_modeling") throw ConfigError("--task: fairseq-eval-lm evaluates language_modeling");
  if (!a.post_process.empty() && a.post_process != "subword_nmt" && a.post_process != "@@ ") {
    throw ConfigError("--post-process=" + a.post_process + ": fairseq-eval-lm implements subword_nmt ('@@ ') only");
  }
  if (a.context_window > 0 && a.context_window >= a.tokens_per_sample) {
    throw ConfigError("--context-window " + std::to_string(a.context_window) + " must be below --tokens-per-sample " +
                      std::to_string(a.tokens_per_sample) + " (the blocks are tokens-per-sample minus the window)");
  }
  auto lt = load_model(a, a.cpu);
  if (!lt.loaded.model_config->language_model()) {
    throw ConfigError(a.path + ": arch " + lt.loaded.arch + " is a translation model, not a language model");
  }
  const auto& dict = lt.translator->tgt_dict();
  blocking.tokens_per_sample = a.tokens_per_sample, blocking.context_window = a.context_window;
  blocking.max_tokens = a.max_tokens, blocking.batch_size = a.batch_size;
  const auto r = score_split(*lt.loaded.model, dict, a.data, a.gen_subset, blocking);
  const auto& kept = r.blocks;
  const auto& scores = r.scores;
  std::set<int64_t> continued;
  const std::string mark = a.post_process.empty() ? "" : "@@";
  for (int64_t i = 0; !mark.empty() && i < dict.size(); ++i) {
    const auto& sym = dict.symbol(i);
    if (sym.size() >= mark.size() && sym.compare(sym.size() - mark.size(), mark.size(), mark) == 0) continued.insert(i);
  }
  double sum = 0;
  int64_t count = 0;
  for (size_t i = 0; i < kept.size(); ++i) {
    for (size_t j = 0; j < scores[i].size(); ++j) {
      if (std::isinf(scores[i][j])) continue;  // fairseq skips them
      sum += scores[i][j];
      ++count;
      if (j + 1 < scores[i].size() && continued.count(kept[i].target[j])) --count;  // counted with its word
    }
    if (a.output_word_probs) std::cout << word_probs_line(i, kept[i].target, scores[i], dict, continued, mark.size()) << "\n";
  }
  const int64_t tokens = r.tokens;
  const double seconds = r.seconds;
  const double loss = count > 0 ? -sum / static_cast<double>(count) / std::log(2.0) : 0.0;
  std::cout << "Evaluated " << with_thousands(tokens) << " tokens in " << format("%.1f", seconds) << "s ("
            << format("%.2f", seconds > 0 ? tokens / seconds : 0.0) << " tokens/s)\n"
            << "Loss (base 2): " << format("%.4f", loss) << ", Perplexity: " << format("%.2f", std::pow(2.0, loss))
            << "\n"
            << std::flush;
}

}  // namespace

void add_fairseq_eval_lm(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<EvalLmArgs>();
  auto* sub = app.add_subcommand(
      "fairseq-eval-lm",
      "fairseq-eval-lm's command line: perplexity of a language model (fairseq's, imported on the fly, or leanseq's) "
      "on a split of a fairseq-preprocess --only-source directory (docs/fairseq.md)");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // argparse: the last one counts
  sub->add_option("data", a->data, "the fairseq-preprocess --only-source directory (dict.txt, <subset>.bin/.idx)")->required();
  sub->add_option("--path", a->path, "the language model's checkpoint")->required();
  sub->add_option("--task", a->task, "language_modeling")->capture_default_str();
  sub->add_option("--gen-subset", a->gen_subset, "the split to evaluate")->capture_default_str();
  sub->add_option("--tokens-per-sample", a->tokens_per_sample, "tokens per block")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--sample-break-mode", a->sample_break_mode, "none, complete or eos")->capture_default_str();
  sub->add_option("--context-window", a->context_window,
                  "tokens of the blocks before each block given as context (its blocks are that much shorter)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("--max-tokens", a->max_tokens, "padded tokens per batch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_option("--batch-size", a->batch_size, "blocks per batch (0: as --max-tokens allows)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("--softmax-batch", a->softmax_batch,
                  "accepted for fairseq's scripts: leanseq bounds each batch's logits to 2^24 floats itself");
  sub->add_flag("--output-word-probs", a->output_word_probs, "a line per block: each word and its log-probability");
  auto* post_process = sub->add_option("--post-process,--remove-bpe", a->post_process,
                                       "subword_nmt (the default without a value): words joined from '@@ ' subwords")
                           ->expected(0, 1);
  sub->add_flag("--cpu", a->cpu, "evaluate on the CPU");
  sub->callback([a, post_process, &exit_code] {
    if (post_process->count() && a->post_process.empty()) a->post_process = "subword_nmt";
    run_eval_lm(*a);
    exit_code = 0;
  });
}

namespace {

// A number as fairseq's progress lines print a metric: rounded to `digits`, then "{:g}".
std::string metric(double v, int digits) {
  const double scale = std::pow(10.0, digits);
  return format("%g", std::round(v * scale) / scale);
}

// What the checkpoint was trained with, where fairseq-validate takes it from: a fairseq file's
// saved criterion and task options, a leanseq file's run config.
struct SavedTraining {
  double label_smoothing = 0;
  int64_t tokens_per_sample = 1024;
  std::string sample_break_mode = "none";
};

SavedTraining saved_training(const std::string& path) {
  SavedTraining s;
  if (interop::is_torch_pickle_file(path)) {
    interop::TorchFile file(path);
    const auto criterion = interop::fairseq_section_args(file.root(), "criterion");
    const auto task = interop::fairseq_section_args(file.root(), "task");
    const std::string name = criterion.value("_name", criterion.value("criterion", std::string()));
    if (name == "label_smoothed_cross_entropy" && criterion.contains("label_smoothing") &&
        criterion["label_smoothing"].is_number()) {
      s.label_smoothing = criterion["label_smoothing"].get<double>();
    }
    if (task.contains("tokens_per_sample") && task["tokens_per_sample"].is_number_integer()) {
      s.tokens_per_sample = task["tokens_per_sample"].get<int64_t>();
    }
    if (task.contains("sample_break_mode") && task["sample_break_mode"].is_string()) {
      s.sample_break_mode = task["sample_break_mode"].get<std::string>();
    }
    return s;
  }
  const auto ck = checkpoint::read_checkpoint(path);
  const auto values = parse_yaml_text(ck.config_yaml, path).values;
  if (auto it = values.find("criterion.label_smoothing"); it != values.end()) s.label_smoothing = std::stod(it->second);
  return s;
}

void run_validate(const ValidateArgs& a) {
  const auto saved = saved_training(colon_separated_paths(a.path, "--path").front());
  auto lt = load_model(a, a.cpu);
  auto& model = *lt.loaded.model;
  const bool lm = lt.loaded.model_config->language_model();
  if (!a.task.empty() && (a.task == "language_modeling") != lm) {
    throw ConfigError("--task " + a.task + ": " + a.path + " is a " + (lm ? "language model" : "translation model"));
  }
  double loss = 0, nll = 0;
  int64_t tokens = 0, samples = 0, batches = 0;
  if (lm) {  // cross-entropy over fairseq's blocks, cut as the checkpoint's task cut them
    LmBlocking blocking;
    blocking.tokens_per_sample = a.tokens_per_sample > 0 ? a.tokens_per_sample : saved.tokens_per_sample;
    blocking.mode = data::parse_break_mode(a.sample_break_mode.empty() ? saved.sample_break_mode : a.sample_break_mode,
                                           "--sample-break-mode");
    blocking.max_tokens = a.max_tokens, blocking.batch_size = a.batch_size;
    const auto r = score_split(model, lt.translator->tgt_dict(), a.data, a.valid_subset, blocking);
    for (const auto& block : r.scores) {
      for (float v : block) nll -= v;
    }
    loss = nll;
    tokens = r.tokens, samples = static_cast<int64_t>(r.blocks.size()), batches = r.batches;
  } else {  // the training criterion, label smoothing included, over the split's pairs
    const auto& v = lt.loaded.vocab;
    const std::string prefix = a.data + "/" + a.valid_subset + "." + v.src_lang + "-" + v.tgt_lang + ".";
    io::PrivateDirectory scratch("leanseq-raw");  // a raw (text) split binarized
    std::string sides[2];
    const data::Dictionary* dicts[2] = {&lt.translator->src_dict(), &lt.translator->tgt_dict()};
    for (int k = 0; k < 2; ++k) {
      const std::string lang = k == 0 ? v.src_lang : v.tgt_lang;
      sides[k] = data::binarized(prefix + lang, *dicts[k], scratch.path());
      data::checked_sentences(data::IndexedDataset(sides[k]), dicts[k]->size(), prefix + lang);  // ids in the dictionary
    }
    data::PairDataset pairs(sides[0], sides[1]);
    data::BatchingOptions bo;
    bo.max_tokens = a.max_tokens, bo.max_sentences = a.batch_size;
    bo.max_target_len = model.max_target_positions();  // longer pairs are left out, as fairseq's batches leave them
    const auto t = train::dataset_loss(model, pairs, bo, saved.label_smoothing);
    loss = t.loss, nll = t.nll, tokens = t.tokens;
    samples = static_cast<int64_t>(pairs.size());
    batches = static_cast<int64_t>(data::batch_by_size(pairs.lengths(), bo).size());
  }
  const double ln2 = std::log(2.0), per = tokens > 0 ? 1.0 / static_cast<double>(tokens) / ln2 : 0.0;
  std::cout << "valid on '" << a.valid_subset << "' subset | loss " << metric(loss * per, 3)
            << (lm ? "" : " | nll_loss " + metric(nll * per, 3)) << " | ppl " << metric(std::pow(2.0, nll * per), 2)
            << " | wps 0 | wpb " << metric(batches > 0 ? static_cast<double>(tokens) / batches : 0.0, 1) << " | bsz "
            << metric(batches > 0 ? static_cast<double>(samples) / batches : 0.0, 1) << "\n"
            << std::flush;
}

}  // namespace

void add_fairseq_validate(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ValidateArgs>();
  auto* sub = app.add_subcommand(
      "fairseq-validate",
      "fairseq-validate's command line: a checkpoint's loss on a split of a fairseq-preprocess directory, by its "
      "training criterion (docs/fairseq.md)");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  sub->add_option("data", a->data, "the fairseq-preprocess directory")->required();
  sub->add_option("--path", a->path, "the checkpoint")->required();
  sub->add_option("--task", a->task, "translation or language_modeling (default: the checkpoint's)")
      ->check(CLI::IsMember({"translation", "language_modeling"}));
  sub->add_option("--valid-subset", a->valid_subset, "the split")->capture_default_str();
  sub->add_option("--source-lang,-s", a->source_lang, "source language (default: the checkpoint's)");
  sub->add_option("--target-lang,-t", a->target_lang, "target language (default: the checkpoint's)");
  sub->add_option("--max-tokens", a->max_tokens, "padded tokens per batch")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_option("--batch-size", a->batch_size, "sentences per batch (0: as --max-tokens allows)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_option("--tokens-per-sample", a->tokens_per_sample, "a language model's blocks (default: as it was trained)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--sample-break-mode", a->sample_break_mode, "none, complete or eos (default: as it was trained)");
  sub->add_flag("--cpu", a->cpu, "evaluate on the CPU");
  sub->callback([a, &exit_code] {
    run_validate(*a);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
