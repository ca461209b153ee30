// The causal A2 block's full (training) pass over a sequence, two ways, as the length grows:
// "masked", the whole sequence as one masked [T, T] product (quadratic), and "chunked", the default
// (a masked product inside chunks of 64 positions, running sums across them: linear). For each
// length: forward + backward wall time (medians of alternated rounds, and their ratio) and the
// peak memory the pass adds (measured in a child process of this program, as the growth of its
// maximum resident set). Prints one JSON object (bench/README.md).
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "errors.h"
#include "leanseq/core/startup.h"
#include "leanseq/core/threads.h"
#include "leanseq/nn/double_attention.h"
#include "median.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  int64_t batch = 8, dim = 512, length = 64;
};

// A causal block of width dim (m = n = dim / 4, the presets' default) and its input.
struct Case {
  leanseq::nn::DoubleAttention block{nullptr};
  torch::Tensor x, probe;
  Case(const Shape& s, int64_t chunk) : block(s.dim, s.dim / 4, s.dim / 4, true, 0.0) {
    block->set_causal_chunk(chunk);
    x = torch::randn({s.batch, s.length, s.dim}).requires_grad_(true);
    probe = torch::randn({s.batch, s.length, s.dim});
  }
  void pass() {
    block->zero_grad();
    x.mutable_grad().reset();
    block(x).backward(probe);
  }
};

long max_rss_kb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// Child mode: one pass, printing the growth of the maximum resident set in MiB.
void measure_memory(const Shape& s, int64_t chunk) {
  Case c(s, chunk);
  const long before = max_rss_kb();
  c.pass();
  std::cout << (max_rss_kb() - before) / 1024.0 << "\n";
}

double child_memory_mib(const std::string& self, const Shape& s, int64_t chunk, int threads) {
  const std::string cmd = self + " --measure-memory --chunk " + std::to_string(chunk) + " --batch " +
                          std::to_string(s.batch) + " --dim " + std::to_string(s.dim) + " --lengths " +
                          std::to_string(s.length) + " --threads " + std::to_string(threads);
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start " + cmd);
  double mib = -1;
  if (fscanf(pipe, "%lf", &mib) != 1) mib = -1;
  if (pclose(pipe) != 0 || mib < 0) throw std::runtime_error("the memory probe failed: " + cmd);
  return mib;
}

}  // namespace

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  CLI::App app{"leanseq-a2-bench: the causal A2 block's masked (quadratic) and chunked (linear) full passes"};
  Shape shape;
  std::vector<int64_t> lengths{64, 128, 256, 512, 1024};
  int rounds = 5, threads = 0;
  int64_t chunk = leanseq::nn::DoubleAttentionImpl::kDefaultCausalChunk;
  bool child = false;
  app.add_option("--lengths", lengths, "sequence lengths")->delimiter(',')->capture_default_str();
  app.add_option("--batch", shape.batch, "sequences per batch")->capture_default_str();
  app.add_option("--dim", shape.dim, "block width (m = n = dim / 4)")->capture_default_str();
  app.add_option("--rounds", rounds, "alternated timed rounds per length")->capture_default_str();
  app.add_option("--chunk", chunk, "positions per chunk of the chunked form")->capture_default_str();
  app.add_option("--threads", threads, "compute threads (0: the default)");
  app.add_flag("--measure-memory", child, "internal: one pass in this process, print its memory growth (MiB)");
  CLI11_PARSE(app, argc, argv);
  return leanseq::bench::run_reporting_errors("leanseq-a2-bench", [&] {
    if (rounds < 1 || shape.batch < 1 || shape.dim < 4 || lengths.empty()) {
      throw leanseq::ConfigError("--rounds, --batch and --lengths must be positive and --dim at least 4");
    }
    leanseq::set_compute_threads(threads);
    if (child) {
      shape.length = lengths.front();
      measure_memory(shape, chunk);
      return;
    }
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t T : lengths) {
      Shape s = shape;
      s.length = T;
      Case masked(s, 0), chunked(s, chunk);
      masked.pass(), chunked.pass();  // warm-up
      std::vector<double> ms_masked, ms_chunked;
      for (int r = 0; r < rounds; ++r) {
        for (int which = 0; which < 2; ++which) {
          const bool first = (r + which) % 2 == 0;  // alternate which form goes first
          auto& c = first ? masked : chunked;
          const auto t0 = Clock::now();
          c.pass();
          (first ? ms_masked : ms_chunked).push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
      }
      const double mm = leanseq::bench::median(ms_masked), mc = leanseq::bench::median(ms_chunked);
      rows.push_back({{"T", T},
                      {"masked_ms", mm},
                      {"chunked_ms", mc},
                      {"chunked_speedup", mm / mc},
                      {"masked_peak_mib", child_memory_mib(argv[0], s, 0, threads)},
                      {"chunked_peak_mib", child_memory_mib(argv[0], s, chunk, threads)}});
    }
    nlohmann::json out = {{"benchmark", "a2_causal_full_pass"},
                          {"batch", shape.batch},
                          {"dim", shape.dim},
                          {"m", shape.dim / 4},
                          {"n", shape.dim / 4},
                          {"chunk", chunk},
                          {"threads", leanseq::compute_threads()},
                          {"rounds", rounds},
                          {"lengths", rows}};
    std::cout << out.dump() << "\n";
  });
}
