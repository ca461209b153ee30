// fairseq's command lines, run by leanseq (also reachable as programs named fairseq-interactive and
// fairseq-generate, links to leanseq): each takes fairseq's flags for what leanseq does, imports the
// fairseq checkpoints with DATA's dictionaries into a private temporary directory, and decodes as
// `leanseq translate --output-format fairseq` does. fairseq-interactive translates text;
// fairseq-generate a binarized split of DATA (fairseq-preprocess's), with its references and
// fairseq's BLEU line. A flag they do not take is refused by name.
#include <algorithm>
#include <filesystem>

#include <iostream>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/loop_options.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/cli/commands.h"
#include "leanseq/cli/fairseq_flags.h"
#include "leanseq/cli/translate.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/strings.h"
#include "leanseq/data/indexed.h"
#include "leanseq/data/prepare.h"
#include "leanseq/data/raw_split.h"
#include "leanseq/eval/fairseq_bleu.h"
#include "leanseq/eval/unicode.h"
#include "leanseq/interop/fairseq.h"
#include "leanseq/interop/fairseq_command_line.h"
#include "leanseq/interop/torch_file.h"
#include "leanseq/models/registry.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/text/bpe.h"
#include "leanseq/text/moses_bpe.h"
#include "leanseq/text/post_process.h"

