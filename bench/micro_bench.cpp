// Google Benchmark micro-benchmarks of the hot pieces at transformer_small (and Pervasive Attention)
// shapes.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <limits>
#include <thread>

#include "leanseq/core/startup.h"
#include "leanseq/core/threads.h"
#include "leanseq/kernels/aan_gate.h"
#include "leanseq/kernels/add_layer_norm.h"
#include "leanseq/kernels/batched_matmul.h"
#include "leanseq/kernels/dropout.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/kernels/label_smoothed_ce.h"
#include "leanseq/kernels/one_query_attention.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/nn/incremental_state.h"
#include "leanseq/nn/double_attention.h"
#include "leanseq/nn/functional.h"
#include "leanseq/nn/transformer_layer.h"
#include "leanseq/train/adam.h"
#include "leanseq/train/criterion.h"
#include "leanseq/train/distributed.h"
#include "leanseq/train/launcher.h"

namespace {

// Label-smoothed cross-entropy forward+backward over [tokens, V] logits.
void BM_LabelSmoothedLoss(benchmark::State& state) {
  const int64_t N = state.range(0), V = state.range(1);
  auto logits = torch::randn({N, V}).requires_grad_(true);
  auto target = torch::randint(4, V, {N}, torch::kLong);
  for (auto _ : state) {
    auto lp = torch::log_softmax(logits, -1);
    auto r = leanseq::train::label_smoothed_nll_loss(lp, target, 0.1, 1);
    r.loss.backward();
    benchmark::DoNotOptimize(logits.grad());
    logits.mutable_grad().reset();
  }
  state.SetItemsProcessed(state.iterations() * N);
}
BENCHMARK(BM_LabelSmoothedLoss)->Args({2048, 8000})->Unit(benchmark::kMillisecond);

// Dropout (p = 0.2, training) on a Pervasive Attention grid activation [140, 14, 14, 128]: ATen's
// Bernoulli sampler (range 0) against kernels::dropout (range 1).
void BM_Dropout(benchmark::State& state) {
  auto x = torch::randn({140, 14, 14, 128});
  torch::NoGradGuard g;
  for (auto _ : state) {
    auto y = state.range(0) == 0 ? torch::dropout(x, 0.2, true) : leanseq::kernels::dropout(x, 0.2, true);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * x.numel());
}
BENCHMARK(BM_Dropout)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// The gate of an AAN decoder layer in one decoding step at transformer_iwslt_de_en sizes (64
// sentences x beam 5, C = 512): the composite of ATen operators (range 0) against the fused pass
// of kernels::aan_gate (range 1).
void BM_AanGate(benchmark::State& state) {
  auto z = torch::randn({320, 1, 1024}), x = torch::randn({320, 1, 512}), g = torch::randn({320, 1, 512});
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto y = state.range(0) == 0 ? leanseq::kernels::aan_gate_reference(z, x, g) : leanseq::kernels::aan_gate(z, x, g);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * x.numel());
}
BENCHMARK(BM_AanGate)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The end of a post-norm sublayer in one decoding step at the same sizes: LayerNorm(residual + y)
// as the two ATen operators (range 0) against the fused pass of kernels::add_layer_norm (range 1).
void BM_AddLayerNorm(benchmark::State& state) {
  auto r = torch::randn({320, 1, 512}), y = torch::randn({320, 1, 512});
  auto w = torch::randn({512}), b = torch::randn({512});
  torch::NoGradGuard no_grad;
  for (auto _ : state) {
    auto out = state.range(0) == 0 ? leanseq::kernels::add_layer_norm_reference(r, y, w, b, 1e-5)
                                   : leanseq::kernels::add_layer_norm(r, y, w, b, 1e-5);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * y.numel());
}
BENCHMARK(BM_AddLayerNorm)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// The fused kernel on the same shapes.
void BM_LabelSmoothedLossFused(benchmark::State& state) {
  const int64_t N = state.range(0), V = state.range(1);
  auto logits = torch::randn({N, V}).requires_grad_(true);
  auto target = torch::randint(4, V, {N}, torch::kLong);
  for (auto _ : state) {
    auto r = leanseq::kernels::label_smoothed_cross_entropy(logits, target, 0.1, 1);
    r.loss.backward();
    benchmark::DoNotOptimize(logits.grad());
    logits.mutable_grad().reset();
  }
  state.SetItemsProcessed(state.iterations() * N);
}
BENCHMARK(BM_LabelSmoothedLossFused)->Args({2048, 8000})->Unit(benchmark::kMillisecond);

