// Float32 matrix products as the models run them (torch::mm, a linear layer's shapes), in GF/s per
// shape and per OpenBLAS kernel family, next to the core's peak. Each family runs in a child
// process of this program started with OPENBLAS_CORETYPE set to it ("as started": the environment
// this program was given, after start_program's choice), since OpenBLAS picks its kernels when it
// is loaded. Families the CPU cannot run are left out. Prints one JSON object (bench/README.md).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "errors.h"
#include "leanseq/core/blas.h"
#include "leanseq/core/startup.h"
#include "leanseq/core/threads.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/kernels/packed_products.h"
#include "median.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Shape {
  int64_t m, k, n;  // [m, k] x [k, n]
};

// Rows of a training batch (about 320 sentences x 1 position, or 4000 tokens) against the
// Transformer's projections (512 -> 512, 512 -> 2048, 2048 -> 512, 512 -> 8000), and a square one.
const std::vector<Shape> kShapes = {{320, 512, 2048}, {4096, 512, 512}, {4096, 512, 2048}, {4096, 2048, 512},
                                    {320, 512, 8000}, {1024, 1024, 1024}};

// GF/s (or GOP/s) of `op`, the median of `rounds` timed runs of enough calls for about 0.2 s each.
template <class Op>
double rate(double flops, int rounds, Op&& op) {
  op();
  auto t0 = Clock::now();
  op();
  const double once = std::chrono::duration<double>(Clock::now() - t0).count();
  const int reps = std::max(1, static_cast<int>(0.2 / std::max(once, 1e-6)));
  std::vector<double> gflops;
  for (int r = 0; r < rounds; ++r) {
    t0 = Clock::now();
    for (int i = 0; i < reps; ++i) op();
    gflops.push_back(flops * reps / std::chrono::duration<double>(Clock::now() - t0).count() / 1e9);
  }
  return leanseq::bench::median(gflops);
}

// Each shape's float32 product through LibTorch (OpenBLAS); with `low_precision`, also a linear
// layer's product in int8 (kernels/int8_gemm.h: activations quantized per row, u8 or s8, the
// oneDNN product and the scaling back; GOP/s; on AMX also u8 through the GEMM API) and in bfloat16 (ATen, oneDNN on the CPU).
nlohmann::json measure(int rounds, bool low_precision) {
  using namespace leanseq::kernels;
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& s : kShapes) {
    auto a = torch::randn({s.m, s.k}), b = torch::randn({s.k, s.n});
    auto out = torch::mm(a, b);
    const double flops = 2.0 * s.m * s.k * s.n;
    nlohmann::json row{{"m", s.m}, {"k", s.k}, {"n", s.n}};
    row["gflops"] = rate(flops, rounds, [&] { torch::mm_out(out, a, b); });
    if (low_precision) {
      auto w = b.t().contiguous();
      auto q = quantize_weight(w);
      for (auto [name, act] : {std::pair{"int8_u8_gops", Int8Activations::u8_shifted}, {"int8_s8_gops", Int8Activations::s8},
                               {"int8_split_gops", Int8Activations::u8_split}}) {
        row[name] = rate(flops, rounds, [&, act = act] { int8_linear(a, q, torch::Tensor(), act); });
      }
      if (packed_int8_in_use() && default_int8_activations() == Int8Activations::u8_shifted) {
        // int8_u8_gops ran on the packed weight: the GEMM API's rate beside it
        use_packed_int8(false);
        row["int8_u8_gemm_api_gops"] = rate(flops, rounds, [&] { int8_linear(a, q, torch::Tensor()); });
        use_packed_int8(true);
      }
      auto a16 = a.to(torch::kBFloat16), w16 = w.to(torch::kBFloat16);
      row["bf16_gflops"] = rate(flops, rounds, [&] { torch::linear(a16, w16); });
    }
    rows.push_back(row);
  }
  return rows;
}

// A linear layer's inference product at the row counts of decoding steps (beam x sentences) and of
// small encoder batches, through ATen (OpenBLAS), through oneDNN's sgemm (kernels/dense.h) and
// through oneDNN's primitive on the packed weight (kernels/packed_products.h), alternated within each
// round: GF/s of each and their ratios, per shape.
nlohmann::json measure_few_rows(int rounds) {
  torch::NoGradGuard no_grad;
  const bool packed_before = leanseq::kernels::packed_weights();
  const std::vector<std::pair<int64_t, int64_t>> layers = {{512, 512}, {512, 2048}, {2048, 512}, {512, 8000}};
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [k, n] : layers) {
    auto w = torch::randn({n, k}), bias = torch::randn({n});
    for (int64_t m : {1, 5, 20, 40, 80, 160, 320, 640, 1280}) {
      auto x = torch::randn({m, k});
      const double flops = 2.0 * m * k * n;
      std::vector<double> aten, onednn, packed;
      for (int r = 0; r < rounds; ++r) {
        aten.push_back(rate(flops, 1, [&] { torch::linear(x, w, bias); }));
        leanseq::kernels::set_packed_weights(false);
        onednn.push_back(rate(flops, 1, [&] { leanseq::kernels::onednn_linear(x, w, bias); }));
        leanseq::kernels::set_packed_weights(true);
        packed.push_back(rate(flops, 1, [&] { leanseq::kernels::onednn_linear(x, w, bias); }));
      }
      leanseq::kernels::set_packed_weights(packed_before);
      const double a = leanseq::bench::median(aten), o = leanseq::bench::median(onednn),
                   p = leanseq::bench::median(packed);
      rows.push_back({{"m", m}, {"k", k}, {"n", n}, {"aten_gflops", a}, {"onednn_gflops", o}, {"onednn_to_aten", o / a},
                      {"packed_gflops", p}, {"packed_to_onednn", p / o}});
    }
  }
  return rows;
}

