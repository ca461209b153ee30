// serve: the HTTP translation server (serve/server.h) on a checkpoint, until SIGTERM or SIGINT.
#include <signal.h>

#include <algorithm>
#include <optional>
#include <thread>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/cli/commands.h"
#include "leanseq/cli/decoding_options.h"
#include "leanseq/cli/serve_models.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/threads.h"
#include "leanseq/interop/ctranslate2.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/serve/server.h"

namespace leanseq::cli {

namespace {
struct ServeArgs : DecodingFlags {
  std::string checkpoint;
  std::vector<std::string> models;  // NAME=PATH[:PATH...]
  std::string models_file;          // YAML list of models
  std::string argos_packages;       // a directory of Argos Translate packages
  serve::ServeOptions server;
  int workers = 1;
  int64_t timeout_ms = 5;
  std::string load_only;  // LibreTranslate's --load-only: language codes, comma-separated
  bool no_files = false;
  bool lazy = false;
};

// The codes of a comma-separated list ("en,es").
std::vector<std::string> language_list(const std::string& text) {
  std::vector<std::string> codes;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string code = text.substr(start, comma - start);
    code.erase(0, code.find_first_not_of(' '));
    code.erase(code.find_last_not_of(' ') + 1);
    if (!code.empty()) codes.push_back(code);
    start = comma + 1;
  }
  return codes;
}
}  // namespace

namespace {
// How the server listens, bounds its connections and requests, and whom it answers.
void add_server_flags(CLI::App* sub, ServeArgs& a) {
  sub->add_option("--host", a.server.host, "address to listen on")->capture_default_str();
  sub->add_option("--port", a.server.port, "port (0: any free port; the log says which)")->capture_default_str();
  sub->add_option("--workers", a.workers, "decoding workers, sharing one copy of the model")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  sub->add_option("--max-batch-sentences", a.server.batching.max_sentences,
                  "sentences of concurrent requests decoded together at most (1: one at a time)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-batch-bytes,--max-batch-tokens", a.server.batching.max_bytes,
                  "bytes of source text (UTF-8) per batch at most (0: no limit; --max-batch-tokens: its former name)")
      ->capture_default_str();
  sub->add_option("--batch-timeout-ms", a.timeout_ms, "how long a batch waits for more sentences")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--max-request-bytes", a.server.max_request_bytes, "larger bodies get 413")->capture_default_str();
  sub->add_option("--queue-limit", a.server.batching.queue_limit, "sentences waiting at most; beyond, 503")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--request-timeout", a.server.request_timeout_s,
                  "seconds a request may wait for its translation (then 503, and its decoding stops)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-connections", a.server.connections.max_connections,
                  "connections at once; a new one takes the slot of the longest idle, or gets 503")
      ->capture_default_str()
      ->check(CLI::Range(1, 4096));
  sub->add_option("--header-timeout", a.server.connections.header_timeout_s,
                  "seconds a connection may take to send a request's headers (idle ones included)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--body-timeout", a.server.connections.body_timeout_s, "seconds a request may take to send its body")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--keep-alive-timeout", a.server.connections.keep_alive_s,
                  "seconds an answered connection waits for the next request")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_flag("--truncate-long-inputs", a.server.truncate_long_inputs,
                "cut texts longer than --max-input-length instead of refusing them (413)");
  sub->add_option("--batch-token-budget", a.server.batch_token_budget,
                  "source tokens x beam in one decoding batch at most (bounds its memory)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--max-beam", a.server.max_beam,
                  "the widest beam a request may ask for (a request's time and memory grow with it)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, decode::kMaxBeam));
  sub->add_option("--api-keys", a.server.access.api_keys_file,
                  "file of API keys, one 'KEY [REQUESTS_PER_MINUTE|- [CHAR_LIMIT]]' per line: /translate and /v1/translate then "
                  "need one (LibreTranslate's api_key, or an X-API-Key header)");
  sub->add_option("--req-limit", a.server.access.req_limit,
                  "requests per minute per client address without a key (0: no limit; with --api-keys, 0 refuses "
                  "keyless requests)")
      ->capture_default_str();
  sub->add_option("--cors", a.server.access.cors,
                  "origins allowed to call the API from a browser, comma-separated, or *; answers preflights");
}

