// fairseq's command lines, run by leanseq: `leanseq fairseq-interactive DATA --path M.pt ...` (also
// reachable as a program named fairseq-interactive, a link to leanseq) takes fairseq-interactive's
// flags for what leanseq does, imports the fairseq checkpoints with DATA's dictionaries into a
// private temporary directory, and translates as `leanseq translate --output-format fairseq` does.
// A flag it does not take is refused by name.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>

#include "leanseq/cli/commands.h"
#include "leanseq/cli/translate.h"
#include "leanseq/core/error.h"
#include "leanseq/core/strings.h"
#include "leanseq/interop/fairseq.h"

namespace leanseq::cli {

namespace {
struct InteractiveArgs : TranslateArgs {
  std::string data, path, source_lang, target_lang, bpe, spm, tokenizer, bpe_codes;
  bool cpu = false;
};

// A directory of its own under $TMPDIR (or /tmp), leanseq-fairseq-<pid>-XXXXXX, removed with
// everything in it when it goes. Those that processes no longer alive left (killed, so that their
// destructors did not run) are removed first.
class PrivateDirectory {
 public:
  PrivateDirectory() {
    const char* tmp = std::getenv("TMPDIR");
    const std::string parent = tmp && *tmp ? tmp : "/tmp";
    remove_stale(parent);
    std::string pattern = parent + "/leanseq-fairseq-" + std::to_string(::getpid()) + "-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw Error("cannot make a temporary directory from " + pattern);
    path_ = pattern;
  }
  static void remove_stale(const std::string& parent) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(parent, ec)) {
      const std::string name = e.path().filename().string(), prefix = "leanseq-fairseq-";
      if (name.rfind(prefix, 0) != 0) continue;
      const auto dash = name.find('-', prefix.size());
      if (dash == std::string::npos) continue;
      const std::string digits = name.substr(prefix.size(), dash - prefix.size());
      if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(digits));
      if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
      std::filesystem::remove_all(e.path(), ec);
    }
  }
  ~PrivateDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};
}  // namespace

void add_fairseq_interactive(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<InteractiveArgs>();
  a->output_format = OutputFormat::fairseq;
  auto* sub = app.add_subcommand(
      "fairseq-interactive",
      "fairseq-interactive's command line: translate with fairseq checkpoints (imported on the fly) and print its "
      "S/H/D/P lines (docs/fairseq.md)");
  sub->add_option("data", a->data, "the data directory with dict.<src>.txt and dict.<tgt>.txt")->required();
  sub->add_option("--path", a->path, "fairseq checkpoint(s); A.pt:B.pt decodes an ensemble")->required();
  sub->add_option("--source-lang,-s", a->source_lang, "source language (default: the checkpoint's)");
  sub->add_option("--target-lang,-t", a->target_lang, "target language (default: the checkpoint's)");
  sub->add_option("--bpe", a->bpe, "sentencepiece (with --sentencepiece-model) or subword_nmt (with --bpe-codes)")
      ->check(CLI::IsMember({"sentencepiece", "subword_nmt"}));
  sub->add_option("--sentencepiece-model", a->spm, "the SentencePiece model of --bpe sentencepiece");
  sub->add_option("--tokenizer", a->tokenizer, "moses (the input is Moses-tokenized, the output detokenized)")
      ->check(CLI::IsMember({"moses"}));
  sub->add_option("--bpe-codes", a->bpe_codes, "subword-nmt codes of --bpe subword_nmt");
  sub->add_option("--input", a->input, "file to translate, one sentence per line ('-': stdin)")->capture_default_str();
  sub->add_option("--buffer-size", a->buffer_size, "lines read and translated together")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30));
  sub->add_flag("--print-alignment", a->alignment, "A lines: the source position each target token attends most");
  sub->add_flag("--cpu", a->cpu, "decode on the CPU (leanseq's default device)");
  add_decoding_flags(sub, *a);
  sub->callback([a, &exit_code] {
    if (a->cpu) a->device = "cpu";
    interop::FairseqImportOptions import;
    import.data_dir = a->data;
    import.source_lang = a->source_lang;
    import.target_lang = a->target_lang;
    if (a->bpe == "sentencepiece") {
      if (a->spm.empty()) throw ConfigError("--bpe sentencepiece needs --sentencepiece-model");
      if (!a->tokenizer.empty()) throw ConfigError("--tokenizer moses goes with --bpe subword_nmt, not sentencepiece");
      import.spm = a->spm;
    } else if (a->bpe == "subword_nmt" || !a->tokenizer.empty()) {
      if (a->bpe == "subword_nmt" && a->bpe_codes.empty()) throw ConfigError("--bpe subword_nmt needs --bpe-codes");
      if (a->tokenizer.empty()) {
        throw ConfigError("--bpe subword_nmt: leanseq applies it after Moses tokenization; add --tokenizer moses");
      }
      import.tokenizer = "moses";
      import.bpe_codes = a->bpe == "subword_nmt" ? a->bpe_codes : "";
    } else {
      throw ConfigError("give the text pipeline: --bpe sentencepiece --sentencepiece-model M, or --tokenizer moses "
                        "[--bpe subword_nmt --bpe-codes C]");
    }
    if (!a->spm.empty() && a->bpe != "sentencepiece") throw ConfigError("--sentencepiece-model goes with --bpe sentencepiece");
    if (!a->bpe_codes.empty() && a->bpe != "subword_nmt") throw ConfigError("--bpe-codes goes with --bpe subword_nmt");
    PrivateDirectory tmp;
    std::string imported;
    const auto paths = colon_separated_paths(a->path, "--path");
    for (size_t i = 0; i < paths.size(); ++i) {
      import.checkpoint = paths[i];
      import.out = tmp.path() + "/" + std::to_string(i) + ".pt";
      interop::import_fairseq(import);
      imported += (imported.empty() ? "" : ":") + import.out;
    }
    a->checkpoint = imported;
    run_translate(*a);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
