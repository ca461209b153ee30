#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "leanseq/decode/beam_search.h"
#include "leanseq/models/state_dict.h"
#include "leanseq/models/transformer.h"
#include "support/fairseq_models.h"
#include "support/fixtures.h"

using namespace leanseq;
using namespace leanseq::decode;

namespace {
// A decoder whose next-token distribution depends only on the last token, from a fixed table.
class ScriptedDecoder : public StepDecoder {
 public:
  explicit ScriptedDecoder(torch::Tensor table) : table_(std::move(table)) {}
  torch::Tensor step(const torch::Tensor& last, torch::Tensor*) override {
    ++steps;
    return table_.index_select(0, last);
  }
  void reorder(const torch::Tensor& order, bool within) override {
    last_order = order;
    if (!within) ++shrinks;
  }
  int steps = 0, shrinks = 0;
  torch::Tensor last_order;

 private:
  torch::Tensor table_;
};

torch::Tensor log_table(const std::vector<std::vector<float>>& probs) {
  std::vector<float> flat;
  for (const auto& r : probs) flat.insert(flat.end(), r.begin(), r.end());
  return torch::tensor(flat).view({static_cast<int64_t>(probs.size()), -1}).log();
}
}  // namespace

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
