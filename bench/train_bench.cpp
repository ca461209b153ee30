// Training speed and activation memory at a fixed batch shape: untrained presets, random
// sentence pairs of --length tokens in batches of --batch-size, Adam updates (train/adam.h, as
// `train` does; `:adam=composite` for torch::optim::Adam's). Each contender is a
// preset, optionally with model settings after ':' (e.g. pervasive_small:memory_efficient=true),
// and on CUDA mixed precision (`transformer_small:amp=float16`, as train --amp).
// The contenders run side by side in one process, interleaved over rounds; for each, the median
// target tokens/s and the peak bytes of CPU tensor storage during its updates (core/memory.h),
// with the ratios to the first contender, as one JSON object (see bench/README.md). With --profile,
// one more, untimed pass per contender charges each operator its self time (operator_time.h).
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <optional>
#include <nlohmann/json.hpp>

#include "contender.h"
#include "errors.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/core/config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/startup.h"
#include "leanseq/core/threads.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/label_smoothed_ce.h"
#include "leanseq/kernels/product_flops.h"
#include "leanseq/models/registry.h"
#include "leanseq/train/adam.h"
#include "leanseq/train/mixed_precision.h"
#include "leanseq/train/optimizer_state.h"
#include "median.h"
#include "products_alone.h"
#include "operator_time.h"

