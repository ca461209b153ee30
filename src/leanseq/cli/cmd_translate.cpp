#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "leanseq/cli/commands.h"
#include "leanseq/cli/decoding_options.h"
#include "leanseq/cli/translate.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/core/line_reader.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/progress.h"
#include "leanseq/core/strings.h"
#include "leanseq/core/threads.h"
#include "leanseq/decode/stream.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/runtime/translator_pool.h"
#include "leanseq/text/post_process.h"

namespace leanseq::cli {

namespace {

// "s-t" pairs: for each target subword t (without </s>), the source subword s it attends most.
std::string alignment_pairs(const decode::Hypothesis& h) {
  std::string out;
  for (size_t t = 0; t + 1 < h.alignment.size(); ++t) {
    out += (t ? " " : "") + std::to_string(h.alignment[t]) + "-" + std::to_string(t);
  }
  return out;
}

// Python's repr of a float32 score widened to double, as fairseq prints H and D scores.
std::string score_text(double v) {
  std::string s = shortest_text(v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// fairseq-generate's and fairseq-interactive's lines: S (the source subwords), then the lines of
// each hypothesis (fairseq_hypothesis_lines); D holds the subwords for --input-format tokens, as
// fairseq-generate without a subword pipeline prints them.
// After the S line, fairseq-interactive's W line (the seconds its batch took over the batch's
// sentences; here its chunk's), and with constraints a C line for each.
std::string format_fairseq(const std::vector<decode::TranslationHyp>& hyps, size_t index, const std::string& line,
                           double seconds, const decode::Constraints* constraints, const decode::Translator& tr,
                           const TranslateArgs& a) {
  auto src = tr.encode_source(line, a.opt.input_format);
  src.pop_back();  // </s>
  const std::string id = std::to_string(index);
  std::string c_lines;
  if (constraints) {
    for (const auto& c : *constraints) c_lines += "C-" + id + "\t" + fairseq_line(tr.tgt_dict().decode(c), a.post_process, nullptr) + "\n";
  }
  char w_line[64];
  std::snprintf(w_line, sizeof w_line, "W-%s\t%.3f\tseconds\n", id.c_str(), seconds);
  return "S-" + id + "\t" + fairseq_line(tr.src_dict().decode(src), a.post_process, nullptr) + "\n" + w_line + c_lines +
         fairseq_hypothesis_lines(hyps, id, a.opt.input_format == decode::InputFormat::raw ? &tr.tgt_text() : nullptr,
                                  a.post_process, a.alignment);
}

}  // namespace

std::string fairseq_line(const std::vector<std::string>& pieces, const std::string& post_process,
                         const data::TextPipeline* detokenizer) {
  std::string s = join_words(pieces);
  if (!post_process.empty()) s = text::fairseq_post_process(s, post_process);
  if (!detokenizer) return s;
  std::vector<std::string> words;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  return detokenizer->decode(words);
}

std::string fairseq_hypothesis_lines(const std::vector<decode::TranslationHyp>& hyps, const std::string& id,
                                     const data::TextPipeline* detokenizer, const std::string& post_process,
                                     bool alignment) {
  std::ostringstream os;
  const double ln2 = std::log(2.0);
  for (const auto& h : hyps) {
    const std::string score = score_text(static_cast<double>(static_cast<float>(h.hyp.score)) / ln2);
    const std::string hypo = fairseq_line(h.pieces, post_process, nullptr);
    os << "H-" << id << "\t" << score << "\t" << hypo << "\n";
    os << "D-" << id << "\t" << score << "\t" << (detokenizer ? fairseq_line(h.pieces, post_process, detokenizer) : hypo)
       << "\n";
    os << "P-" << id << "\t";
    for (size_t t = 0; t < h.hyp.positional_scores.size(); ++t) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4f", h.hyp.positional_scores[t] / ln2);
      os << (t ? " " : "") << buf;
    }
    os << "\n";
    if (alignment) os << "A-" << id << "\t" << alignment_pairs(h.hyp) << "\n";
  }
  return os.str();
}

namespace {

std::string format_hyps(const decode::StreamItem& item, const decode::Translator& tr, const TranslateArgs& a) {
  const auto& hyps = *item.hyps;
  const auto index = static_cast<size_t>(item.index);
  if (a.output_format == OutputFormat::fairseq) {
    return format_fairseq(hyps, index, *item.source, item.seconds, item.constraints, tr, a);
  }
  std::ostringstream os;
  auto tail = [&](const decode::TranslationHyp& h) { return a.alignment ? "\t" + alignment_pairs(h.hyp) : ""; };
  if (a.opt.search.nbest <= 1 && !a.scores) {
    if (hyps.empty()) {
      os << "\n";
    } else {
      os << hyps[0].text << tail(hyps[0]) << "\n";
    }
    return os.str();
  }
  for (size_t k = 0; k < hyps.size(); ++k) {
    os << index << "\t" << k << "\t" << hyps[k].hyp.score << "\t" << hyps[k].text << tail(hyps[k]) << "\n";
  }
  return os.str();
}
}  // namespace

void add_translate(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<TranslateArgs>();
  auto* sub = app.add_subcommand("translate", "translate text with a trained checkpoint");
  sub->add_option("--checkpoint,--path", a->checkpoint, "checkpoint file; A.pt:B.pt[:...] decodes an ensemble")->required()
      ->group("Input and output");
  sub->add_option("--input,-i", a->input, "input file, one sentence per line ('-': stdin)")->capture_default_str()
      ->group("Input and output");
  sub->add_option("--output,-o", a->output, "output file ('-': stdout)")->capture_default_str()
      ->group("Input and output");
  add_decoding_flags(sub, *a);
  sub->add_flag("--print-scores", a->scores, "print index, rank and score before each translation")
      ->group("Input and output");
  sub->add_flag("--interactive", a->interactive, "translate each input line as soon as it is read (a prompt on a terminal)")
      ->group("Input and output");
  sub->add_option("--buffer-size", a->buffer_size,
                  "lines read and translated together (sorted by length into batches); a pause in piped input "
                  "translates what has been read at once")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->group("Performance");
  sub->add_option("--workers,--inter-threads", a->workers,
                  "decoders at once, sharing one copy of the model (CTranslate2's inter_threads), each with "
                  "--threads / workers threads; each chunk of --buffer-size lines is shared among them. auto: "
                  "one per thread on the CPU, one for a line at a time, sampling or a GPU")
      ->transform(CLI::Validator(
          [](std::string& v) {
            if (v == "auto") v = "0";
            const bool digits = !v.empty() && v.size() <= 4 && v.find_first_not_of("0123456789") == std::string::npos;
            return digits && std::stoi(v) <= 1024 ? std::string() : "'" + v + "': expected auto or a number up to 1024";
          },
          "", ""))
      ->type_name("N|auto")
      ->default_str("auto")
      ->group("Performance");
  sub->add_flag("--print-alignment", a->alignment,
                "append a tab and 'src-tgt' subword pairs: the source position each target token attends most "
                "(the model's encoder attention: fconv's averaged over its attention layers; for the other "
                "families the alignment layer's (model.decoder.alignment_layer, the last by default), averaged "
                "over its heads or its first model.decoder.alignment_heads)")
      ->group("Input and output");
  sub->add_option("--input-format", a->opt.input_format,
                  "raw: text, split by the model's subword pipeline; tokens: subword tokens separated by spaces")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, decode::InputFormat>{{"raw", decode::InputFormat::raw},
                                                     {"tokens", decode::InputFormat::tokens}}))
      ->default_str("raw")
      ->group("Input and output");
  sub->add_option("--output-format", a->output_format,
                  "text: one translation per line; fairseq: fairseq-interactive's S-, W-, H-, D-, P- lines")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, OutputFormat>{{"text", OutputFormat::text}, {"fairseq", OutputFormat::fairseq}}))
      ->default_str("text")
      ->group("Input and output");
  sub->add_option("--prefix-file", a->prefix_file, "one target prefix per input line (instead of --prefix)")
      ->group("Search");
  sub->callback([a, &exit_code] {
    run_translate(*a);
    exit_code = 0;
  });
}

