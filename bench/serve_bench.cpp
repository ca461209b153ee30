// Load on `leanseq serve` over loopback: --clients concurrent clients each send --requests
// single-sentence requests one after the other, first to a server with dynamic batching, then to
// one with --max-batch-sentences 1, alternated over --rounds; requests/s, p50 and p99 latency and
// failed requests per run, medians, and the ratio. Prints one JSON object (bench/README.md).
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "errors.h"
#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "median.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  double requests_per_second = 0, p50_ms = 0, p99_ms = 0;
  int failed = 0;
};

std::string read_file(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Starts `leanseq serve` with `flags`, sends the load, stops it.
// Where and how a request is sent: leanseq's /v1/translate, or LibreTranslate's /translate.
struct Api {
  std::string path = "/v1/translate";
  std::string source, target;  // LibreTranslate's fields
  std::string body(const std::string& text) const {
    if (path == "/v1/translate") return nlohmann::json{{"text", text}}.dump();
    return nlohmann::json{{"q", text}, {"source", source}, {"target", target}}.dump();
  }
};

Run load(const std::string& cli, const std::string& checkpoint, const std::string& flags, const std::vector<std::string>& lines,
         int clients, int requests, const std::string& log, const Api& api) {
  const std::string cmd = "exec " + cli + " serve --checkpoint " + checkpoint + " --host 127.0.0.1 --port 0 " + flags +
                          " > " + log + " 2>&1";
  std::filesystem::remove(log);  // the last run's "listening on" must not be read for this one
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = 0;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) {
    throw leanseq::Error("cannot start " + cli);
  }
  int port = 0;
  const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)/");
  for (int i = 0; i < 600 && port == 0; ++i) {
    std::smatch m;
    const std::string text = read_file(log);
    if (std::regex_search(text, m, listening)) port = std::stoi(m[1]);
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  Run run;
  if (port > 0) {
    std::vector<std::vector<double>> latencies(clients);
    std::vector<int> failed(clients, 0);
    // Every client connects and sends one untimed request first; the timed requests start together.
    std::mutex gate_mutex;
    std::condition_variable gate;
    int ready = 0;
    Clock::time_point start;
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        httplib::Client client("127.0.0.1", port);
        client.set_read_timeout(120, 0);
        client.set_keep_alive(true);  // one connection per client, kept
        client.set_tcp_nodelay(true);
        client.Post(api.path.c_str(), api.body(lines[c % lines.size()]), "application/json");
        {
          std::unique_lock<std::mutex> lock(gate_mutex);
          if (++ready == clients) {
            start = Clock::now();
            gate.notify_all();
          } else {
            gate.wait(lock, [&] { return ready == clients; });
          }
        }
        for (int r = 0; r < requests; ++r) {
          const auto& text = lines[(c * requests + r) % lines.size()];
          const auto t0 = Clock::now();
          auto res = client.Post(api.path.c_str(), api.body(text), "application/json");
          if (!res || res->status != 200) {
            ++failed[c];
            std::cerr << "leanseq-serve-bench: a request failed: "
                      << (res ? std::to_string(res->status) + " " + res->body : httplib::to_string(res.error())) << "\n";
          }
          latencies[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
      });
    }
    for (auto& t : threads) t.join();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> all;
    for (int c = 0; c < clients; ++c) {
      all.insert(all.end(), latencies[c].begin(), latencies[c].end());
      run.failed += failed[c];
    }
    std::sort(all.begin(), all.end());
    run.requests_per_second = static_cast<double>(all.size()) / seconds;
    run.p50_ms = all[all.size() / 2];
    run.p99_ms = all[std::min(all.size() - 1, static_cast<size_t>(0.99 * static_cast<double>(all.size())))];
  }
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  if (port == 0) throw leanseq::Error("the server did not start: " + read_file(log));
  return run;
}

nlohmann::json summary(const std::vector<Run>& runs) {
  std::vector<double> rps, p50, p99;
  int failed = 0;
  nlohmann::json each = nlohmann::json::array();
  for (const auto& r : runs) {
    rps.push_back(r.requests_per_second), p50.push_back(r.p50_ms), p99.push_back(r.p99_ms), failed += r.failed;
    each.push_back({{"requests_per_second", r.requests_per_second}, {"p50_ms", r.p50_ms}, {"p99_ms", r.p99_ms}, {"failed", r.failed}});
  }
  return {{"runs", each},
          {"median_requests_per_second", leanseq::bench::median(rps)},
          {"median_p50_ms", leanseq::bench::median(p50)},
          {"median_p99_ms", leanseq::bench::median(p99)},
          {"failed", failed}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"leanseq-serve-bench: loopback load on leanseq serve, dynamic batching against one sentence at a time"};
  std::string checkpoint, input, cli, flags;
  int clients = 16, requests = 10, rounds = 3;
  app.add_option("--checkpoint", checkpoint, "the model to serve")->required();
  app.add_option("--input,-i", input, "sentences to send, one per line")->required();
  app.add_option("--cli", cli, "the leanseq executable (default: beside this program's directory)");
  app.add_option("--clients", clients, "concurrent clients")->capture_default_str();
  app.add_option("--requests", requests, "requests per client")->capture_default_str();
  app.add_option("--rounds", rounds, "alternated rounds of both servers")->capture_default_str();
  app.add_option("--serve-flags", flags, "more flags for both servers (decoding options, --threads)");
  Api api;
  std::string pair;
  app.add_option("--libretranslate", pair,
                 "SOURCE-TARGET: send LibreTranslate's /translate requests of that pair (source may be auto) "
                 "instead of /v1/translate's");
  CLI11_PARSE(app, argc, argv);
  return leanseq::bench::run_reporting_errors("leanseq-serve-bench", [&] {
    if (clients < 1 || requests < 1 || rounds < 1) throw leanseq::ConfigError("--clients, --requests and --rounds: at least 1");
    if (!pair.empty()) {
      const size_t dash = pair.find('-');
      if (dash == std::string::npos || dash == 0 || dash + 1 == pair.size()) {
        throw leanseq::ConfigError("--libretranslate: expected SOURCE-TARGET, got '" + pair + "'");
      }
      api = {"/translate", pair.substr(0, dash), pair.substr(dash + 1)};
    }
    if (cli.empty()) cli = (std::filesystem::canonical("/proc/self/exe").parent_path().parent_path() / "leanseq").string();
    const auto lines = leanseq::io::read_lines(input);
    if (lines.empty()) throw leanseq::DataError(input + ": no sentences");
    const std::string log = (std::filesystem::temp_directory_path() / ("leanseq-serve-bench-" + std::to_string(getpid()) + ".log")).string();
    std::vector<Run> batched, single;
    for (int r = 0; r < rounds; ++r) {
      for (int which = 0; which < 2; ++which) {
        const bool dynamic = (r + which) % 2 == 0;
        auto run = load(cli, checkpoint, flags + (dynamic ? "" : " --max-batch-sentences 1"), lines, clients, requests, log, api);
        (dynamic ? batched : single).push_back(run);
      }
    }
    std::filesystem::remove(log);
    auto b = summary(batched), s = summary(single);
    nlohmann::json out = {{"benchmark", "serve_load"},
                          {"endpoint", api.path},
                          {"clients", clients},
                          {"requests_per_client", requests},
                          {"rounds", rounds},
                          {"dynamic_batching", b},
                          {"one_sentence_at_a_time", s},
                          {"requests_per_second_ratio", b["median_requests_per_second"].get<double>() /
                                                            s["median_requests_per_second"].get<double>()}};
    std::cout << out.dump() << "\n";
  });
}
