// The only place that parses argv and catches exceptions: usage/config errors exit 2, everything
// else 1, always with one clear line on stderr.
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <vector>

#include "leanseq/cli/commands.h"
#include "leanseq/core/blas.h"
#include "leanseq/core/error.h"
#include "leanseq/core/strings.h"
#include "leanseq/core/startup.h"
#include <leanseq/version.h>
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/packed_products.h"

using leanseq::first_line;

namespace {

// "leanseq analyze" for the subcommand path of `app`.
std::string command_path(const CLI::App* app) {
  std::string path;
  for (; app; app = app->get_parent()) path = app->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

std::string join(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// The first word that names no command where one is expected ("leanseq frobnicate", "leanseq
// analyze frobnicate") gets one line that names it and lists the commands there; returns false
// when the command path is fine (or stops at an option, left to CLI11).
bool unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    auto subs = at->get_subcommands([](CLI::App*) { return true; });
    if (subs.empty() || word.empty() || word[0] == '-') return false;
    CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (auto* s : subs) {
      names.push_back(s->get_name());
      if (s->check_name(word)) next = s;
    }
    if (!next) {
      std::cerr << command_path(at) << ": unknown command '" << word << "'; the commands are: " << join(names) << "\n";
      return true;
    }
    at = next;
  }
  return false;
}

// An argument the deepest parsed subcommand does not take, named with that command's options;
// false when there is none (the parse failed for another reason).
bool unexpected_argument(CLI::App& app) {
  CLI::App* at = &app;
  for (auto subs = at->get_subcommands(); !subs.empty(); subs = at->get_subcommands()) at = subs.front();
  const auto rest = at->remaining();
  if (rest.empty()) return false;
  const std::string& word = rest.front();
  std::vector<std::string> options;
  for (const auto* o : at->get_options()) {
    const std::string names = o->get_name();
    if (!names.empty() && names[0] == '-') options.push_back(names);
  }
  const bool is_option = word[0] == '-';
  std::cerr << command_path(at) << ": " << (is_option ? "unknown option '" : "unexpected argument '")
            << word.substr(0, word.find('=')) << "'; its options are: " << join(options) << "\n";
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  leanseq::cli::set_program_args(argc, argv);
  CLI::App app{"leanseq: sequence-to-sequence models that pay less attention", "leanseq"};
  app.require_subcommand(1);
  // The version, the BLAS this process runs (bench/peer/fairseq.sh gives fairseq the same) and its
  // allocator.
  app.set_version_flag("--version", [] {
    return std::string("leanseq ") + leanseq::kVersion + "\n" + leanseq::blas_summary() + "\n" +
           leanseq::allocator_summary();
  });
  int exit_code = 0;
  leanseq::cli::add_prepare(app, exit_code);
  leanseq::cli::add_train(app, exit_code);
  leanseq::cli::add_translate(app, exit_code);
  leanseq::cli::add_score(app, exit_code);
  leanseq::cli::add_average(app, exit_code);
  leanseq::cli::add_quantize(app, exit_code);
  leanseq::cli::add_list_archs(app, exit_code);
  leanseq::cli::add_plot(app, exit_code);
  leanseq::cli::add_quickstart(app, exit_code);
  leanseq::cli::add_eval_lm(app, exit_code);
  leanseq::cli::add_attention(app, exit_code);
  leanseq::cli::add_analyze(app, exit_code);
  leanseq::cli::add_classify(app, exit_code);
  leanseq::cli::add_prune(app, exit_code);
  leanseq::cli::add_import_fairseq(app, exit_code);
  leanseq::cli::add_import_ctranslate2(app, exit_code);
  leanseq::cli::add_tokenize(app, exit_code);
  leanseq::cli::add_shortlist(app, exit_code);
  leanseq::cli::add_serve(app, exit_code);
  leanseq::cli::add_fairseq_interactive(app, exit_code);
  leanseq::cli::add_fairseq_generate(app, exit_code);
  leanseq::cli::add_fairseq_train(app, exit_code);
  leanseq::cli::add_fairseq_eval_lm(app, exit_code);
  leanseq::cli::add_fairseq_validate(app, exit_code);
  leanseq::cli::add_fairseq_preprocess(app, exit_code);
  leanseq::cli::add_fairseq_score(app, exit_code);
  // Started through a link named after a fairseq command (fairseq-interactive -> leanseq, installed
  // with -DLEANSEQ_FAIRSEQ_LINKS=ON): that command, with the arguments given.
  std::vector<char*> args(argv, argv + argc);
  std::string invoked = std::filesystem::path(argv[0]).filename().string(), self = "leanseq";
  if (invoked.rfind("fairseq-", 0) == 0) {
    args.insert(args.begin() + 1, invoked.data());
    args[0] = self.data();
  }
  argc = static_cast<int>(args.size());
  argv = args.data();
  if (unknown_command(app, argc, argv)) return 2;
  try {
    // A bad LEANSEQ_ONEDNN_ROWS, LEANSEQ_TRAINING_PRODUCTS or LEANSEQ_PACKED_WEIGHTS(_MB) stops
    // every command before it starts, not at its first product.
    leanseq::kernels::onednn_rows();
    leanseq::kernels::training_products();
    leanseq::kernels::packed_weights();
    leanseq::kernels::parse_packed_weights_limit(std::getenv("LEANSEQ_PACKED_WEIGHTS_MB"));
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    // An unknown option is named before anything it may have hidden (a required one, say).
    if (!unexpected_argument(app)) std::cerr << "leanseq: " << first_line(e.what()) << " (see --help)\n";
    return 2;
  } catch (const leanseq::Error& e) {
    std::cerr << "leanseq: error: " << first_line(e.what()) << "\n";
    return e.exit_code();
  } catch (const c10::Error& e) {
    std::cerr << "leanseq: error: " << first_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "leanseq: error: " << first_line(e.what()) << "\n";
    return 1;
  }
  return exit_code;
}
