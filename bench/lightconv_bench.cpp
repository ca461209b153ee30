// Benchmarks of the lightweight/dynamic convolution; prints one JSON object (bench/README.md):
//  - "training": forward+backward of each implementation (unfold reference, band, dedicated
//    kernel) at training shapes (about 4000 tokens, C = 512, H in {4, 8, 16}, K in {3, 7, 15, 31}),
//    as medians and as ratios against the unfold reference measured in the same run;
//  - "decoding": one incremental step (a new position per row, the K - 1 cached inputs) at beam
//    search shapes;
//  - "length_scaling": a forward pass of a dynamic convolution (kernel predicted from the input,
//    K = 31) against self-attention (the Transformer's, same C and heads) as T grows.
#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "leanseq/core/startup.h"
#include "leanseq/kernels/lightconv.h"
#include "leanseq/kernels/lightconv_ref.h"
#include "leanseq/nn/attention.h"
#include "leanseq/nn/incremental_state.h"
#include "leanseq/nn/lightconv.h"

namespace {

using Clock = std::chrono::steady_clock;
using leanseq::kernels::LightconvImpl;

// Median wall time of fn() in milliseconds over `repeats` runs after one warm-up run.
template <class F>
double median_ms(int repeats, F&& fn) {
  fn();
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    auto t0 = Clock::now();
    fn();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

nlohmann::json training_shapes(int repeats, int64_t B, int64_t T, int64_t C) {
  nlohmann::json rows = nlohmann::json::array();
  for (bool dynamic : {false, true}) {
    for (int64_t H : {4, 8, 16}) {
      for (int64_t K : {3, 7, 15, 31}) {
        auto x = torch::randn({B, T, C}).requires_grad_(true);
        auto raw = dynamic ? torch::randn({B, H, T, K}) : torch::randn({H, K});
        auto w = torch::softmax(raw, -1).requires_grad_(true);
        auto g = torch::randn({B, T, C});
        nlohmann::json row = {{"conv", dynamic ? "dynamic" : "lightweight"}, {"B", B}, {"T", T}, {"C", C}, {"H", H}, {"K", K}};
        for (auto impl : {LightconvImpl::kUnfold, LightconvImpl::kBand, LightconvImpl::kKernel}) {
          row[std::string(leanseq::kernels::lightconv_impl_name(impl)) + "_ms"] = median_ms(repeats, [&] {
            auto y = leanseq::kernels::lightconv(x, w, (K - 1) / 2, impl);
            y.backward(g);
            x.mutable_grad().reset();
            w.mutable_grad().reset();
          });
        }
        const double ref = row["unfold_ms"].get<double>();
        row["band_speedup"] = ref / row["band_ms"].get<double>();
        row["kernel_speedup"] = ref / row["kernel_ms"].get<double>();
        rows.push_back(row);
      }
    }
  }
  return rows;
}

nlohmann::json decoding_shapes(int repeats, int64_t rows_per_step, int64_t C) {
  nlohmann::json out = nlohmann::json::array();
  torch::NoGradGuard no_grad;
  for (bool dynamic : {false, true}) {
    for (int64_t K : {3, 7, 15, 31}) {
      leanseq::nn::LightConvOptions o;
      o.channels = C, o.kernel_size = K, o.padding_l = K - 1, o.heads = 8, o.dynamic = dynamic;
      leanseq::nn::LightConv1d conv(o);
      conv->eval();
      leanseq::nn::ConvWindowCache cache;
      cache.window = torch::randn({rows_per_step, K - 1, C});
      auto x = torch::randn({rows_per_step, 1, C});
      const double ms = median_ms(repeats * 10, [&] { conv->step(x, cache); });
      out.push_back({{"conv", dynamic ? "dynamic" : "lightweight"}, {"rows", rows_per_step}, {"C", C}, {"H", 8}, {"K", K},
                     {"step_ms", ms}, {"rows_per_second", rows_per_step / (ms / 1000.0)}});
    }
  }
  return out;
}

nlohmann::json length_scaling(int repeats, int64_t C, int64_t heads, int64_t max_T) {
  nlohmann::json out = nlohmann::json::array();
  torch::NoGradGuard no_grad;
  leanseq::nn::LightConvOptions o;
  o.channels = C, o.kernel_size = 31, o.padding_l = 15, o.heads = heads, o.dynamic = true;
  leanseq::nn::LightConv1d conv(o);
  leanseq::nn::MultiheadAttention attn(C, heads, 0.0);
  conv->eval();
  attn->eval();
  for (int64_t T = 64; T <= max_T; T *= 2) {
    auto x = torch::randn({1, T, C});
    const double conv_ms = median_ms(repeats, [&] { conv(x); });
    const double attn_ms = median_ms(repeats, [&] { attn(x, x, torch::Tensor(), false, false); });
    out.push_back({{"T", T}, {"dynamic_conv_ms", conv_ms}, {"self_attention_ms", attn_ms},
                   {"dynamic_conv_us_per_token", 1000.0 * conv_ms / T}, {"self_attention_us_per_token", 1000.0 * attn_ms / T}});
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  CLI::App app{"leanseq lightweight/dynamic convolution benchmarks (prints JSON)"};
  int repeats = 5;
  int64_t batch = 50, length = 80, channels = 512, decode_rows = 320, max_T = 4096;
  std::vector<std::string> sections{"training", "decoding", "length_scaling"};
  app.add_option("--repeats", repeats, "timed runs per measurement (the median is reported)")->capture_default_str();
  app.add_option("--batch", batch, "training shape: sentences")->capture_default_str();
  app.add_option("--length", length, "training shape: tokens per sentence")->capture_default_str();
  app.add_option("--channels", channels, "channels C")->capture_default_str();
  app.add_option("--decode-rows", decode_rows, "decoding shape: rows per step (sentences x beam)")->capture_default_str();
  app.add_option("--max-length", max_T, "length scaling: longest T")->capture_default_str();
  app.add_option("--sections", sections, "which sections to run")->delimiter(',')->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  nlohmann::json out;
  out["threads"] = static_cast<int64_t>(std::thread::hardware_concurrency());
  out["repeats"] = repeats;
  for (const auto& s : sections) {
    if (s == "training") {
      out["training"] = training_shapes(repeats, batch, length, channels);
    } else if (s == "decoding") {
      out["decoding"] = decoding_shapes(repeats, decode_rows, channels);
    } else if (s == "length_scaling") {
      out["length_scaling"] = length_scaling(repeats, channels, 8, max_T);
    } else {
      std::cerr << "leanseq-lightconv-bench: unknown section '" << s << "' (training, decoding, length_scaling)\n";
      return 2;
    }
  }
  std::cout << out.dump(2) << "\n";
  return 0;
}