namespace {
// The decoders `--workers auto` runs: one per compute thread, each with one thread, where a file or
// pipe is translated on the CPU (a chunk's batches go to the threads whole, which gains more than
// sharing each batch's products among them: 1.1-1.4x in batches of 64, more one sentence at a time,
// docs/benchmarks/decoding.md); one, with every thread, on a GPU, for a line at a time
// (--interactive, --buffer-size 1) and for sampling (whose seeded draws one decoder makes in turn).
int64_t translate_workers(const TranslateArgs& a, bool on_cpu) {
  const bool one_line = a.interactive || a.buffer_size == 1;
  return on_cpu && !one_line && !a.opt.search.sampling ? compute_threads() : 1;
}
}  // namespace

void run_translate(TranslateArgs& a) {
  const torch::Device device = checkpoint::resolve_device(a.device, "--device");
  check_decoding_flags(a);
  if (!a.prefix_file.empty() && !a.opt.prefix.empty()) throw ConfigError("--prefix and --prefix-file: give one of them");
  a.opt.search.need_attn = a.alignment;
  // A:B:C decodes the models as an ensemble.
  auto lt = load_for_decoding(a.checkpoint, "--checkpoint", a.compute_type, device);
  load_shortlist(a, *lt.translator);
  // Workers share the compute threads (the pool sets each one's share before the summary says it).
  std::unique_ptr<runtime::TranslatorPool> pool;
  decode::TranslateChunk on_workers;
  const int64_t workers = a.workers > 0 ? a.workers : translate_workers(a, device.is_cpu());
  if (workers > 1) {
    try {
      pool = std::make_unique<runtime::TranslatorPool>(*lt.translator, workers);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--workers: ") + e.what());
    }
    const bool in_order = a.opt.search.sampling;  // a seeded sampler's numbers as one thread draws them
    on_workers = [&pool, in_order](const std::vector<std::string>& sources, const decode::TranslateOptions& opt,
                                   decode::TranslationStats* st, const std::vector<std::string>* prefixes,
                                   const std::vector<decode::Constraints>* constraints) {
      return pool->translate(sources, opt, st, in_order, constraints, prefixes);
    };
  }
  log::info((device.is_cpu() ? cpu_decoding_summary() : "decoding on " + device.str()) +
            (pool ? "; " + std::to_string(pool->workers()) + " workers of " + std::to_string(pool->intra_threads()) +
                        " threads"
                  : ""));
  decode::TranslationStats stats;
  io::LineReader in(a.input);
  const bool prompt = a.interactive && a.input == "-" && isatty(0);
  std::unique_ptr<Progress> progress;
  if (!a.interactive && in.size() > 0 && stderr_is_terminal()) {
    progress = std::make_unique<Progress>("translating " + in.name(), in.size(), "", true);
  }
  const int64_t buffer = a.interactive ? 1 : a.buffer_size;
  auto run = [&](std::ostream& out) {
    if (prompt) std::cerr << "> " << std::flush;
    auto emit = [&](const decode::StreamItem& item) {
      if (!item.skipped.empty()) {
        std::cerr << "leanseq: " << in.name() << ":" << item.index + 1 << ": " << item.skipped
                  << ", an empty translation written\n";
        if (a.output_format == OutputFormat::text) out << "\n";
        return;
      }
      if (!item.hyps->empty() && item.hyps->front().truncated) {
        std::cerr << "leanseq: " << in.name() << ":" << item.index + 1 << ": longer than --max-input-length "
                  << a.opt.max_input_length << " subword tokens: translated from its first "
                  << a.opt.max_input_length - 1 << " and </s>\n";
      }
      out << format_hyps(item, *lt.translator, a);
    };
    auto chunk_done = [&] {
      out << std::flush;
      if (progress) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%ld lines, %.1f sentences/s", static_cast<long>(stats.sentences),
                      stats.seconds > 0 ? stats.sentences / stats.seconds : 0.0);
        progress->update(in.bytes_read(), buf);
      }
      if (prompt) std::cerr << "> " << std::flush;
    };
    std::unique_ptr<io::LineReader> prefixes;
    if (!a.prefix_file.empty()) prefixes = std::make_unique<io::LineReader>(a.prefix_file);
    decode::translate_stream(*lt.translator, a.opt, in, buffer, emit, &stats, chunk_done, prefixes.get(), on_workers);
    if (progress) progress->finish();
  };
  if (a.output == "-") {
    run(std::cout);
  } else {
    io::atomic_write(a.output, [&](const std::string& tmp) {
      std::ofstream f(tmp, std::ios::binary);
      if (!f) throw DataError(a.output + ": cannot write");
      run(f);
      if (!f) throw DataError(a.output + ": write failed");
    });
  }
  char buf[256];
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::snprintf(buf, sizeof buf,
                "translated %ld sentences (%ld target tokens) in %.1f s: %.2f sentences/s, %.1f tokens/s; peak "
                "memory %.0f MiB",
                static_cast<long>(stats.sentences), static_cast<long>(stats.target_tokens), stats.seconds,
                stats.seconds > 0 ? stats.sentences / stats.seconds : 0.0,
                stats.seconds > 0 ? stats.target_tokens / stats.seconds : 0.0, usage.ru_maxrss / 1024.0);
  log::info(buf);
}

}  // namespace leanseq::cli