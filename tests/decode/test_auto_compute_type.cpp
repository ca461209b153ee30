// `--compute-type auto` against a measurement on the CPU the suite runs on.
#include <gtest/gtest.h>

#include <time.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "leanseq/core/threads.h"
#include "leanseq/decode/beam_search.h"
#include "leanseq/kernels/compute_type.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/transformer.h"
#include "leanseq/nn/packed_weight.h"

using namespace leanseq;
using kernels::ComputeType;

// `auto` against a measurement on the CPU the suite runs on: a transformer of real ones' width
// (512, 2048 in the feed-forward layers, 8 heads; 2+2 layers, a 4000-word vocabulary, random
// weights) decodes 16 sentences with beam 4 for 12 steps in each type this CPU runs; auto's pick
// takes at most 1.25x the fastest type's time (medians of 3 alternated rounds, measured once more
// before failing). One compute thread, timed by its own CPU clock, so that the other tests ctest
// runs beside it do not count.
TEST(ComputeTypes, AutoPicksTheFastestTypeMeasuredOnThisCpu) {
  using kernels::ComputeTypeRequest;
  auto runs = [](ComputeTypeRequest r, ComputeType t) { return kernels::resolve_compute_type(r, false).type == t; };
  std::vector<ComputeType> types{ComputeType::float32};
  if (runs(ComputeTypeRequest::int8, ComputeType::int8)) types.push_back(ComputeType::int8);
  if (runs(ComputeTypeRequest::bfloat16, ComputeType::bfloat16)) types.push_back(ComputeType::bfloat16);
  if (types.size() == 1) GTEST_SKIP() << "float32 is the only type this CPU runs";
  const auto pick = kernels::resolve_compute_type(ComputeTypeRequest::auto_, false).type;
  torch::manual_seed(5);
  auto cfg = models::registry().preset_config("transformer");
  auto& c = static_cast<models::TransformerConfig&>(*cfg);
  c.encoder.layers = c.decoder.layers = 2, c.dropout = 0;
  auto model = models::build_model(*cfg, {4000, 4000, true});
  model->eval();
  const int64_t sentences = 16, length = 20;
  auto src = torch::randint(4, 4000, {sentences, length});
  src.select(1, length - 1).fill_(2);
  decode::SearchOptions opt;
  opt.beam = 4, opt.max_len_a = 0, opt.max_len_b = opt.min_len = 12;  // every hypothesis runs 12 steps
  const int threads = compute_threads();
  set_compute_threads(1);
  auto cpu_seconds = [] {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  };
  auto seconds = [&](ComputeType t) {
    nn::set_compute_type(*model, t);
    c10::InferenceMode guard;
    const double start = cpu_seconds();
    decode::ModelStepDecoder decoder(*model, src, torch::full({sentences}, length, torch::kLong), opt.beam);
    decode::beam_search(decoder, sentences, length, 1024, 4000, opt);
    return cpu_seconds() - start;
  };
  std::string report;
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::map<ComputeType, std::vector<double>> times;
    for (int round = 0; round < 3; ++round) {
      for (size_t k = 0; k < types.size(); ++k) {
        const auto t = types[(k + static_cast<size_t>(round)) % types.size()];  // each first once
        times[t].push_back(seconds(t));
      }
    }
    std::map<ComputeType, double> median;
    double fastest = 1e300;
    report = "auto picks " + kernels::compute_type_name(pick) + ";";
    for (auto& [t, v] : times) {
      std::sort(v.begin(), v.end());
      median[t] = v[1];
      fastest = std::min(fastest, v[1]);
      report += " " + kernels::compute_type_name(t) + " " + std::to_string(v[1]) + " s";
    }
    std::cout << report << "\n";
    if (median.at(pick) <= 1.25 * fastest) break;
    if (attempt == 1) ADD_FAILURE() << report;
  }
  nn::set_compute_type(*model, ComputeType::float32);
  set_compute_threads(threads);
}