namespace leanseq::cli {

namespace {
using PipelineFlags = interop::FairseqPipelineFlags;

// What names the fairseq models and their text pipeline, as fairseq-interactive and -generate take it.
struct ModelFlags : PipelineFlags, interop::FairseqModelPaths {
  bool cpu = false;
};

struct InteractiveArgs : TranslateArgs, ModelFlags {
  std::string task = "translation";  // or language_modeling: each line is the start of its output
};

struct GenerateArgs : TranslateArgs, ModelFlags {
  std::string gen_subset = "test";
  int64_t prefix_size = 0;
  bool quiet = false, score_reference = false;
};

void add_pipeline_flags(CLI::App* sub, PipelineFlags& p) {
  sub->add_option("--bpe", p.bpe, "sentencepiece (with --sentencepiece-model), subword_nmt or fastbpe (with --bpe-codes)")
      ->check(CLI::IsMember({"sentencepiece", "subword_nmt", "fastbpe"}));
  sub->add_option("--sentencepiece-model", p.spm, "the SentencePiece model of --bpe sentencepiece");
  sub->add_option("--tokenizer", p.tokenizer, "moses (the input is Moses-tokenized, the output detokenized)")
      ->check(CLI::IsMember({"moses"}));
  sub->add_option("--bpe-codes", p.bpe_codes, "the codes of --bpe subword_nmt (subword-nmt's) or fastbpe (fastBPE's)");
  sub->add_flag("--moses-no-dash-splits", p.moses_no_dash_splits, "Moses leaves hyphens inside words alone");
  sub->add_flag("--moses-no-escape", p.moses_no_escape, "Moses does not escape & | < > ' \" [ ]");
}

void add_model_flags(CLI::App* sub, ModelFlags& m) {
  sub->add_option("data", m.data, "the data directory with dict.<src>.txt and dict.<tgt>.txt")->required();
  sub->add_option("--path", m.path, "fairseq checkpoint(s); A.pt:B.pt decodes an ensemble")->required();
  sub->add_option("--source-lang,-s", m.source_lang, "source language (default: the checkpoint's)");
  sub->add_option("--target-lang,-t", m.target_lang, "target language (default: the checkpoint's)");
  add_pipeline_flags(sub, m);
  sub->add_flag("--cpu", m.cpu, "decode on the CPU (leanseq's default device)");
}

// fairseq's --post-process (alias --remove-bpe; without a value: subword_nmt, set by
// post_process_default after parsing).
CLI::Option* add_post_process_flag(CLI::App* sub, TranslateArgs& a) {
  return sub->add_option("--post-process,--remove-bpe", a.post_process,
                  "remove the subword marks from S/T/H/D lines and score words: sentencepiece, subword_nmt (the "
                  "default without a value), '@@ ', '@@', wordpiece, letter, silence, _EOW, none")
      ->expected(0, 1)
      ->check(CLI::IsMember(text::fairseq_post_process_symbols()) | CLI::IsMember({""}));
}

void post_process_default(const CLI::Option* flag, TranslateArgs& a) {
  if (flag->count() && a.post_process.empty()) a.post_process = "subword_nmt";
}

// fairseq-generate --score-reference: each reference as the one hypothesis of its source, scored as
// fairseq's SequenceScorer scores it (per-token log-probabilities, </s> last; their mean).
std::vector<std::vector<decode::TranslationHyp>> scored_references(decode::Translator& tr,
                                                                   const std::vector<std::vector<int64_t>>& sources,
                                                                   const std::vector<std::vector<int64_t>>& references,
                                                                   decode::TranslateOptions opt) {
  std::vector<std::string> src, ref;
  for (size_t i = 0; i < sources.size(); ++i) {
    src.push_back(join_words(tr.src_dict().decode(sources[i])));
    ref.push_back(join_words(tr.tgt_dict().decode(references[i])));
  }
  opt.input_format = decode::InputFormat::tokens;
  const auto scores = tr.score(src, ref, opt);
  std::vector<std::vector<decode::TranslationHyp>> out(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    decode::TranslationHyp h;
    h.pieces = tr.tgt_dict().decode(references[i]);
    h.hyp.tokens = references[i];
    h.hyp.tokens.push_back(data::Dictionary::kEos);
    h.hyp.positional_scores = scores[i];
    double sum = 0;
    for (float v : scores[i]) sum += v;
    h.hyp.score = scores[i].empty() ? 0.0 : sum / static_cast<double>(scores[i].size());
    out[i].push_back(std::move(h));
  }
  return out;
}

std::vector<int64_t> without_eos(std::vector<int64_t> ids) {
  if (!ids.empty() && ids.back() == data::Dictionary::kEos) ids.pop_back();
  return ids;
}

// The symbols of `ids`; `escape_unk`: <unk> as fairseq's T lines write it, <<unk>>.
std::vector<std::string> symbols(const data::Dictionary& dict, const std::vector<int64_t>& ids, bool escape_unk) {
  std::vector<std::string> out;
  for (int64_t id : ids) out.push_back(escape_unk && id == data::Dictionary::kUnk ? "<<unk>>" : dict.symbol(id));
  return out;
}

// fairseq-generate's output for the split: per sentence (in the order of the split, where fairseq
// prints its batches' order) S (source), T (reference, <unk> escaped as <<unk>>), then H/D/P/A of
// each hypothesis; at the end fairseq's BLEU line, BLEU4 of the best hypotheses against the
// references (an <unk> of a reference matches nothing), without smoothing: on the subwords, or with
// --post-process on the words of the T and D lines. --prefix-size N: each translation starts with
// the first N tokens of its reference; --score-reference: the references, scored, instead.
// `scratch`: where a raw (text) split is binarized.
void run_generate(GenerateArgs& a, const std::string& src_lang, const std::string& tgt_lang, bool detokenize,
                  const std::string& scratch) {
  const torch::Device device = checkpoint::resolve_device(a.device, "--device");
  check_decoding_flags(a);
  a.opt.search.need_attn = a.alignment;
  auto lt = load_for_decoding(a.checkpoint, "--path", a.compute_type, device);
  load_shortlist(a, *lt.translator);
  const auto& tr = *lt.translator;
  const auto [src_text, tgt_text] = runtime::text_pipelines(lt.loaded.vocab, a.path);
  const data::TextPipeline* src_detok = detokenize ? src_text.get() : nullptr;
  const data::TextPipeline* tgt_detok = detokenize ? tgt_text.get() : nullptr;
  const std::string prefix = a.data + "/" + a.gen_subset + "." + src_lang + "-" + tgt_lang + ".";
  data::IndexedDataset sources(data::binarized(prefix + src_lang, tr.src_dict(), scratch));
  std::unique_ptr<data::IndexedDataset> targets;
  if (io::file_exists(prefix + tgt_lang + ".idx") || io::file_exists(prefix + tgt_lang)) {
    targets = std::make_unique<data::IndexedDataset>(data::binarized(prefix + tgt_lang, tr.tgt_dict(), scratch));
    if (targets->size() != sources.size()) {
      throw DataError(prefix + tgt_lang + ": " + std::to_string(targets->size()) + " sentences, but " + prefix + src_lang +
                      " has " + std::to_string(sources.size()));
    }
  }
  if ((a.prefix_size > 0 || a.score_reference) && !targets) {
    throw ConfigError(std::string(a.score_reference ? "--score-reference scores" : "--prefix-size takes the prefixes from") +
                      " the references, and " + prefix + tgt_lang + " is missing");
  }
  auto read = [&](const data::IndexedDataset& set, size_t i, const data::Dictionary& dict, const std::string& path) {
    return data::checked_sentence(set, i, dict.size(), path, a.opt.max_input_length, "--max-input-length");
  };
  std::vector<std::string> hyps, refs;
  constexpr size_t kChunk = 1024;
  for (size_t from = 0; from < sources.size(); from += kChunk) {
    std::vector<std::vector<int64_t>> chunk, references, prefixes;
    for (size_t i = from; i < std::min(sources.size(), from + kChunk); ++i) {
      chunk.push_back(read(sources, i, tr.src_dict(), prefix + src_lang));
      if (targets) references.push_back(without_eos(read(*targets, i, tr.tgt_dict(), prefix + tgt_lang)));
      if (a.prefix_size > 0) {
        const auto& r = references.back();
        prefixes.emplace_back(r.begin(), r.begin() + std::min<int64_t>(a.prefix_size, static_cast<int64_t>(r.size())));
      }
    }
    const auto results = a.score_reference ? scored_references(*lt.translator, chunk, references, a.opt)
                                           : lt.translator->translate_ids(chunk, a.opt, nullptr,
                                                                          a.prefix_size > 0 ? &prefixes : nullptr);
    for (size_t k = 0; k < results.size(); ++k) {
      const std::string id = std::to_string(from + k);
      std::string out =
          "S-" + id + "\t" + fairseq_line(symbols(tr.src_dict(), without_eos(chunk[k]), false), a.post_process, src_detok) +
          "\n";
      if (targets) {
        const auto ref = symbols(tr.tgt_dict(), references[k], true);
        const std::string t = fairseq_line(ref, a.post_process, tgt_detok);
        out += "T-" + id + "\t" + t + "\n";
        const auto& best = results[k];
        if (a.post_process.empty()) {  // fairseq scores the ids
          refs.push_back(join_words(ref));
          hyps.push_back(best.empty() ? "" : join_words(best.front().pieces));
        } else {  // the words of the T and D lines
          refs.push_back(t);
          hyps.push_back(best.empty() ? "" : fairseq_line(best.front().pieces, a.post_process, tgt_detok));
        }
      }
      out += fairseq_hypothesis_lines(results[k], id, tgt_detok, a.post_process, a.alignment);
      if (!a.quiet) std::cout << out;
    }
  }
  if (targets) {  // fairseq's scorer over the words of each pair
    eval::FairseqBleu bleu;
    for (size_t i = 0; i < refs.size(); ++i) bleu.add(eval::split_whitespace(refs[i]), eval::split_whitespace(hyps[i]));
    std::cout << "Generate " << a.gen_subset << " with beam=" << a.opt.search.beam << ": " << bleu.result_string() << "\n";
  }
  std::cout << std::flush;
}

struct TrainArgs : PipelineFlags {
  std::string data, arch, save_dir = "checkpoints", criterion = "cross_entropy", task = "translation";
  std::string source_lang, target_lang, log_format;
  int64_t max_epoch = 0, max_update = 0, seed = 1, update_freq = 1, patience = -1, num_workers = 1;
  int64_t tokens_per_sample = 1024;     // --task language_modeling
  std::string sample_break_mode = "none";
  bool cpu = false, fp16 = false, bf16 = false;  // --fp16 and --amp: float16
};

}  // namespace

void add_fairseq_interactive(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<InteractiveArgs>();
  a->output_format = OutputFormat::fairseq;
  auto* sub = app.add_subcommand(
      "fairseq-interactive",
      "fairseq-interactive's command line: translate with fairseq checkpoints (imported on the fly) and print its "
      "S/W/H/D/P lines (docs/fairseq.md)");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // argparse: the last one counts
  add_model_flags(sub, *a);
  sub->add_option("--input", a->input, "file to translate, one sentence per line ('-': stdin)")->capture_default_str();
  sub->add_option("--buffer-size", a->buffer_size, "lines read and translated together")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_flag("--print-alignment", a->alignment, "A lines: the source position each target token attends most");
  sub->add_option("--task", a->task,
                  "translation, or language_modeling: a language model continues each line (the DATA directory holds "
                  "its dict.txt)")
      ->check(CLI::IsMember({"translation", "language_modeling"}))
      ->capture_default_str();
  add_decoding_flags(sub, *a);
  auto* post_process = add_post_process_flag(sub, *a);
  sub->callback([a, post_process, &exit_code] {
    if (a->cpu) a->device = "cpu";
    post_process_default(post_process, *a);
    io::PrivateDirectory tmp("leanseq-fairseq");
    interop::FairseqImportResult first;
    a->checkpoint = interop::models_for_decoding(*a, interop::fairseq_pipeline(*a), tmp.path(), &first);
    if (!first.leanseq_arch.empty()) {  // an imported model: its kind must be the task's
      const bool lm = models::registry().preset_config(first.leanseq_arch)->language_model();
      if (lm != (a->task == "language_modeling")) {
        throw ConfigError("--task " + a->task + ": " + a->path + " is a " +
                          (lm ? "language model (--task language_modeling)" : "translation model (--task translation)"));
      }
    }
    run_translate(*a);
    exit_code = 0;
  });
}

void add_fairseq_generate(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<GenerateArgs>();
  auto* sub = app.add_subcommand(
      "fairseq-generate",
      "fairseq-generate's command line: decode a binarized split of a fairseq-preprocess directory with fairseq "
      "checkpoints (imported on the fly); its S/T/H/D/P lines and BLEU (docs/fairseq.md)");
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // argparse: the last one counts
  add_model_flags(sub, *a);
  sub->add_option("--gen-subset", a->gen_subset, "the split to decode: <subset>.<src>-<tgt>.<lang> in the data directory")
      ->capture_default_str();
  sub->add_flag("--quiet", a->quiet, "print the BLEU line only");
  sub->add_flag("--print-alignment", a->alignment, "A lines: the source position each target token attends most");
  sub->add_option("--prefix-size", a->prefix_size, "each translation starts with the first N tokens of its reference")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  sub->add_flag("--score-reference", a->score_reference, "print each reference, scored by the model, instead of translating");
  auto* post_process = add_post_process_flag(sub, *a);
  add_decoding_flags(sub, *a);
  sub->callback([a, post_process, &exit_code] {
    if (a->cpu) a->device = "cpu";
    // fairseq-generate's splits hold no constraints (fairseq's stops with a TypeError).
    if (a->constraints) throw ConfigError("--constraints: fairseq-generate reads none; give them to fairseq-interactive");
    post_process_default(post_process, *a);
    const auto pipeline = interop::fairseq_pipeline(*a);  // without one, S/T/D lines hold subwords, as fairseq's
    io::PrivateDirectory tmp("leanseq-fairseq");
    interop::FairseqImportResult models;
    a->checkpoint = interop::models_for_decoding(*a, pipeline, tmp.path(), &models);
    run_generate(*a, models.source_lang, models.target_lang, pipeline.given, tmp.path());
    exit_code = 0;
  });
}

namespace {
// fairseq-train's flags as a leanseq run's config values: the model's options over the
// architecture's defaults, fairseq's defaults for what the command line leaves out, then the flags
// given (`extras`: what fairseq-train's own parser left, the model's options).
ConfigValues fairseq_train_values(const TrainArgs& a, const FairseqFlagValues& given, const std::vector<std::string>& extras) {
  ConfigValues values;
  try {
    values = interop::fairseq_config_values(interop::fairseq_train_model_args(a.arch, extras), "fairseq-train", true);
  } catch (const CheckpointError& e) {  // an option leanseq does not build: a usage error here
    throw ConfigError(e.what());
  }
  const std::string from = "fairseq-train";
  auto set = [&](const std::string& key, const std::string& v) { values.set(key, v, from); };
  // fairseq's defaults for what its command line leaves out.
  if (!given.count("--optimizer")) throw ConfigError("fairseq-train: --optimizer is required (adam or nag), as in fairseq");
  if (!given.count("--max-tokens") && !given.count("--batch-size")) {
    throw ConfigError("fairseq-train: give --max-tokens or --batch-size, as fairseq asks");
  }
  set("optim.lr", "0.25");
  set("optim.lr_scheduler", "fixed");
  set("optim.warmup_updates", given.count("--lr-scheduler") && given.at("--lr-scheduler") == "inverse_sqrt" ? "4000" : "0");
  set("optim.warmup_init_lr", "-1");
  set("optim.adam_beta1", "0.9");
  set("optim.adam_beta2", "0.999");
  set("optim.adam_eps", "1e-08");
  set("optim.weight_decay", "0");
  set("optim.clip_norm", "0");
  set("optim.shrink_on_plateau", "false");
  set("batch.max_tokens", "1000000000");
  set("batch.max_sentences", "0");
  set("checkpoint.no_epoch_checkpoints", "false");
  if (given.count("--label-smoothing") && a.criterion != "label_smoothed_cross_entropy") {
    throw ConfigError("fairseq-train: --label-smoothing goes with --criterion label_smoothed_cross_entropy");
  }
  set("criterion.label_smoothing", "0");
  apply_fairseq_training_flags(given, values);
  // fairseq's --restore-file default names <save-dir>/checkpoint_last.pt, where a run resumes anyway.
  if (given.count("--restore-file") && given.at("--restore-file") == "checkpoint_last.pt") {
    set("checkpoint.restore_file", "");
  }
  set("data", a.data);
  set("save_dir", a.save_dir);
  set("seed", std::to_string(a.seed));
  set("optim.update_freq", std::to_string(a.update_freq));
  set("stop.max_epoch", std::to_string(a.max_epoch));
  set("stop.max_update", std::to_string(a.max_update));
  if (a.patience >= 0) set("stop.patience", std::to_string(a.patience));
  if (a.fp16 && a.bf16) throw ConfigError("fairseq-train: --fp16/--amp (float16) and --bf16 (bfloat16): give one of them");
  if (a.fp16 || a.bf16) set("optim.amp", a.bf16 ? "bfloat16" : "float16");
  // As fairseq-train: on the GPU when there is one, unless --cpu.
  set("device", !a.cpu && torch::cuda::is_available() ? "cuda" : "cpu");
  if (!a.log_format.empty()) set("log.format", a.log_format == "simple" ? "text" : a.log_format);
  const auto pipeline = interop::fairseq_pipeline(a);
  // Without --bpe/--tokenizer, as fairseq's, the checkpoints read and write the data's subwords.
  if (!pipeline.spm.empty()) set("text.spm_model", pipeline.spm);
  if (!pipeline.tokenizer.empty()) set("text.tokenizer", pipeline.tokenizer);
  if (!pipeline.bpe_codes.empty()) set("text.bpe_codes", pipeline.bpe_codes);
  const auto meta = data::load_prepared(a.data);
  if (meta.language_model() != (a.task == "language_modeling")) {
    throw ConfigError("fairseq-train: " + a.data + (meta.language_model() ? " holds a language model's text (--task language_modeling)"
                                                                          : " holds translation pairs (--task translation)"));
  }
  if (meta.language_model()) {  // fairseq's blocks; the model's positions are the block's, as fairseq sets them
    set("batch.tokens_per_sample", std::to_string(a.tokens_per_sample));
    set("batch.sample_break_mode", a.sample_break_mode);
    set("model.max_target_positions", std::to_string(a.tokens_per_sample));
  }
  if ((!a.source_lang.empty() && a.source_lang != meta.src_lang) ||
      (!a.target_lang.empty() && a.target_lang != meta.tgt_lang)) {
    throw ConfigError("fairseq-train: " + a.data + " holds " + meta.src_lang + "-" + meta.tgt_lang + ", not " +
                      a.source_lang + "-" + a.target_lang);
  }
  return values;
}
}  // namespace

void add_fairseq_train(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<TrainArgs>();
  auto given = std::make_shared<FairseqFlagValues>();
  auto* sub = app.add_subcommand(
      "fairseq-train",
      "fairseq-train's command line: train a transformer, lightconv or fconv model of fairseq's --arch and options "
      "on a fairseq-preprocess directory, with fairseq's defaults (docs/fairseq.md)");
  sub->allow_extras();
  sub->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // argparse: the last one counts
  sub->add_option("data", a->data, "the fairseq-preprocess directory")->required();
  sub->add_option("--arch,-a", a->arch, "a fairseq arch: transformer, transformer_iwslt_de_en, lightconv_iwslt_de_en, ...")
      ->required();
  sub->add_option("--save-dir", a->save_dir, "where checkpoints go (training resumes from its checkpoint_last.pt)")
      ->capture_default_str();
  sub->add_option("--max-epoch", a->max_epoch, "stop after this many epochs (0: no limit)");
  sub->add_option("--max-update", a->max_update, "stop after this many updates (0: no limit)");
  sub->add_option("--seed", a->seed, "random seed")->capture_default_str();
  sub->add_option("--update-freq", a->update_freq, "accumulate gradients over N batches")->capture_default_str();
  sub->add_option("--patience", a->patience, "stop after N validations without a better one (-1: off)");
  sub->add_option("--criterion", a->criterion, "cross_entropy or label_smoothed_cross_entropy")
      ->check(CLI::IsMember({"cross_entropy", "label_smoothed_cross_entropy"}))
      ->capture_default_str();
  sub->add_option("--task", a->task, "translation, or language_modeling (a fairseq-preprocess --only-source directory)")
      ->check(CLI::IsMember({"translation", "language_modeling"}))
      ->capture_default_str();
  sub->add_option("--tokens-per-sample", a->tokens_per_sample, "language_modeling: tokens per block (and the model's positions)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->add_option("--sample-break-mode", a->sample_break_mode, "language_modeling: none, complete or eos")
      ->capture_default_str();
  sub->add_option("--source-lang,-s", a->source_lang, "source language (must be the data's)");
  sub->add_option("--target-lang,-t", a->target_lang, "target language (must be the data's)");
  sub->add_option("--log-format", a->log_format, "simple, json or none (no per-interval lines)")->check(CLI::IsMember({"simple", "json", "none"}));
  sub->add_option("--num-workers", a->num_workers,
                  "accepted for fairseq's scripts: leanseq reads its memory-mapped batches in the training thread");
  add_pipeline_flags(sub, *a);  // the data's: checkpoints carry it
  sub->add_flag("--cpu", a->cpu, "train on the CPU (the default without a CUDA device, as in fairseq)");
  sub->add_flag("--fp16,--amp", a->fp16,
                "float16 mixed precision with a dynamic loss scale, on CUDA (optim.amp=float16; fairseq's --fp16, --amp)");
  sub->add_flag("--bf16", a->bf16, "bfloat16 mixed precision, on CUDA or a CPU with AVX512_BF16 (optim.amp=bfloat16)");
  add_fairseq_training_flags(sub, given);
  sub->callback([a, given, sub, &exit_code] {
    const auto values = fairseq_train_values(*a, *given, sub->remaining());
    const auto cfg = checkpoint::resolve_run_config(values);
    // As fairseq, a run goes on from the save directory's last checkpoint when there is one.
    const bool resume = std::filesystem::exists(a->save_dir + "/checkpoint_last.pt");
    if (resume) log::info("resuming from " + a->save_dir + "/checkpoint_last.pt, as fairseq-train does");
    exit_code = train_seq2seq(cfg, resume);
  });
}

}  // namespace leanseq::cli
