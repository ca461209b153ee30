#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cmath>
#include <limits>
#include <set>

#include "leanseq/data/batching.h"
#include "leanseq/decode/beam_search.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/models/transformer.h"
#include "leanseq/nn/packed_weight.h"
#include "support/fairseq_models.h"
#include "support/fixtures.h"
#include "support/scripted_decoder.h"

using namespace leanseq;
using namespace leanseq::decode;
using kernels::ComputeType;

using test::log_table;
using test::ScriptedDecoder;

// A server's request that timed out stops its batch: the search asks before each step.
TEST(BeamSearch, StopsBeforeTheNextStepWhenCancelled) {
  auto table = log_table({
      {0.2f, 0.2f, 0.0f, 0.2f, 0.2f, 0.2f},
      {0.2f, 0.2f, 0.0f, 0.2f, 0.2f, 0.2f},
      {0.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f},  // </s> never comes: the search would run max_len steps
      {0.2f, 0.2f, 0.0f, 0.2f, 0.2f, 0.2f},
      {0.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f},
      {0.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f},
  });
  ScriptedDecoder dec(table);
  SearchOptions opt;
  opt.beam = 2;
  opt.max_len_b = 50;
  opt.cancelled = [&] { return dec.steps >= 3; };
  EXPECT_THROW(beam_search(dec, 1, 4, 1024, 6, opt), Cancelled);
  EXPECT_EQ(dec.steps, 3);
  opt.cancelled = [] { return false; };
  ScriptedDecoder full(table);
  EXPECT_NO_THROW(beam_search(full, 1, 4, 1024, 6, opt));
  EXPECT_GT(full.steps, 3);
}

TEST(BeamSearch, ScriptedDecoderFindsTheBestSequence) {
  // Vocabulary: 0 <s>, 1 <pad>, 2 </s>, 3 <unk>, 4 a, 5 b. Greedy picks "a" first (0.6) but
  // "a" leads to a poor continuation; "b" (0.4) then </s> (0.9) is the best complete sequence.
  auto table = log_table({
      {0.01f, 0.01f, 0.01f, 0.01f, 0.48f, 0.48f},  // after <s> (unused)
      {0.01f, 0.01f, 0.01f, 0.01f, 0.48f, 0.48f},  // after <pad> (unused)
      {0.0f, 0.0f, 0.0f, 0.0f, 0.6f, 0.4f},        // after </s> = BOS
      {0.25f, 0.0f, 0.25f, 0.0f, 0.25f, 0.25f},    // after <unk>
      {0.0f, 0.0f, 0.4f, 0.0f, 0.3f, 0.3f},        // after a
      {0.0f, 0.0f, 0.9f, 0.0f, 0.05f, 0.05f},      // after b
  });
  ScriptedDecoder greedy_dec(table);
  SearchOptions opt;
  opt.beam = 1;
  opt.max_len_b = 5;
  auto greedy = beam_search(greedy_dec, 1, 3, 1024, 6, opt);
  ASSERT_EQ(greedy[0].size(), 1u);
  EXPECT_EQ(greedy[0][0].tokens, (std::vector<int64_t>{4, 2}));  // a </s>: 0.6*0.4 = 0.24

  ScriptedDecoder beam_dec(table);
  opt.beam = 2;
  auto res = beam_search(beam_dec, 1, 3, 1024, 6, opt);
  ASSERT_EQ(res[0].size(), 2u);
  EXPECT_EQ(res[0][0].tokens, (std::vector<int64_t>{5, 2}));  // b </s>: 0.4*0.9 = 0.36
  EXPECT_NEAR(res[0][0].score, std::log(0.36) / 2, 1e-6);
  EXPECT_NEAR(res[0][0].positional_scores[0], std::log(0.4), 1e-6);
  EXPECT_NEAR(res[0][0].positional_scores[1], std::log(0.9), 1e-6);
  EXPECT_GE(res[0][0].score, res[0][1].score);
}