// One training step (forward + backward) of transformer_small on a [B, T] batch.
void BM_TransformerSmallTrainStep(benchmark::State& state) {
  const int64_t B = state.range(0), T = state.range(1), V = 8000;
  auto model = leanseq::models::build_model(*leanseq::models::registry().preset_config("transformer_small"), {V, V, true});
  model->train();
  auto src = torch::randint(4, V, {B, T}, torch::kLong), prev = torch::randint(4, V, {B, T}, torch::kLong);
  auto lengths = torch::full({B}, T, torch::kLong);
  for (auto _ : state) {
    auto out = model->forward(src, lengths, prev);
    auto lp = torch::log_softmax(out.logits, -1);
    auto r = leanseq::train::label_smoothed_nll_loss(lp.view({-1, V}), prev.view(-1), 0.1, 1);
    r.loss.backward();
    for (auto& p : model->parameters()) p.mutable_grad().reset();
  }
  state.SetItemsProcessed(state.iterations() * B * T);
}
BENCHMARK(BM_TransformerSmallTrainStep)->Args({128, 16})->Unit(benchmark::kMillisecond);

// One Adam update of transformer_small's parameters (vocabulary 8000): range(0) 0 is
// torch::optim::Adam's composite of ATen operators, 1 leanseq's one-pass update (train/adam.h).
void BM_AdamUpdate(benchmark::State& state) {
  auto model = leanseq::models::build_model(*leanseq::models::registry().preset_config("transformer_small"), {8000, 8000, true});
  auto params = model->parameters();
  for (auto& p : params) p.mutable_grad() = torch::randn_like(p) * 1e-3;
  const auto options = torch::optim::AdamOptions(1e-4).betas({0.9, 0.98});
  std::unique_ptr<torch::optim::Optimizer> adam;
  if (state.range(0) == 0) {
    adam = std::make_unique<torch::optim::Adam>(params, options);
  } else {
    adam = std::make_unique<leanseq::train::Adam>(params, options);
  }
  adam->step();  // the state's allocation
  for (auto _ : state) adam->step();
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_AdamUpdate)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

// Forward + backward of one block at transformer_small's width on [B, T, 256]: range(2) picks an
// A2 block (0: whole sequence, 1: causal; m = n = 64) or a Transformer encoder layer (2), to put
// the A2 block's cost beside that of the layer it follows.
void BM_A2BlockVsEncoderLayer(benchmark::State& state) {
  const int64_t B = state.range(0), T = state.range(1), kind = state.range(2), C = 256;
  torch::manual_seed(1);
  leanseq::nn::TransformerLayerOptions o;
  o.embed_dim = C, o.ffn_dim = 1024, o.heads = 4, o.dropout = 0.2;
  leanseq::nn::TransformerEncoderLayer layer(o);
  leanseq::nn::DoubleAttention a2(C, 64, 64, kind == 1, 0.2);
  auto x = torch::randn({B, T, C}).requires_grad_(true);
  for (auto _ : state) {
    leanseq::nn::SharedAttention shared;
    auto y = kind == 2 ? layer->forward(x, {}, shared) : a2->forward(x);
    y.sum().backward();
    x.mutable_grad().reset();
  }
  state.SetItemsProcessed(state.iterations() * B * T);
}
BENCHMARK(BM_A2BlockVsEncoderLayer)
    ->Args({64, 30, 0})
    ->Args({64, 30, 1})
    ->Args({64, 30, 2})
    ->Unit(benchmark::kMillisecond);

