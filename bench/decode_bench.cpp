// Decoding speed at a fixed output length: untrained presets (the cost of a decoding step does not
// depend on what the weights learnt), random sources, beam search forced to emit exactly
// --length tokens before </s>. The contenders run side by side in one process, interleaved over
// rounds; prints one JSON object with every run, the medians and the ratios to the first
// contender (see bench/README.md). Needs only the model stack, so it also builds with
// -DLEANSEQ_MODELS_ONLY=ON on accelerator machines.
#include <ATen/record_function.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>

#include "leanseq/core/error.h"
#include "leanseq/core/startup.h"
#include "leanseq/core/threads.h"
#include "leanseq/decode/beam_search.h"
#include "leanseq/kernels/product_flops.h"
#include "leanseq/models/registry.h"
#include "leanseq/nn/packed_weight.h"
#include "contender.h"
#include "errors.h"
#include "median.h"
#include "operator_time.h"
#include "products_alone.h"

namespace {

struct Settings {
  int64_t length = 30, source_length = 30, sentences = 128, batch_size = 64, beam = 5, vocab = 10000, threads = 0;
  std::string device = "cpu";
};

// Counts the ATen operators that the decoder calls directly, not those that operators call
// inside, while it lives. On an accelerator, a decoding step at these sizes is bound by how many
// operators the host dispatches, so the count explains GPU ratios that the CPU's arithmetic does
// not. It counts the CPU code path.
class OperatorCount {
 public:
  OperatorCount()
      : handle_(at::addGlobalCallback(at::RecordFunctionCallback(&OperatorCount::enter, &OperatorCount::leave)
                                          .scopes({at::RecordScope::FUNCTION}))) {
    calls_ = 0;
    std::lock_guard<std::mutex> lock(mutex_);
    names_.clear();
  }
  ~OperatorCount() { at::removeCallback(handle_); }
  OperatorCount(const OperatorCount&) = delete;
  OperatorCount& operator=(const OperatorCount&) = delete;
  int64_t calls() const { return calls_; }
  // Calls per operator name, most frequent first.
  std::vector<std::pair<std::string, int64_t>> by_name() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::pair<std::string, int64_t>> v(names_.begin(), names_.end());
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    return v;
  }

 private:
  static std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction& fn) {
    if (depth_++ == 0) {
      ++calls_;
      std::lock_guard<std::mutex> lock(mutex_);
      ++names_[fn.name()];
    }
    return nullptr;
  }
  static void leave(const at::RecordFunction&, at::ObserverContext*) { --depth_; }
  static inline std::atomic<int64_t> calls_{0};
  static inline std::mutex mutex_;
  static inline std::map<std::string, int64_t> names_;
  static inline thread_local int depth_ = 0;
  at::CallbackHandle handle_;
};

// Whether an operator of the count launches a kernel on a GPU: views and metadata operators do
// not (nor `to` to the dtype and device a tensor has, `empty`, or `item`, a read-back).
bool launches_kernel(const std::string& name) {
  static const std::set<std::string> no_kernel{
      "aten::alias",  "aten::as_strided", "aten::chunk",   "aten::contiguous", "aten::detach", "aten::empty",
      "aten::empty_like", "aten::expand", "aten::expand_as", "aten::item",   "aten::narrow", "aten::permute",
      "aten::reshape", "aten::select",    "aten::slice",   "aten::split",      "aten::squeeze", "aten::t",
      "aten::to",      "aten::transpose", "aten::unbind",  "aten::unsqueeze",  "aten::view",   "aten::view_as"};
  return no_kernel.count(name) == 0;
}

// Whether an operator of the count (called by the decoder itself) is a matrix product. On a GPU
// each is a cuBLAS call, whose host-side cost is several times that of an elementwise kernel's launch.
bool counted_matrix_product(const std::string& name) {
  return name == "aten::linear" || name == "aten::matmul" || leanseq::bench::matrix_product(name);
}

enum class Pass { timed, count_ops, profile, products };