TEST(BeamSearch, MaxLenForcesEosAndLengthPenaltyNormalizes) {
  // A decoder that rarely wants to stop: </s> is forced at max_len.
  auto row = std::vector<float>{0.0f, 0.0f, 0.01f, 0.0f, 0.59f, 0.4f};
  auto table = log_table({row, row, {0.0f, 0.0f, 0.0f, 0.0f, 0.5f, 0.5f}, row, row, row});
  ScriptedDecoder dec(table);
  SearchOptions opt;
  opt.beam = 3;
  opt.max_len_b = 4;
  opt.lenpen = 0.5;
  auto res = beam_search(dec, 2, 3, 1024, 6, opt);
  for (const auto& hyps : res) {
    ASSERT_EQ(hyps.size(), 3u);
    for (const auto& h : hyps) {
      ASSERT_EQ(h.tokens.size(), 5u);  // 4 tokens + forced </s>
      EXPECT_EQ(h.tokens.back(), 2);
      double sum = 0;
      for (float p : h.positional_scores) sum += p;
      EXPECT_NEAR(h.score, sum / std::sqrt(5.0), 1e-5);
    }
    // The best: a a a then </s> (0.5 * 0.59^3 * 0.01).
    EXPECT_EQ(hyps[0].tokens, (std::vector<int64_t>{4, 4, 4, 4, 2}));
  }
}

TEST(BeamSearch, NoRepeatNgramSizeBlocksEveryRepeatedNgram) {
  // A decoder that loves "a b a b ...": with n = 2 no bigram may come twice (the leading </s>
  // counts, as in fairseq); with n = 3 no trigram.
  auto table = log_table({
      {0.01f, 0.0f, 0.01f, 0.01f, 0.9f, 0.05f, 0.02f},
      {0.01f, 0.0f, 0.01f, 0.01f, 0.9f, 0.05f, 0.02f},
      {0.0f, 0.0f, 0.01f, 0.01f, 0.9f, 0.06f, 0.02f},   // after </s>: a
      {0.0f, 0.0f, 0.01f, 0.01f, 0.9f, 0.06f, 0.02f},
      {0.0f, 0.0f, 0.01f, 0.01f, 0.02f, 0.9f, 0.06f},   // after a: b
      {0.0f, 0.0f, 0.01f, 0.01f, 0.9f, 0.02f, 0.06f},   // after b: a
      {0.0f, 0.0f, 0.2f, 0.01f, 0.4f, 0.3f, 0.09f},     // after c
  });
  for (int64_t n : {2, 3}) {
    ScriptedDecoder dec(table);
    SearchOptions opt;
    opt.beam = 3;
    opt.nbest = 3;
    opt.max_len_b = 8;
    opt.no_repeat_ngram_size = n;
    auto res = beam_search(dec, 2, 3, 1024, 7, opt);
    for (const auto& hyps : res) {
      for (const auto& h : hyps) {
        std::vector<int64_t> seq{2};
        seq.insert(seq.end(), h.tokens.begin(), h.tokens.end() - 1);  // the final </s> is not generated by choice
        std::set<std::vector<int64_t>> seen;
        for (size_t i = 0; i + n <= seq.size(); ++i) {
          std::vector<int64_t> gram(seq.begin() + static_cast<long>(i), seq.begin() + static_cast<long>(i + n));
          EXPECT_TRUE(seen.insert(gram).second) << "n = " << n << ": an n-gram repeats at " << i;
        }
      }
    }
  }
  // Without the option the decoder does repeat.
  ScriptedDecoder dec(table);
  SearchOptions opt;
  opt.beam = 1;
  opt.max_len_b = 6;
  EXPECT_EQ(beam_search(dec, 1, 3, 1024, 7, opt)[0][0].tokens, (std::vector<int64_t>{4, 5, 4, 5, 4, 5, 2}));
}