// One incremental decoder step for B rows with a prefix of 10 tokens.
void BM_TransformerSmallDecodeStep(benchmark::State& state) {
  const int64_t B = state.range(0), S = 16, V = 8000;
  torch::NoGradGuard g;
  auto model = leanseq::models::build_model(*leanseq::models::registry().preset_config("transformer_small"), {V, V, true});
  model->eval();
  auto src = torch::randint(4, V, {B, S}, torch::kLong);
  auto enc = model->encode(src, torch::full({B}, S, torch::kLong));
  for (auto _ : state) {
    state.PauseTiming();
    auto st = model->init_state(enc);
    model->step(torch::randint(4, V, {B, 10}, torch::kLong), enc, st);
    state.ResumeTiming();
    benchmark::DoNotOptimize(model->step(torch::randint(4, V, {B, 1}, torch::kLong), enc, st).logits);
  }
  state.SetItemsProcessed(state.iterations() * B);
}
BENCHMARK(BM_TransformerSmallDecodeStep)->Arg(320)->Unit(benchmark::kMillisecond);

// The two products of an encoder's (or a full pass's) attention at inference for 64 sentences of
// T positions (transformer_small's 4 heads of 64): range(0) 0 through the fixed-order one-query
// kernels that inference takes (nn/functional.h), 1 through batched_matmul, training's path.
void BM_InferenceAttention(benchmark::State& state) {
  const int64_t B = 64, H = 4, T = state.range(1), d = 64;
  torch::NoGradGuard g;
  auto q = torch::randn({B, H, T, d}), k = torch::randn({B, H, T, d}), v = torch::randn({B, H, T, d});
  const bool fixed_order = state.range(0) == 0;
  for (auto _ : state) {
    auto scores = fixed_order ? leanseq::nn::attention_scores(q, k)
                              : leanseq::kernels::batched_matmul(q, k.transpose(-1, -2));
    auto p = torch::softmax(scores, -1);
    benchmark::DoNotOptimize(fixed_order ? leanseq::nn::attention_context(p, v)
                                         : leanseq::kernels::batched_matmul(p, v));
  }
  state.SetItemsProcessed(state.iterations() * B * T);
}
BENCHMARK(BM_InferenceAttention)
    ->Args({0, 16})->Args({1, 16})->Args({0, 32})->Args({1, 32})->Args({0, 100})->Args({1, 100})
    ->Unit(benchmark::kMicrosecond);

// One int8 product of a decoding step at range(0) rows (a sentence's beam of 5, or a batch's
// 320) by a K x N weight (transformer_small's: 256 x 768 its self-attention's three projections,
// 1024 x 256 a second feed-forward product, 256 x 8000 an output layer), on one thread: at a few
// rows the time outside the product itself (quantizing, the primitive's call, scaling back) shows.
void BM_Int8Linear(benchmark::State& state) {
  const int threads = leanseq::compute_threads();
  leanseq::set_compute_threads(1);
  const int64_t M = state.range(0), K = state.range(1), N = state.range(2);
  torch::NoGradGuard g;
  const auto w = leanseq::kernels::quantize_weight(torch::randn({N, K}) * 0.05);
  const auto bias = torch::randn({N}), x = torch::randn({M, K});
  for (auto _ : state) benchmark::DoNotOptimize(leanseq::kernels::int8_linear(x, w, bias).data_ptr());
  state.SetItemsProcessed(state.iterations() * M * N * K);
  leanseq::set_compute_threads(threads);
}
BENCHMARK(BM_Int8Linear)
    ->Args({5, 256, 768})->Args({5, 1024, 256})->Args({5, 256, 8000})->Args({320, 256, 768})->Args({320, 256, 8000})
    ->Unit(benchmark::kMicrosecond);