// Decodes s.sentences and times it; or counts the operators of the decoding, or charges each
// operator its self time (operator_time.h), per decoding step of a batch; or (products) the time
// its weight products take alone, per sentence (products_alone.h).
nlohmann::json decode(const leanseq::bench::Contender& c, const Settings& s, Pass pass = Pass::timed) {
  torch::manual_seed(1);
  leanseq::bench::ContenderThreads threads(c);
  auto model = leanseq::models::build_model(*leanseq::bench::contender_config(c), {s.vocab, s.vocab, true});
  const torch::Device device(s.device);
  model->to(device);
  model->eval();
  const auto type =
      leanseq::kernels::resolve_compute_type(leanseq::kernels::parse_compute_type(c.compute_type), device.is_cuda());
  if (!type.notice.empty()) std::cerr << "leanseq-decode-bench: " << c.name << ": " << type.notice << "\n";
  leanseq::nn::set_compute_type(*model, type.type);
  auto src = torch::randint(4, s.vocab, {s.sentences, s.source_length}, torch::kLong);
  src.select(1, s.source_length - 1).fill_(2);  // </s>
  leanseq::decode::SearchOptions opt;
  opt.beam = s.beam;
  opt.max_len_a = 0;
  opt.max_len_b = opt.min_len = s.length;
  auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize();
  };
  // shortlist=N: the special tokens and N - 4 others, drawn once, as a batch's shortlist.
  torch::Tensor output_ids;
  if (c.shortlist > 0) {
    const int64_t n = std::min(c.shortlist, s.vocab);
    output_ids = torch::cat({torch::arange(4), torch::randperm(s.vocab - 4).narrow(0, 0, n - 4) + 4});
    output_ids = std::get<0>(output_ids.sort()).to(device);
  }
  int64_t tokens = 0;
  std::optional<OperatorCount> count;
  if (pass == Pass::count_ops) count.emplace();
  std::optional<leanseq::bench::OperatorTime> times;
  if (pass == Pass::profile) times.emplace();
  std::optional<leanseq::kernels::ProductShapes> shapes;
  if (pass == Pass::products) shapes.emplace();
  sync();
  const uint64_t flops_before = leanseq::kernels::product_flops();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < s.sentences; i += s.batch_size) {
    const int64_t n = std::min(s.batch_size, s.sentences - i);
    auto out = leanseq::decode::generate({model.get()}, src.narrow(0, i, n).to(device),
                                         torch::full({n}, s.source_length, torch::kLong).to(device), s.vocab, opt,
                                         nullptr, nullptr, output_ids);
    for (const auto& hyps : out) tokens += static_cast<int64_t>(hyps.at(0).tokens.size());
  }
  sync();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (shapes) {
    return {{"products_alone_seconds_per_sentence",
             leanseq::bench::products_alone_seconds(shapes->counts()) / static_cast<double>(s.sentences)}};
  }
  if (count) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& [name, n] : count->by_name()) names.push_back({name, n});
    return {{"operators", count->calls()}, {"by_name", names}};
  }
  if (times) {
    const int64_t batches = (s.sentences + s.batch_size - 1) / s.batch_size;
    return leanseq::bench::operator_profile(times->by_name(), seconds,
                                            static_cast<double>(batches * (s.length + 1)), "step");
  }
  return {{"sentences", s.sentences},
          {"target_tokens", tokens},
          {"seconds", seconds},
          {"sentences_per_second", s.sentences / seconds},
          {"target_tokens_per_second", tokens / seconds},
          {"product_gflop_per_sentence",
           static_cast<double>(leanseq::kernels::product_flops() - flops_before) / 1e9 / s.sentences}};
}

}  // namespace

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  CLI::App app{"leanseq decoding speed at a fixed output length"};
  Settings s;
  std::vector<std::string> archs;
  int64_t rounds = 3, warmup = 1;
  bool count_ops = false, profile = false;
  app.add_option("--arch", archs,
                 "contenders, preset[:key=value...][:threads=N] (comma-separated or repeated); the first is the "
                 "baseline")
      ->delimiter(',')
      ->required();
  app.add_option("--length", s.length, "target tokens per sentence (</s> comes after them)")->capture_default_str();
  app.add_option("--source-length", s.source_length, "source tokens per sentence, </s> included")
      ->capture_default_str();
  app.add_option("--sentences", s.sentences, "sentences per round")->capture_default_str();
  app.add_option("--batch-size", s.batch_size, "sentences per beam search")->capture_default_str();
  app.add_option("--beam", s.beam, "beam size")->capture_default_str();
  app.add_option("--vocab", s.vocab, "vocabulary size")->capture_default_str();
  app.add_option("--device", s.device, "cpu or cuda")->capture_default_str();
  app.add_option("--threads", s.threads, "threads for CPU tensor work, ATen's and OpenBLAS's (0: their defaults)");
  app.add_option("--rounds", rounds, "measured repetitions, interleaved over the contenders")->capture_default_str();
  app.add_option("--warmup", warmup, "unmeasured rounds first")->capture_default_str();
  app.add_flag("--count-ops", count_ops,
               "also count the ATen operators each contender's decoding calls, over one batch on the CPU, "
               "untimed (operators_per_step: per target position of a batch; operators_per_step_by_name: the same by operator; "
               "launching_operators_per_step: those that launch a kernel on a GPU; matrix_products_per_step: the "
               "matrix products among them)");
  app.add_flag("--profile", profile,
               "after the rounds, one more pass per contender with each operator's self time per decoding step "
               "of a batch (operators.by_self_time; CPU time on the calling thread, on CUDA the launches, not the "
               "kernels)");
  CLI11_PARSE(app, argc, argv);
  return leanseq::bench::run_reporting_errors("leanseq-decode-bench", [&] {
    if (rounds < 1 || warmup < 0) throw leanseq::ConfigError("--rounds must be at least 1 and --warmup at least 0");
    if (s.length < 1 || s.source_length < 2 || s.sentences < 1 || s.batch_size < 1 || s.beam < 1 || s.vocab < 5) {
      throw leanseq::ConfigError("need --length >= 1, --source-length >= 2, --vocab >= 5, positive sizes");
    }
    if (s.device != "cpu" && s.device != "cuda") throw leanseq::ConfigError("--device must be cpu or cuda");
    if (s.device == "cuda" && !torch::cuda::is_available()) throw leanseq::ConfigError("--device cuda: no GPU");
    leanseq::set_compute_threads(static_cast<int>(s.threads));
    std::vector<leanseq::bench::Contender> contenders;
    for (const auto& a : archs) contenders.push_back(leanseq::bench::parse_contender(a));
    torch::NoGradGuard no_grad;
    std::vector<nlohmann::json> runs(archs.size(), nlohmann::json::array());
    for (int64_t r = 0; r < warmup + rounds; ++r) {
      for (size_t i = 0; i < archs.size(); ++i) {
        std::cerr << "leanseq-decode-bench: " << (r < warmup ? "warm-up" : "round " + std::to_string(r - warmup + 1))
                  << ": " << archs[i] << "\n";
        auto run = decode(contenders[i], s);
        if (r >= warmup) runs[i].push_back(run);
      }
    }
    nlohmann::json out{{"device", s.device}, {"threads", torch::get_num_threads()}, {"rounds", rounds},
                       {"length", s.length},  {"source_length", s.source_length},    {"sentences", s.sentences},
                       {"batch_size", s.batch_size}, {"beam", s.beam}, {"vocab", s.vocab},
                       {"contenders", nlohmann::json::array()}};
    double first = 0;
    for (size_t i = 0; i < archs.size(); ++i) {
      std::vector<double> sps;
      for (const auto& r : runs[i]) sps.push_back(r["sentences_per_second"].get<double>());
      const double med = leanseq::bench::median(sps);
      if (i == 0) first = med;
      nlohmann::json entry{{"name", archs[i]},
                           {"median_sentences_per_second", med},
                           {"median_target_tokens_per_second", med * (s.length + 1)},
                           {"ratio_to_first", med / first},
                           {"runs", runs[i]}};
      if (count_ops) {
        Settings one = s;
        one.sentences = std::min(s.batch_size, s.sentences);
        one.device = "cpu";
        const auto counted = decode(contenders[i], one, Pass::count_ops);
        const double steps = static_cast<double>(s.length + 1);
        entry["operators_per_step"] = counted["operators"].get<int64_t>() / steps;
        nlohmann::json per_step = nlohmann::json::object();
        double launching = 0, products = 0;
        for (const auto& named : counted["by_name"]) {
          const auto name = named[0].get<std::string>();
          const double n = named[1].get<int64_t>() / steps;
          per_step[name] = n;
          if (launches_kernel(name)) launching += n;
          if (counted_matrix_product(name)) products += n;
        }
        entry["operators_per_step_by_name"] = per_step;
        entry["launching_operators_per_step"] = launching;
        entry["matrix_products_per_step"] = products;
      }
      if (s.device == "cpu") {
        // The weight products alone against the rounds' median: the fraction of the products' limit
        // the decoding runs at (the rest of a step is not products).
        const double alone = decode(contenders[i], s, Pass::products)["products_alone_seconds_per_sentence"];
        entry["products_alone_ms_per_sentence"] = 1e3 * alone;
        entry["fraction_of_products_limit"] = alone * med;
      }
      if (profile) {
        std::cerr << "leanseq-decode-bench: profiling " << archs[i] << "\n";
        entry["operators"] = decode(contenders[i], s, Pass::profile);
      }
      out["contenders"].push_back(entry);
    }
    std::cout << out.dump() << std::endl;
  });
}