// What /proc/cpuinfo says of the first core: its nominal clock (GHz, 0 when unknown), vendor,
// family and model (-1 when it has no such line).
struct CpuInfo {
  double ghz = 0;
  std::string vendor;
  int family = -1, model = -1;
};

CpuInfo read_cpuinfo() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  auto value = [](const std::string& line) {
    const auto colon = line.find(':');
    const auto start = colon == std::string::npos ? std::string::npos : line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? std::string() : line.substr(start);
  };
  for (std::string line; std::getline(in, line) && !line.empty();) {
    if (line.rfind("cpu MHz", 0) == 0) info.ghz = std::atof(value(line).c_str()) / 1000;
    else if (line.rfind("vendor_id", 0) == 0) info.vendor = value(line);
    else if (line.rfind("cpu family", 0) == 0) info.family = std::atoi(value(line).c_str());
    else if (line.rfind("model", 0) == 0 && line.rfind("model name", 0) != 0) info.model = std::atoi(value(line).c_str());
  }
  return info;
}

// Floats one FMA pipe multiplies and adds per cycle: the register width, except on the cores whose
// datapaths are narrower than their registers. Zen and Zen+ (family 23, models below 0x30) and
// Hygon's Dhyana (family 24, a Zen) run a 256-bit AVX2 operation as two 128-bit halves; Zen 4
// (family 25) an AVX-512 one as two 256-bit halves. Two such pipes per core on all of them.
int floats_per_fma_pipe(const CpuInfo& info, bool avx512) {
  const bool amd = info.vendor == "AuthenticAMD";
  if (amd && info.family == 23 && info.model >= 0 && info.model < 0x30) return 4;
  if (info.vendor == "HygonGenuine" && info.family == 24) return 4;
  if (amd && info.family == 25 && avx512) return 8;
  return avx512 ? 16 : 8;
}

nlohmann::json run_child(const std::string& self, const std::string& coretype, int rounds, int threads,
                         bool low_precision, bool few_rows) {
  const std::string env =
      coretype.empty() ? "" : "env -u LEANSEQ_SET_OPENBLAS_CORETYPE OPENBLAS_CORETYPE=" + coretype + " ";
  const std::string cmd =
      env + self + " --child --rounds " + std::to_string(rounds) + " --threads " + std::to_string(threads) + (low_precision ? " --low-precision" : "") +
      (few_rows ? " --few-rows" : "");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start " + cmd);
  std::string text;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) text.append(buf, n);
  if (pclose(pipe) != 0) throw std::runtime_error("the measuring child failed: " + cmd);
  return nlohmann::json::parse(text);
}

}  // namespace

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  CLI::App app{"leanseq-gemm-bench: float32 products per OpenBLAS kernel family, in GF/s against the core's peak"};
  int rounds = 5, threads = 1;
  bool child = false, low_precision = false, few_rows = false;
  app.add_option("--rounds", rounds, "timed rounds per shape (median)")->capture_default_str();
  app.add_option("--threads", threads, "compute threads")->capture_default_str();
  app.add_flag("--low-precision", low_precision,
               "also int8 (oneDNN, per-row activation quantization included) and bfloat16 products, as started");
  app.add_flag("--few-rows", few_rows,
               "also, as started, inference products of 1 to 1280 rows through ATen, oneDNN's sgemm and oneDNN's "
               "primitive on packed weights (kernels/dense.h, kernels/packed_products.h)");
  app.add_flag("--child", child, "internal: measure in this process and print its rows");
  CLI11_PARSE(app, argc, argv);
  return leanseq::bench::run_reporting_errors("leanseq-gemm-bench", [&] {
    if (rounds < 1 || threads < 1) throw leanseq::ConfigError("--rounds and --threads must be at least 1");
    leanseq::set_compute_threads(threads);
    if (child) {
      nlohmann::json out{{"blas", leanseq::blas_summary()}, {"shapes", measure(rounds, low_precision)}};
      if (few_rows) out["few_rows"] = measure_few_rows(rounds);
      std::cout << out.dump() << "\n";
      return;
    }
    const auto cpu = leanseq::detect_cpu_vector_support();
    const bool avx512 = cpu.avx512f && cpu.avx512bw && cpu.avx512vl && cpu.avx512dq && cpu.avx512cd;
    const CpuInfo info = read_cpuinfo();
    const int pipe_floats = floats_per_fma_pipe(info, avx512);
    // Two FMA pipes, two operations per float, per cycle.
    const double peak_per_core = info.ghz * 2 * pipe_floats * 2;
    std::vector<std::string> families{"", "PRESCOTT"};
    if (cpu.avx2 && cpu.fma) families.push_back("HASWELL");
    if (avx512) families.push_back("SKYLAKEX");
    nlohmann::json results = nlohmann::json::array();
    for (const auto& f : families) {
      auto r = run_child(argv[0], f, rounds, threads, low_precision && f.empty(), few_rows && f.empty());
      r["coretype"] = f.empty() ? "as started" : f;
      for (auto& row : r["shapes"]) row["of_peak"] = peak_per_core > 0 ? row["gflops"].get<double>() / (peak_per_core * threads) : 0.0;
      results.push_back(r);
    }
    std::cout << nlohmann::json{{"benchmark", "gemm_float32"},
                                {"threads", threads},
                                {"clock_ghz", info.ghz},
                                {"floats_per_fma_pipe", pipe_floats},
                                {"peak_gflops_per_core", peak_per_core},
                                {"families", results}}
                     .dump()
              << "\n";
  });
}