TEST(BeamSearch, APrefixStartsEveryHypothesisWithItsOwnScores) {
  auto table = log_table({
      {0.01f, 0.0f, 0.01f, 0.01f, 0.5f, 0.3f, 0.17f},
      {0.01f, 0.0f, 0.01f, 0.01f, 0.5f, 0.3f, 0.17f},
      {0.0f, 0.0f, 0.01f, 0.01f, 0.7f, 0.2f, 0.08f},
      {0.0f, 0.0f, 0.01f, 0.01f, 0.5f, 0.3f, 0.18f},
      {0.0f, 0.0f, 0.3f, 0.01f, 0.2f, 0.3f, 0.19f},
      {0.0f, 0.0f, 0.3f, 0.01f, 0.3f, 0.2f, 0.19f},
      {0.0f, 0.0f, 0.4f, 0.01f, 0.3f, 0.2f, 0.09f},
  });
  ScriptedDecoder dec(table);
  SearchOptions opt;
  opt.beam = 3;
  opt.nbest = 3;
  opt.max_len_b = 6;
  const std::vector<std::vector<int64_t>> prefixes{{6, 6}, {}, {5}};
  auto res = beam_search(dec, 3, 3, 1024, 7, opt, &prefixes);
  for (size_t s = 0; s < 3; ++s) {
    ASSERT_FALSE(res[s].empty());
    for (const auto& h : res[s]) {
      ASSERT_GE(h.tokens.size(), prefixes[s].size() + 1);
      for (size_t t = 0; t < prefixes[s].size(); ++t) EXPECT_EQ(h.tokens[t], prefixes[s][t]) << "sentence " << s;
    }
  }
  // The forced tokens carry the model's own log-probabilities: c after </s> (0.08), c after c (0.09).
  EXPECT_NEAR(res[0][0].positional_scores[0], std::log(0.08), 1e-5);
  EXPECT_NEAR(res[0][0].positional_scores[1], std::log(0.09), 1e-5);
}

TEST(Sampling, TopPKeepsTheSmallestSetReachingP) {
  // Binary fractions, so that the sums are exact and "reaches" is tested at its edge.
  auto probs = torch::tensor({0.125f, 0.5f, 0.125f, 0.25f}).view({1, 4});
  auto check = [&](double p, std::vector<int64_t> ids, std::vector<float> kept) {
    auto [k, i] = top_p(probs, p);
    std::vector<int64_t> got_ids;
    std::vector<float> got;
    for (int64_t j = 0; j < k.size(1); ++j) {
      if (k[0][j].item<float>() > 0) got_ids.push_back(i[0][j].item<int64_t>()), got.push_back(k[0][j].item<float>());
    }
    EXPECT_EQ(got_ids, ids) << "p = " << p;
    EXPECT_EQ(got, kept) << "p = " << p;
  };
  check(0.4, {1}, {0.5f});           // 0.5 alone reaches 0.4
  check(0.5, {1}, {0.5f});           // exactly p is enough
  check(0.7, {1, 3}, {0.5f, 0.25f});  // 0.5 does not, 0.75 does
  check(0.75, {1, 3}, {0.5f, 0.25f});
  auto [k, i] = top_p(probs, 0.8);    // a tie at the edge: one of the two 0.125 is enough
  EXPECT_EQ((k > 0).sum().item<int64_t>(), 3);
  EXPECT_EQ((std::get<0>(top_p(probs, 1.0)) > 0).sum().item<int64_t>(), 4);
}

