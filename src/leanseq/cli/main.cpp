// The only place that parses argv and catches exceptions: usage/config errors exit 2, everything
// else 1, always with one clear line on stderr.
#include <c10/util/Exception.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "leanseq/cli/commands.h"
#include "leanseq/core/error.h"
#include "leanseq/core/memory.h"

namespace {
std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }
}  // namespace

int main(int argc, char** argv) {
  leanseq::retain_freed_memory();
  leanseq::cli::set_program_args(argc, argv);
  CLI::App app{"leanseq: sequence-to-sequence models that pay less attention"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "leanseq 0.1.0");
  int exit_code = 0;
  leanseq::cli::add_prepare(app, exit_code);
  leanseq::cli::add_train(app, exit_code);
  leanseq::cli::add_translate(app, exit_code);
  leanseq::cli::add_score(app, exit_code);
  leanseq::cli::add_average(app, exit_code);
  leanseq::cli::add_list_archs(app, exit_code);
  leanseq::cli::add_plot(app, exit_code);
  leanseq::cli::add_quickstart(app, exit_code);
  leanseq::cli::add_eval_lm(app, exit_code);
  leanseq::cli::add_attention(app, exit_code);
  leanseq::cli::add_analyze(app, exit_code);
  leanseq::cli::add_classify(app, exit_code);
  leanseq::cli::add_prune(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "leanseq: " << first_line(e.what()) << " (see --help)\n";
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