// One layer's attention at a decoding step of batch 64, beam 5 (320 rows, transformer_small's 4
// heads of 64), on one thread: range(0) 0 the self-attention over range(1) cached positions, read
// through a reorder's table of stored rows; 1 the encoder-decoder attention over range(1) source
// positions, each sentence's keys shared by its 5 beams and a padding mask; range(2) 0 keys and
// values in float32, 1 in bfloat16 (an int8 model's). Items are (row, head) pairs: at a few keys
// each, the time per pair outside the sums shows.
void BM_OneQueryAttention(benchmark::State& state) {
  const int threads = leanseq::compute_threads();
  leanseq::set_compute_threads(1);
  const int64_t B = 320, H = 4, S = state.range(1), d = 64;
  const bool self = state.range(0) == 0;
  torch::NoGradGuard g;
  const auto q = torch::randn({B, 1, H * d}).view({B, 1, H, d}).transpose(1, 2);
  const int64_t P = self ? B : B / 5;
  const auto type = state.range(2) ? torch::kBFloat16 : torch::kFloat;
  const auto k = torch::randn({P, H, S, d}).to(type), v = torch::randn({P, H, S, d}).to(type);
  torch::Tensor origin, mask;
  if (self) {
    origin = torch::randint(0, B, {B, S}, torch::kLong);
  } else {
    mask = torch::zeros({P, 1, 1, S});
    mask.narrow(3, S - 3, 3).fill_(-std::numeric_limits<float>::infinity());
  }
  for (auto _ : state) {
    auto out = leanseq::kernels::one_query_attention(q, k, v, mask, 0.125, origin, origin);
    benchmark::DoNotOptimize(std::get<0>(out).data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * B * H);
  leanseq::set_compute_threads(threads);
}
BENCHMARK(BM_OneQueryAttention)
    ->ArgsProduct({{0}, {4, 12, 24}, {0, 1}})
    ->ArgsProduct({{1}, {16}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// A beam reorder of one self-attention cache of a decoding step at batch 64, beam 5 (320 rows,
// transformer_small's 4 heads of 64, 12 positions so far) and the gather of its rows in order, on
// range(0) compute threads: what code that reads the rows in order pays per reorder (the CPU
// decoding step's attention kernel reads through the reorder's table and gathers nothing).
void BM_CacheReorder(benchmark::State& state) {
  const int threads = leanseq::compute_threads();
  leanseq::set_compute_threads(static_cast<int>(state.range(0)));
  const int64_t B = 320, H = 4, T = 12, d = 64;
  leanseq::nn::AppendBuffer cache;
  cache.append(torch::randn({B, H, T, d}));
  auto order = torch::randint(0, B, {B}, torch::kLong);
  for (auto _ : state) {
    cache.reorder(order);
    benchmark::DoNotOptimize(cache.tensor().data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * B * H * T * d * 4);
  leanseq::set_compute_threads(threads);
}
BENCHMARK(BM_CacheReorder)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();


// The gradient all-reduce of one data-parallel update of transformer_small (vocabulary 8000,
// 7.6M parameters, 30 MB of float gradients) between two ranks of this process over loopback Gloo,
// with buckets of range(0) MiB. Each iteration is what the trainer does per update: the all-reduce of
// the loss sums (here a flag that also tells the peer whether to go on), then the gradients.
// Compare with BM_TransformerSmallTrainStep/128/16 (one batch of 2048 tokens) of the same run.
void BM_GradientAllReduce(benchmark::State& state) {
  using leanseq::train::Distributed;
  if (!Distributed::supports(torch::kCPU)) {
    state.SkipWithError("this build has no Gloo process group");
    return;
  }
  const int64_t V = 8000, bucket = state.range(0) << 20;
  auto grads = [&] {
    auto model = leanseq::models::build_model(*leanseq::models::registry().preset_config("transformer_small"), {V, V, true});
    auto ps = leanseq::models::unique_parameters(*model);
    for (auto& p : ps) p.mutable_grad() = torch::randn_like(p);
    return ps;
  };
  leanseq::train::DistributedEnv env;
  env.world_size = 2;
  env.master_port = leanseq::train::free_loopback_port();
  std::thread peer([&, env]() mutable {
    env.rank = 1;
    Distributed d(env, std::chrono::seconds(60));
    auto ps = grads();
    for (;;) {
      auto go = torch::zeros({3}, torch::kDouble);
      d.all_reduce_max(go, "the flag");
      if (go[0].item<double>() == 0) break;
      d.all_reduce_gradients(ps, bucket);
    }
  });
  {
    env.rank = 0;
    Distributed d(env, std::chrono::seconds(60));
    auto ps = grads();
    for (auto _ : state) {
      auto go = torch::ones({3}, torch::kDouble);
      d.all_reduce_max(go, "the flag");
      d.all_reduce_gradients(ps, bucket);
    }
    auto stop = torch::zeros({3}, torch::kDouble);
    d.all_reduce_max(stop, "the flag");
    peer.join();
  }
  state.SetBytesProcessed(state.iterations() * 4 * 7'600'000);
}
BENCHMARK(BM_GradientAllReduce)->Arg(1)->Arg(25)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  leanseq::start_program(argv);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