TEST(Sampling, SamplesAreReproduciblePerSeedDifferentAcrossSeedsAndTopOneIsGreedy) {
  auto table = log_table({
      {0.01f, 0.0f, 0.1f, 0.01f, 0.3f, 0.3f, 0.28f},
      {0.01f, 0.0f, 0.1f, 0.01f, 0.3f, 0.3f, 0.28f},
      {0.0f, 0.0f, 0.01f, 0.01f, 0.34f, 0.33f, 0.31f},
      {0.0f, 0.0f, 0.1f, 0.01f, 0.3f, 0.3f, 0.29f},
      {0.0f, 0.0f, 0.15f, 0.01f, 0.3f, 0.29f, 0.25f},
      {0.0f, 0.0f, 0.15f, 0.01f, 0.29f, 0.3f, 0.25f},
      {0.0f, 0.0f, 0.15f, 0.01f, 0.25f, 0.29f, 0.3f},
  });
  SearchOptions opt;
  opt.beam = 5;
  opt.nbest = 5;
  opt.max_len_b = 10;
  opt.sampling = true;
  auto run = [&](uint64_t seed) {
    torch::manual_seed(seed);
    ScriptedDecoder dec(table);
    std::vector<std::vector<int64_t>> out;
    for (const auto& hyps : beam_search(dec, 3, 3, 1024, 7, opt)) {
      EXPECT_EQ(hyps.size(), 5u);  // every sample ends (at the latest at max_len)
      for (const auto& h : hyps) out.push_back(h.tokens);
    }
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
  // Scores are the samples' own log-probabilities, length-normalised, best first.
  torch::manual_seed(3);
  ScriptedDecoder dec(table);
  for (const auto& hyps : beam_search(dec, 1, 3, 1024, 7, opt)) {
    for (size_t k = 0; k < hyps.size(); ++k) {
      double sum = 0;
      int64_t last = 2;
      for (size_t t = 0; t < hyps[k].tokens.size(); ++t) {
        EXPECT_NEAR(hyps[k].positional_scores[t], table[last][hyps[k].tokens[t]].item<float>(), 1e-5);
        sum += hyps[k].positional_scores[t];
        last = hyps[k].tokens[t];
      }
      EXPECT_NEAR(hyps[k].score, sum / static_cast<double>(hyps[k].tokens.size()), 1e-5);
      if (k > 0) {
        EXPECT_GE(hyps[k - 1].score, hyps[k].score);
      }
    }
  }
  // Sampling from the single most likely token is greedy search.
  opt.sampling_topk = 1;
  opt.beam = opt.nbest = 1;
  ScriptedDecoder sampled(table), greedy(table);
  SearchOptions g;
  g.beam = 1;
  g.max_len_b = 10;
  EXPECT_EQ(beam_search(sampled, 2, 3, 1024, 7, opt)[0][0].tokens, beam_search(greedy, 2, 3, 1024, 7, g)[0][0].tokens);
}

namespace {
// A scripted decoder that also attends: each row looks at source position (last token) % S, so
// the alignment of a hypothesis is fixed by its own prefix, whatever rows the search reorders.
class AttendingDecoder : public ScriptedDecoder {
 public:
  AttendingDecoder(torch::Tensor table, int64_t src_len) : ScriptedDecoder(std::move(table)), src_len_(src_len) {}
  torch::Tensor step(const torch::Tensor& last, torch::Tensor* attn) override {
    if (attn) *attn = torch::one_hot(last.remainder(src_len_), src_len_).to(torch::kFloat);
    return ScriptedDecoder::step(last, attn);
  }

 private:
  int64_t src_len_;
};
}  // namespace

TEST(BeamSearch, AlignmentFollowsEachHypothesisThroughReorders) {
  // Several live paths with crossing scores, so beams are reordered at every step.
  auto table = log_table({
      {0.1f, 0.0f, 0.1f, 0.0f, 0.4f, 0.2f, 0.2f},
      {0.1f, 0.0f, 0.1f, 0.0f, 0.4f, 0.2f, 0.2f},
      {0.0f, 0.0f, 0.0f, 0.0f, 0.3f, 0.3f, 0.4f},
      {0.1f, 0.0f, 0.1f, 0.0f, 0.4f, 0.2f, 0.2f},
      {0.0f, 0.0f, 0.2f, 0.0f, 0.1f, 0.3f, 0.4f},
      {0.0f, 0.0f, 0.3f, 0.0f, 0.4f, 0.2f, 0.1f},
      {0.0f, 0.0f, 0.25f, 0.0f, 0.3f, 0.35f, 0.1f},
  });
  const int64_t S = 5;
  AttendingDecoder dec(table, S);
  SearchOptions opt;
  opt.beam = 3;
  opt.max_len_b = 6;
  opt.need_attn = true;
  auto res = beam_search(dec, 2, S, 1024, 7, opt);
  int checked = 0;
  for (const auto& hyps : res) {
    ASSERT_EQ(hyps.size(), 3u);
    for (const auto& h : hyps) {
      ASSERT_EQ(h.alignment.size(), h.tokens.size());
      for (size_t t = 0; t < h.tokens.size(); ++t) {
        const int64_t fed = t == 0 ? 2 : h.tokens[t - 1];  // </s> starts every hypothesis
        EXPECT_EQ(h.alignment[t], fed % S) << "target position " << t;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 12);
}

namespace {
// Every dimension (vocabulary, batch, beam, hypotheses per sentence, their lengths) and every search
// option comes from the fixture, so that fixtures of any size are checked for what they hold.
void check_fairseq_beams(test::Fixture& fx, const std::string& name) {
  auto model = test::fairseq_model(fx, name);
  const auto config = nlohmann::json::parse(fx.json_text)["config"];
  const auto& b = config["beam"];
  SearchOptions opt;
  opt.beam = b["beam_size"];
  opt.max_len_a = b["max_len_a"];
  opt.max_len_b = b["max_len_b"];
  opt.lenpen = b["len_penalty"];
  opt.min_len = b.value("min_len", 1);
  opt.unk_penalty = b.value("unk_penalty", 0.0);
  const int64_t vocab = config["vocab_size"];
  auto res = generate(*model, fx.inputs["src_tokens"], fx.inputs["src_lengths"], vocab, opt);
  auto all_tokens = fx.outputs["beam_all_tokens"];
  auto all_scores = fx.outputs["beam_all_scores"];
  auto all_pos = fx.outputs["beam_all_positional_scores"];
  auto all_len = fx.outputs["beam_all_lengths"];
  auto num_hypos = fx.outputs["beam_num_hypos"];
  const int64_t bsz = fx.inputs["src_tokens"].size(0);
  ASSERT_EQ(static_cast<int64_t>(res.size()), bsz) << name;
  ASSERT_EQ(all_tokens.size(0), bsz) << name;
  for (int64_t s = 0; s < bsz; ++s) {
    const int64_t hypos = num_hypos[s].item<int64_t>();
    ASSERT_EQ(static_cast<int64_t>(res[s].size()), hypos) << name << " sentence " << s;
    for (int64_t k = 0; k < hypos; ++k) {
      const auto& h = res[s][k];
      int64_t len = all_len[s][k].item<int64_t>();
      ASSERT_EQ(static_cast<int64_t>(h.tokens.size()), len) << name << " sentence " << s << " hyp " << k;
      for (int64_t t = 0; t < len; ++t) {
        EXPECT_EQ(h.tokens[t], all_tokens[s][k][t].item<int64_t>()) << name << " sentence " << s << " hyp " << k;
        EXPECT_NEAR(h.positional_scores[t], all_pos[s][k][t].item<float>(), 1e-5);
      }
      EXPECT_NEAR(h.score, all_scores[s][k].item<float>(), 1e-5);
    }
  }
}
}  // namespace

TEST(BeamSearch, ReproducesFairseqSequenceGeneratorTransformer) {
  LEANSEQ_REQUIRE_FIXTURE("model_transformer", fx);
  check_fairseq_beams(fx, "model_transformer");
}

TEST(BeamSearch, ReproducesFairseqSequenceGeneratorLightweightConv) {
  LEANSEQ_REQUIRE_FIXTURE("model_lightconv_lightweight", fx);
  check_fairseq_beams(fx, "model_lightconv_lightweight");
}

TEST(BeamSearch, ReproducesFairseqSequenceGeneratorDynamicConv) {
  LEANSEQ_REQUIRE_FIXTURE("model_lightconv_dynamic", fx);
  check_fairseq_beams(fx, "model_lightconv_dynamic");
}

TEST(BeamSearch, ReproducesFairseqSequenceGeneratorFConv) {
  LEANSEQ_REQUIRE_FIXTURE("model_fconv", fx);
  check_fairseq_beams(fx, "model_fconv");
}

TEST(BeamSearch, CudaDecodingScoresTheCpusHypothesesAlike) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA GPU (or a LibTorch without CUDA)";
  // A randomly initialised transformer_tiny searched on the CPU and on the GPU: the best
  // hypotheses score alike within float tolerance, and where they are the same tokens (they may
  // differ at a near-tie) so are their per-token scores.
  torch::manual_seed(11);
  auto cfg = models::registry().preset_config("transformer_tiny");
  auto model = models::build_model(*cfg, {40, 40, true});
  model->eval();
  auto src = torch::randint(4, 40, {6, 9}, torch::kLong);
  src.select(1, 8).fill_(2);
  auto lengths = torch::full({6}, 9, torch::kLong);
  SearchOptions opt;
  opt.beam = 4;
  opt.nbest = 3;
  opt.max_len_b = 12;
  auto cpu = generate(*model, src, lengths, 40, opt);
  model->to(torch::kCUDA);
  auto gpu = generate(*model, src.cuda(), lengths.cuda(), 40, opt);
  for (size_t s = 0; s < cpu.size(); ++s) {
    ASSERT_FALSE(gpu[s].empty());
    EXPECT_NEAR(gpu[s][0].score, cpu[s][0].score, 1e-4) << "sentence " << s;
    if (gpu[s][0].tokens == cpu[s][0].tokens) {
      for (size_t t = 0; t < cpu[s][0].tokens.size(); ++t) {
        EXPECT_NEAR(gpu[s][0].positional_scores[t], cpu[s][0].positional_scores[t], 1e-4) << "sentence " << s;
      }
    }
  }
}

TEST(Ensemble, MembersThatAgreeGiveTheirOwnLogProbabilitiesExactly) {
  // Values near 0 are where logsumexp(lp, lp) - log(2) rounds: lp + log 2 has a coarser grid than lp.
  auto lp = torch::log_softmax(torch::randn({7, 50}) * 9, -1);
  lp[0][3] = -1e-7f;
  lp[1][4] = -3e-5f;
  lp[2][5] = -std::numeric_limits<float>::infinity();
  auto two = ensemble_log_probs({lp, lp.clone()}), three = ensemble_log_probs({lp, lp.clone(), lp.clone()});
  EXPECT_TRUE(torch::equal(two, lp));
  EXPECT_TRUE(torch::equal(three, lp));
}

TEST(Ensemble, IsTheLogOfTheMembersMeanProbability) {
  auto a = torch::log_softmax(torch::randn({5, 40}, torch::kDouble) * 4, -1);
  auto b = torch::log_softmax(torch::randn({5, 40}, torch::kDouble) * 4, -1);
  a[0][1] = -std::numeric_limits<double>::infinity();  // one member rules a token out
  a[1][2] = b[1][2] = -std::numeric_limits<double>::infinity();  // both do
  auto mixed = ensemble_log_probs({a, b});
  auto expected = ((a.exp() + b.exp()) / 2).log();
  EXPECT_TRUE(torch::allclose(mixed, expected, 1e-12, 1e-12));
  EXPECT_TRUE(std::isinf(mixed[1][2].item<double>()) && mixed[1][2].item<double>() < 0);
  EXPECT_NEAR(mixed[0][1].item<double>(), b[0][1].item<double>() - std::log(2.0), 1e-12);
}

// At inference a Transformer encoder gives a sentence the same bits alone and padded in a batch:
// its attention's sums run in a fixed order over the sentence's keys (nn/functional.h), so a
// difference cannot reach an int8 product's rounding.
TEST(BeamSearch, ATransformerEncoderGivesASentenceTheSameBitsAloneAndPadded) {
  torch::NoGradGuard no_grad;
  const int64_t vocab = 200;
  torch::manual_seed(3);
  auto model = models::build_model(*models::registry().preset_config("transformer_small"), {vocab, vocab, true});
  model->eval();
  std::vector<int64_t> a, b;
  for (int64_t t = 0; t < 30; ++t) a.push_back(4 + (t * 7) % 190);
  a.push_back(2);
  for (int64_t t = 0; t < 34; ++t) b.push_back(4 + (t * 11) % 190);
  b.push_back(2);
  auto one = data::collate({a}, {}, {0});
  auto two = data::collate({a, b}, {}, {0, 1});
  auto alone = model->encode(one.src, one.src_lengths).out[0];
  auto padded = model->encode(two.src, two.src_lengths).out[0].narrow(0, 0, 31);
  EXPECT_TRUE(torch::equal(alone, padded)) << "max difference " << (alone - padded).abs().max().item<float>();
}

// Sentences of different lengths, searched together (padded) and each alone: the same tokens and
// the same bits in float32 and int8. A row's products do not depend on the other rows (packed
// weights, kernels/packed_products.h; int8's exact integers), attention sums a sentence's keys in a
// fixed order and its softmax does not depend on the padding (kernels/softmax.h), ConvS2S's
// convolutions multiply each window alike at inference (nn/fconv.h), and Pervasive Attention's grid
// takes its linear layers' products per cell (models/pervasive.h), and an A2 block's gather over a
// sequence is attention over its cells (nn/double_attention.h).
TEST(BeamSearch, ASentenceDecodesAloneAsInABatchInEveryFamily) {
  struct Case {
    std::string name;
    std::shared_ptr<models::ModelConfig> config;
  };
  std::vector<Case> cases;
  for (const std::string preset : {"transformer_tiny", "transformer_tiny_san", "transformer_tiny_san_aan",
                                   "lightconv_tiny", "dynamicconv_tiny", "fconv_tiny", "pervasive_tiny",
                                   "pervasive_densenet_tiny"}) {
    cases.push_back({preset, models::registry().preset_config(preset)});
  }
  {
    auto config = models::registry().preset_config("transformer_tiny");
    auto& tc = static_cast<models::TransformerConfig&>(*config);
    tc.encoder.a2.layers = "1";
    tc.decoder.a2.layers = "0,1";  // causal
    cases.push_back({"transformer_tiny with A2 blocks", config});
  }
  const int64_t vocab = 40;
  std::vector<std::vector<int64_t>> sources;
  for (int64_t len : {9, 3, 6, 12, 5, 7}) {
    std::vector<int64_t> s;
    for (int64_t t = 0; t + 1 < len; ++t) s.push_back(4 + (len * 7 + t * 5) % (vocab - 4));
    s.push_back(2);
    sources.push_back(s);
  }
  SearchOptions opt;
  opt.beam = 5;
  opt.max_len_b = 10;
  std::vector<int64_t> ids(sources.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int64_t>(i);
  const auto batch = data::collate(sources, {}, ids);
  std::vector<ComputeType> types{ComputeType::float32};
  if (kernels::int8_gemm_available()) types.push_back(ComputeType::int8);
  for (const auto& c : cases) {
    torch::manual_seed(3);
    auto model = models::build_model(*c.config, {vocab, vocab, true});
    model->eval();
    for (auto type : types) {
      nn::set_compute_type(*model, type);
      auto together = generate(*model, batch.src, batch.src_lengths, vocab, opt);
      for (size_t i = 0; i < sources.size(); ++i) {
        SCOPED_TRACE(c.name + ", sentence " + std::to_string(i) + (type == ComputeType::int8 ? ", int8" : ""));
        auto one = data::collate({sources[i]}, {}, {0});
        auto alone = generate(*model, one.src, one.src_lengths, vocab, opt);
        ASSERT_FALSE(alone[0].empty() || together[i].empty());
        EXPECT_EQ(alone[0][0].tokens, together[i][0].tokens);
        EXPECT_EQ(alone[0][0].score, together[i][0].score) << "apart by " << alone[0][0].score - together[i][0].score;
        EXPECT_EQ(alone[0][0].positional_scores, together[i][0].positional_scores);
      }
    }
  }
}

namespace {
// A decoder that passes everything to another and records the rows fed at each step; `per_sentence`
// says whether the search may feed the first step once per sentence.
class RowCounter : public StepDecoder {
 public:
  RowCounter(StepDecoder& inner, bool per_sentence) : inner_(inner), per_sentence_(per_sentence) {}
  torch::Tensor step(const torch::Tensor& last, torch::Tensor* attn) override {
    rows.push_back(last.size(0));
    return inner_.step(last, attn);
  }
  void reorder(const torch::Tensor& order, bool within) override { inner_.reorder(order, within); }
  bool first_step_per_sentence() const override { return per_sentence_; }
  std::vector<int64_t> rows;

 private:
  StepDecoder& inner_;
  bool per_sentence_;
};
}  // namespace

// A plain beam search feeds its first step once per sentence (all its beams are the same there),
// then the model's rows become beams: in every family the hypotheses, their scores and alignments
// are those of a first step over every beam row. With sampling every row is fed.
TEST(BeamSearch, TheFirstStepOncePerSentenceFindsWhatEveryBeamRowFinds) {
  const int64_t vocab = 40;
  std::vector<std::vector<int64_t>> sources;
  for (int64_t len : {9, 3, 6}) {
    std::vector<int64_t> s;
    for (int64_t t = 0; t + 1 < len; ++t) s.push_back(4 + (len * 3 + t * 7) % (vocab - 4));
    s.push_back(2);
    sources.push_back(s);
  }
  auto batch = data::collate(sources, {}, {0, 1, 2});
  const std::vector<int64_t> lengths{9, 3, 6};
  for (const std::string preset : {"transformer_tiny", "transformer_tiny_san_aan", "lightconv_tiny",
                                   "dynamicconv_tiny", "fconv_tiny", "pervasive_tiny"}) {
    torch::manual_seed(6);
    auto model = models::build_model(*models::registry().preset_config(preset), {vocab, vocab, true});
    model->eval();
    c10::InferenceMode inference;  // as generate() decodes
    SearchOptions opt;
    opt.beam = 4;
    opt.max_len_b = 8;
    opt.need_attn = true;
    ModelStepDecoder a_model(*model, batch.src, batch.src_lengths, opt.beam);
    ModelStepDecoder b_model(*model, batch.src, batch.src_lengths, opt.beam);
    RowCounter once(a_model, true), every(b_model, false);
    auto a = beam_search(once, 3, batch.src.size(1), 1024, vocab, opt, nullptr, &lengths);
    auto b = beam_search(every, 3, batch.src.size(1), 1024, vocab, opt, nullptr, &lengths);
    ASSERT_GE(once.rows.size(), 2u) << preset;
    EXPECT_EQ(once.rows[0], 3) << preset << ": one row per sentence";
    EXPECT_EQ(once.rows[1], 12) << preset << ": then the beams";
    EXPECT_EQ(every.rows[0], 12) << preset;
    for (size_t i = 0; i < sources.size(); ++i) {
      ASSERT_EQ(a[i].size(), b[i].size()) << preset;
      for (size_t h = 0; h < a[i].size(); ++h) {
        EXPECT_EQ(a[i][h].tokens, b[i][h].tokens) << preset << ", sentence " << i;
        EXPECT_NEAR(a[i][h].score, b[i][h].score, 1e-5) << preset << ", sentence " << i;
        EXPECT_EQ(a[i][h].alignment, b[i][h].alignment) << preset;
      }
    }
    opt.sampling = true;
    ModelStepDecoder c_model(*model, batch.src, batch.src_lengths, opt.beam);
    RowCounter sampled(c_model, true);
    beam_search(sampled, 3, batch.src.size(1), 1024, vocab, opt, nullptr, &lengths);
    EXPECT_EQ(sampled.rows[0], 12) << preset << ": samples are drawn per row";
  }
}