// LibreTranslate's options, under its names, and which models are loaded when.
void add_libretranslate_flags(CLI::App* sub, ServeArgs& a) {
  auto& libre = a.server.libretranslate;
  sub->add_option("--char-limit", libre.char_limit,
                  "LibreTranslate API: characters per text at most (-1: no limit but --max-request-bytes); a text "
                  "is translated sentence by sentence, so it may be longer than --max-input-length")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
  sub->add_option("--batch-limit", libre.batch_limit, "LibreTranslate API: texts per request at most (-1: no limit)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, int64_t{1} << 40));
  sub->add_option("--alternatives-limit", libre.alternatives_limit,
                  "LibreTranslate API: alternatives a request may ask for (-1: up to --max-beam - 1)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, decode::kMaxBeam));
  sub->add_option("--frontend-timeout", libre.frontend_timeout_ms, "LibreTranslate API: the page's typing delay (ms), for /frontend/settings")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--disable-files-translation", a.no_files, "LibreTranslate API: no /translate_file");
  sub->add_option("--files-max-bytes", a.server.files_max_bytes,
                  "bytes of translated files kept for /download_file at most (the oldest go first)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--files-max-age", a.server.files_max_age_s, "seconds a translated file is kept")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_flag("--lazy", a.lazy,
                "load each model at its first request (memory only for the pairs in use); its language pair comes "
                "from the models file's source and target, or from its checkpoint, read at start");
  sub->add_option("--load-only", a.load_only,
                  "serve only the models between these languages (comma-separated codes, as LibreTranslate's)");
}

// The models of `specs` to serve: loaded now, or (--lazy) with their language pair only, from the
// models file or their checkpoint's dictionaries (read, then let go); with --load-only, those
// between its languages. `described`: what the start-up line says of them.
std::vector<serve::ServedModel> served_models(ServeArgs& a, const std::vector<ModelSpec>& specs,
                                              const torch::Device& device, const std::vector<std::string>& only,
                                              std::string& described) {
  // One copy of each model's weights, decoded by its workers.
  std::vector<serve::ServedModel> served;
  if (a.lazy && !a.shortlist.empty()) throw ConfigError("--lazy: not with --shortlist");
  auto in_only = [&](const std::string& code) { return std::find(only.begin(), only.end(), code) != only.end(); };
  for (const auto& spec : specs) {
    std::optional<runtime::LoadedTranslator> lt;
    std::string source = spec.source, target = spec.target;
    if (!a.lazy) {
      lt = load_for_decoding(spec.checkpoint, "--checkpoint", spec.compute_type, device);
      if (!a.shortlist.empty()) {
        load_shortlist(a, *lt->translator);
        a.server.defaults.shortlist = a.opt.shortlist;
      }
    }
    if (source.empty() || target.empty()) {
      // Loaded, its vocabulary's names; else its package's metadata, or its checkpoint's.
      const std::string first = spec.checkpoint.substr(0, spec.checkpoint.find(':'));
      auto languages = [&]() -> std::pair<std::string, std::string> {
        if (lt) return {lt->loaded.vocab.src_lang, lt->loaded.vocab.tgt_lang};
        if (interop::is_ctranslate2_model(first)) return interop::ctranslate2_languages(first);
        const auto vocab = checkpoint::read_checkpoint(first).vocab;
        return {vocab.src_lang, vocab.tgt_lang};
      }();
      if (source.empty()) source = languages.first;
      if (target.empty()) target = languages.second;
    }
    serve::ModelInfo info{spec.name, source, target};
    if (!only.empty() && !(in_only(info.source_lang) && in_only(info.target_lang))) {
      log::info("--load-only " + a.load_only + ": not serving " + spec.name + " (" + info.source_lang + "->" +
                info.target_lang + ")");
      continue;
    }
    described += (described.empty() ? "" : ", ") + spec.name + " (" + info.source_lang + "->" + info.target_lang + ", " +
                 std::to_string(spec.workers) + " worker" + (spec.workers > 1 ? "s" : "") + (lt ? "" : ", lazy") + ")";
    if (lt) {
      served.push_back({info, std::move(lt->translator), spec.workers, nullptr});
    } else {
      served.push_back({info, nullptr, spec.workers, [spec, device] {
                          return load_for_decoding(spec.checkpoint, "--checkpoint", spec.compute_type, device).translator;
                        }});
    }
  }
  return served;
}

void run_serve(ServeArgs& a) {
  const torch::Device device = checkpoint::resolve_device(a.device, "--device");
  check_decoding_flags(a);
  serve::Access{a.server.access};  // a bad keys file or origin stops the start before the model loads
  a.server.batching.timeout = std::chrono::milliseconds(a.timeout_ms);
  a.server.defaults = a.opt;
  a.server.libretranslate.files = !a.no_files;
  const auto only = language_list(a.load_only);
  if (!a.load_only.empty() && only.empty()) throw ConfigError("--load-only: no language code in '" + a.load_only + "'");
  // Signals go to one thread, which stops the server; requests in flight finish.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const auto specs = model_specs(a.checkpoint, a.models, a.models_file, a.argos_packages, a.workers, a.compute_type);
  if (!a.shortlist.empty() && specs.size() > 1) {
    throw ConfigError("--shortlist: one model per server (it is for one target dictionary)");
  }
  std::string described;
  auto served = served_models(a, specs, device, only, described);
  if (served.empty()) throw ConfigError("--load-only " + a.load_only + ": none of the models translates between these languages");
  serve::Server server(std::move(served), a.server);
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    if (sig != 0) log::info("signal " + std::to_string(sig) + " received: finishing the requests in flight");
    server.stop();
  });
  const bool ok = server.run([&](int port) {
    log::info("serving " + described + " on " + device.str() + " with " + std::to_string(compute_threads()) +
              " threads; batches of up to " + std::to_string(a.server.batching.max_sentences) + " sentences");
    if (device.is_cpu()) log::info(cpu_decoding_summary());
    log::info("listening on http://" + a.server.host + ":" + std::to_string(port) + "/");
  });
  if (!ok) {
    pthread_kill(watcher.native_handle(), SIGTERM);
    watcher.join();
    throw ConfigError("serve: cannot listen on " + a.server.host + ":" + std::to_string(a.server.port));
  }
  watcher.join();
  log::info("stopped");
}
}  // namespace

void add_serve(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ServeArgs>();
  auto* sub = app.add_subcommand("serve", "an HTTP translation server with dynamic batching (docs/serve.md)");
  sub->add_option("--checkpoint,--path", a->checkpoint, "checkpoint file; A.pt:B.pt[:...] serves an ensemble");
  sub->add_option("--model", a->models,
                  "NAME=CHECKPOINT (repeatable): serve several models, each with its own queue and --workers, routed "
                  "by name or language pair (instead of --checkpoint)");
  sub->add_option("--models", a->models_file,
                  "YAML list of models to serve: name, checkpoint, and optionally workers, compute_type, and the "
                  "source and target languages it is served as (instead "
                  "of --checkpoint and --model)");
  sub->add_option("--argos-packages", a->argos_packages,
                  "serve every Argos Translate package in this directory (as LibreTranslate does; Argos Translate "
                  "installs them in ~/.local/share/argos-translate/packages), each as its language pair; "
                  "--model or --models may add more");
  add_server_flags(sub, *a);
  add_libretranslate_flags(sub, *a);
  add_decoding_flags(sub, *a);
  sub->callback([a, &exit_code] {
    run_serve(*a);
    exit_code = 0;
  });
}

}  // namespace leanseq::cli