namespace {
using leanseq::bench::Contender;
using leanseq::bench::parse_contender;

struct Settings {
  int64_t length = 20, batch_size = 64, vocab = 8000, steps = 5;
  torch::Device device{torch::kCPU};
};

// One contender's updates; with `profile`, each operator's self time is recorded as well (which
// slows the updates a little).
nlohmann::json train(const Contender& c, const Settings& s, bool profile = false) {
  torch::manual_seed(1);
  leanseq::bench::ContenderThreads threads(c);
  auto model = leanseq::models::build_model(*leanseq::bench::contender_config(c), {s.vocab, s.vocab, true});
  model->to(s.device);
  model->train();
  std::unique_ptr<torch::optim::Optimizer> adam;
  if (c.adam == "composite") {
    adam = std::make_unique<torch::optim::Adam>(model->parameters(), torch::optim::AdamOptions(1e-4));
  } else {
    adam = std::make_unique<leanseq::train::Adam>(model->parameters(), torch::optim::AdamOptions(1e-4));
  }
  if (c.amp == "float16" && !s.device.is_cuda()) throw leanseq::ConfigError(c.name + ": amp=float16 trains on CUDA only");
  leanseq::train::MixedPrecision amp(c.amp, s.device.is_cuda(), 128, 2000, 1e-4);
  const int64_t B = s.batch_size, T = s.length;
  auto src = torch::randint(4, s.vocab, {B, T}, torch::kLong);
  src.select(1, T - 1).fill_(2);
  auto target = torch::randint(4, s.vocab, {B, T}, torch::kLong);
  target.select(1, T - 1).fill_(2);
  auto prev = torch::cat({torch::full({B, 1}, 2, torch::kLong), target.narrow(1, 0, T - 1)}, 1);
  auto lengths = torch::full({B}, T, torch::kLong);
  src = src.to(s.device), target = target.to(s.device), prev = prev.to(s.device);
  const auto params = model->parameters();
  auto update = [&] {
    leanseq::train::clear_gradients(params);  // as train/trainer.cpp does
    torch::Tensor logits;
    {
      leanseq::train::MixedPrecision::Autocast autocast(amp);
      logits = model->forward(src, lengths, prev).logits;
    }
    logits = leanseq::kernels::cross_entropy_input(logits);
    auto loss = leanseq::kernels::label_smoothed_cross_entropy(logits.view({-1, logits.size(-1)}), target.view(-1),
                                                               0.1, 1);
    amp.scale_loss(loss.loss).backward();
    if (amp.scaled() && !amp.unscale(params, 1.0)) return;  // unscaled: nothing to divide, as in the trainer
    adam->step();
  };
  auto sync = [&] {
    if (s.device.is_cuda()) torch::cuda::synchronize(s.device.index());
  };
  update();  // the optimizer state and the allocator's first blocks
  sync();
  leanseq::reset_cpu_tensor_peak();
  const int64_t before = leanseq::cpu_tensor_bytes();
  std::optional<leanseq::bench::OperatorTime> times;
  std::optional<leanseq::kernels::ProductShapes> shapes;
  if (profile) times.emplace(), shapes.emplace();
  const uint64_t flops_before = leanseq::kernels::product_flops();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < s.steps; ++i) update();
  sync();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The work of the products oneDNN ran (kernels/product_flops.h), in GFLOP.
  const double gflop = static_cast<double>(leanseq::kernels::product_flops() - flops_before) / 1e9;
  if (profile) {
    auto ops = leanseq::bench::operator_profile(times->by_name(), seconds, static_cast<double>(s.steps), "update");
    const double product_seconds = ops["matrix_products_share"].get<double>() * seconds;
    ops["products_gflops"] = product_seconds > 0 ? gflop / product_seconds : 0.0;
    times.reset();
    ops["products_alone_ms_per_update"] = 1e3 * leanseq::bench::products_alone_seconds(shapes->counts()) / static_cast<double>(s.steps);
    return ops;
  }
  const double tokens = static_cast<double>(B * T * s.steps);
  return {{"seconds", seconds},
          {"product_gflop_per_update", gflop / static_cast<double>(s.steps)},
          {"update_gflops", gflop / seconds},
          {"threads", torch::get_num_threads()},
          {"target_tokens_per_second", tokens / seconds},
          {"peak_tensor_mib", (leanseq::cpu_tensor_peak_bytes() - before) / 1048576.0},
          {"parameters", [&] {
             int64_t n = 0;
             for (const auto& p : model->parameters()) n += p.numel();
             return n;
           }()}};
}

}  // namespace

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  leanseq::count_cpu_tensor_memory();
  CLI::App app{"leanseq training speed and activation memory at a fixed batch shape"};
  Settings s;
  std::vector<std::string> specs;
  int64_t rounds = 3, threads = 0;
  std::string device = "cpu";
  app.add_option("--arch", specs, "contenders: preset[:key=value...], comma-separated or repeated; the first is the baseline")
      ->required()
      ->delimiter(',');
  app.add_option("--length", s.length, "source and target tokens per sentence, </s> included")->capture_default_str();
  app.add_option("--batch-size", s.batch_size, "sentences per batch")->capture_default_str();
  app.add_option("--vocab", s.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--steps", s.steps, "measured updates per round")->capture_default_str();
  app.add_option("--rounds", rounds, "repetitions, interleaved over the contenders")->capture_default_str();
  app.add_option("--threads", threads, "threads for CPU tensor work, ATen's and OpenBLAS's (0: their defaults)");
  app.add_option("--device", device, "cpu, cuda or cuda:N")->capture_default_str();
  bool profile = false;
  app.add_flag("--profile", profile,
               "after the rounds, one more pass per contender with each operator's self time (CPU time on the "
               "calling thread; on CUDA the launches, not the kernels)");
  CLI11_PARSE(app, argc, argv);
  return leanseq::bench::run_reporting_errors("leanseq-train-bench", [&] {
    if (rounds < 1 || s.steps < 1 || s.length < 2 || s.batch_size < 1 || s.vocab < 5) {
      throw leanseq::ConfigError("need --rounds, --steps, --batch-size >= 1, --length >= 2, --vocab >= 5");
    }
    leanseq::set_compute_threads(static_cast<int>(threads));
    s.device = leanseq::checkpoint::resolve_device(device, "--device");
    std::vector<Contender> contenders;
    for (const auto& spec : specs) contenders.push_back(parse_contender(spec));
    std::vector<nlohmann::json> runs(contenders.size(), nlohmann::json::array());
    for (int64_t r = 0; r < rounds; ++r) {
      for (size_t i = 0; i < contenders.size(); ++i) {
        std::cerr << "leanseq-train-bench: round " << r + 1 << ": " << contenders[i].name << "\n";
        runs[i].push_back(train(contenders[i], s));
      }
    }
    nlohmann::json out{{"threads", torch::get_num_threads()}, {"rounds", rounds},     {"steps", s.steps},
                       {"length", s.length},                  {"batch_size", s.batch_size}, {"vocab", s.vocab}, {"device", s.device.str()},
                       {"contenders", nlohmann::json::array()}};
    double first_tps = 0, first_mem = 0;
    std::vector<nlohmann::json> profiles(contenders.size());
    for (size_t i = 0; profile && i < contenders.size(); ++i) {
      std::cerr << "leanseq-train-bench: profiling " << contenders[i].name << "\n";
      profiles[i] = train(contenders[i], s, true);
    }
    for (size_t i = 0; i < contenders.size(); ++i) {
      std::vector<double> tps, mem;
      for (const auto& r : runs[i]) {
        tps.push_back(r["target_tokens_per_second"].get<double>());
        mem.push_back(r["peak_tensor_mib"].get<double>());
      }
      const double t = leanseq::bench::median(tps), m = leanseq::bench::median(mem);
      if (i == 0) first_tps = t, first_mem = m;
      out["contenders"].push_back({{"name", contenders[i].name},
                                   {"parameters", runs[i][0]["parameters"]},
                                   {"median_target_tokens_per_second", t},
                                   {"median_peak_tensor_mib", m},
                                   {"speed_ratio_to_first", t / first_tps},
                                   {"memory_ratio_to_first", m / first_mem},
                                   {"runs", runs[i]}});
      if (profile) {
        // The products alone against the rounds' median update: how close the update comes to them.
        auto& ops = out["contenders"].back()["operators"];
        ops = profiles[i];
        const double update_ms = 1e3 * static_cast<double>(s.batch_size * s.length) / t;
        ops["fraction_of_products_limit"] = ops["products_alone_ms_per_update"].get<double>() / update_ms;
      }
    }
    std::cout << out.dump() << std::endl;
  });
}
