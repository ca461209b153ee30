#include <gtest/gtest.h>

#include <limits>

#include "leanseq/core/threads.h"
#include "leanseq/kernels/one_query_attention.h"
#include "support/fixtures.h"

using namespace leanseq;

namespace {
double max_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// The kernels' scores and contexts against the references, to float32 rounding of sums of d or S
// terms: relative to the sum of the terms' absolute values (1.05e-5 absolute was seen on a 64-term
// dot product of an unoptimised build).
double scores_error(const torch::Tensor& q, const torch::Tensor& keys) {
  return test::max_diff_relative_to(kernels::one_query_scores(q, keys), kernels::one_query_scores_reference(q, keys),
                                    kernels::one_query_scores_reference(q.abs(), keys.abs()));
}
double context_error(const torch::Tensor& p, const torch::Tensor& values) {
  return test::max_diff_relative_to(kernels::one_query_context(p, values),
                                    kernels::one_query_context_reference(p, values),
                                    kernels::one_query_context_reference(p.abs(), values.abs()));
}
constexpr double kSumTolerance = 1e-6;
}  // namespace

// The loop against the elementwise product and sum: the layouts the layers pass (a query from a
// transposed projection, keys in a cache buffer with room for more positions, keys scaled in a
// transposed layout, three-dimensional ConvS2S shapes), widths that are no multiple of a vector.
TEST(OneQueryAttention, EqualsTheElementwiseProductAndSum) {
  torch::manual_seed(11);
  torch::NoGradGuard no_grad;
  for (int64_t d : {64, 13}) {
    for (int64_t S : {1, 7, 30}) {
      const int64_t B = 6, H = 4;
      auto q = torch::randn({B, 1, H, d}).transpose(1, 2);                         // [B, H, 1, d], strided
      auto buffer = torch::randn({B, H, S + 5, d});                                 // room for 5 more
      auto k = buffer.narrow(2, 0, S);                                              // [B, H, S, d], strided
      auto k_scaled = torch::randn({B, S, H, d}).transpose(1, 2) * 0.125;          // transposed layout
      auto p = torch::softmax(torch::randn({B, H, 1, S}), -1);
      for (const auto& keys : {k, k_scaled}) {
        ASSERT_EQ(kernels::one_query_scores(q, keys).sizes(), torch::IntArrayRef({B, H, 1, S}));
        EXPECT_LT(scores_error(q, keys), kSumTolerance) << d << " " << S;
        ASSERT_EQ(kernels::one_query_context(p, keys).sizes(), torch::IntArrayRef({B, H, 1, d}));
        EXPECT_LT(context_error(p, keys), kSumTolerance) << d << " " << S;
      }
      // Rows in groups of three sharing their keys and values (a sentence's beams).
      auto shared = torch::randn({B / 3, H, S, d});
      EXPECT_TRUE(torch::equal(kernels::one_query_scores(q, shared),
                               kernels::one_query_scores(q, shared.repeat_interleave(3, 0))));
      EXPECT_TRUE(torch::equal(kernels::one_query_context(p, shared),
                               kernels::one_query_context(p, shared.repeat_interleave(3, 0))));
      EXPECT_LT(scores_error(q, shared), kSumTolerance);
      // ConvS2S: [B, 1, C] queries against [B, S, C] keys and values.
      auto q3 = torch::randn({B, 1, d}), k3 = torch::randn({B, S, d});
      auto p3 = torch::softmax(torch::randn({B, 1, S}), -1);
      EXPECT_LT(scores_error(q3, k3), kSumTolerance);
      EXPECT_LT(context_error(p3, k3), kSumTolerance);
    }
  }
}

// Rows do not depend on their neighbours (a sentence decodes the same alone or batched) nor on the
// number of threads: bit-equal.
TEST(OneQueryAttention, ARowIsTheSameAloneOrInABatchOnAnyThreadCount) {
  torch::manual_seed(12);
  torch::NoGradGuard no_grad;
  auto q = torch::randn({64, 4, 1, 64}), k = torch::randn({64, 4, 40, 64});
  auto p = torch::softmax(torch::randn({64, 4, 1, 40}), -1);
  const int before = torch::get_num_threads();
  set_compute_threads(1);
  auto s1 = kernels::one_query_scores(q, k), c1 = kernels::one_query_context(p, k);
  set_compute_threads(2);
  auto s2 = kernels::one_query_scores(q, k), c2 = kernels::one_query_context(p, k);
  set_compute_threads(before);
  EXPECT_TRUE(torch::equal(s1, s2));
  EXPECT_TRUE(torch::equal(c1, c2));
  auto alone = kernels::one_query_scores(q.narrow(0, 37, 1), k.narrow(0, 37, 1));
  EXPECT_TRUE(torch::equal(alone, s2.narrow(0, 37, 1)));
  auto alone_c = kernels::one_query_context(p.narrow(0, 37, 1), k.narrow(0, 37, 1));
  EXPECT_TRUE(torch::equal(alone_c, c2.narrow(0, 37, 1)));
}

// A sentence padded in a batch has more keys, whose weights are exactly 0: its scores and its
// context are the same bits as with its own keys only, at every number of keys and of pads (the
// last keys' group of 4 included), so padding never changes a translation.
TEST(OneQueryAttention, PaddedKeysLeaveScoresAndContextTheSameBits) {
  torch::manual_seed(13);
  torch::NoGradGuard no_grad;
  for (int64_t L : {1, 3, 4, 7, 29, 31}) {
    for (int64_t pads : {1, 2, 4, 5}) {
      const int64_t S = L + pads;
      auto q = torch::randn({2, 4, 1, 64}), k = torch::randn({2, 4, S, 64}), v = torch::randn({2, 4, S, 64});
      auto own_k = k.narrow(2, 0, L).contiguous(), own_v = v.narrow(2, 0, L).contiguous();
      auto p = torch::softmax(torch::randn({2, 4, 1, L}), -1);
      auto padded_p = torch::cat({p, torch::zeros({2, 4, 1, pads})}, -1);
      EXPECT_TRUE(torch::equal(kernels::one_query_scores(q, own_k), kernels::one_query_scores(q, k).narrow(-1, 0, L)))
          << L << " keys, " << pads << " pads";
      EXPECT_TRUE(torch::equal(kernels::one_query_context(p, own_v), kernels::one_query_context(padded_p, v)))
          << L << " keys, " << pads << " pads";
    }
  }
}

// The same for a whole step in one pass, the pads masked with -inf as a padded batch masks them:
// the softmax's exponentials and sum take the same bits whatever keys follow (a sentence's cross
// attention alone and in a batch of longer sources).
TEST(OneQueryAttention, MaskedPadsLeaveAWholeStepTheSameBits) {
  torch::manual_seed(13);
  torch::NoGradGuard no_grad;
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t L : {1, 3, 7, 8, 9, 29, 31}) {
    for (int64_t pads : {1, 2, 5, 8, 13}) {
      const int64_t S = L + pads;
      auto q = torch::randn({5, 4, 1, 64}), k = torch::randn({1, 4, S, 64}), v = torch::randn({1, 4, S, 64});
      auto own_k = k.narrow(2, 0, L).contiguous(), own_v = v.narrow(2, 0, L).contiguous();
      auto mask = torch::cat({torch::zeros({1, 1, 1, L}), torch::full({1, 1, 1, pads}, -inf)}, -1);
      auto [own_ctx, own_p] = kernels::one_query_attention(q, own_k, own_v, torch::zeros({1, 1, 1, L}), 0.125);
      auto [ctx, p] = kernels::one_query_attention(q, k, v, mask, 0.125);
      ASSERT_TRUE(own_ctx.defined() && ctx.defined());
      EXPECT_TRUE(torch::equal(own_p, p.narrow(-1, 0, L))) << L << " keys, " << pads << " pads";
      EXPECT_TRUE(torch::equal(own_ctx, ctx)) << L << " keys, " << pads << " pads";
    }
  }
}

// What the loop does not take goes to the composite with the same result: broadcast leading
// dimensions, a value matrix whose last dimension is strided (A2 passes a transposed one), double
// precision, and inputs that record a gradient (which then flows).
TEST(OneQueryAttention, OtherInputsTakeTheComposite) {
  torch::manual_seed(13);
  auto q = torch::randn({3, 2, 1, 8}), k = torch::randn({1, 2, 5, 8});
  {
    torch::NoGradGuard no_grad;
    EXPECT_LT(max_diff(kernels::one_query_scores(q, k), kernels::one_query_scores_reference(q, k)), 1e-6);
    auto p = torch::softmax(torch::randn({3, 1, 5}), -1), v = torch::randn({3, 8, 5}).transpose(1, 2);
    EXPECT_LT(max_diff(kernels::one_query_context(p, v), kernels::one_query_context_reference(p, v)), 1e-6);
    auto qd = q.to(torch::kDouble), kd = torch::randn({3, 2, 5, 8}, torch::kDouble);
    EXPECT_LT(max_diff(kernels::one_query_scores(qd, kd), kernels::one_query_scores_reference(qd, kd)), 1e-12);
  }
  auto qg = torch::randn({3, 2, 1, 8}, torch::requires_grad()), kg = torch::randn({3, 2, 5, 8});
  kernels::one_query_scores(qg, kg).sum().backward();
  ASSERT_TRUE(qg.grad().defined());
  EXPECT_LT(max_diff(qg.grad(), kg.sum(2, true)), 1e-5);
}

// The whole step in one pass against the composite (scaled scores, additive mask with -inf at pads,
// softmax, context with the heads side by side), with keys, values and mask shared by groups of
// rows, and without a mask.
TEST(OneQueryAttention, TheFusedStepEqualsTheComposite) {
  torch::manual_seed(14);
  torch::NoGradGuard no_grad;
  const int64_t B = 6, H = 4, d = 16, S = 9;
  auto q = torch::randn({B, 1, H, d}).transpose(1, 2);
  for (int64_t group : {1, 3}) {
    auto k = torch::randn({B / group, H, S, d}), v = torch::randn({B / group, H, S, d});
    auto mask = torch::zeros({B / group, 1, 1, S});
    mask[0][0][0][S - 1] = -std::numeric_limits<float>::infinity();
    for (bool masked : {false, true}) {
      auto m = masked ? mask : torch::Tensor();
      ASSERT_TRUE(kernels::one_query_attention_applies(q, k, v, m));
      auto [context, probs] = kernels::one_query_attention(q, k, v, m, 0.25);
      auto kr = k.repeat_interleave(group, 0), vr = v.repeat_interleave(group, 0);
      auto scores = kernels::one_query_scores_reference(q * 0.25, kr);
      if (masked) scores = scores + mask.repeat_interleave(group, 0);
      auto want_probs = torch::softmax(scores, -1);
      auto want_context = kernels::one_query_context_reference(want_probs, vr).transpose(1, 2).reshape({B, 1, H * d});
      EXPECT_LT(max_diff(probs, want_probs), 1e-6) << group << masked;
      EXPECT_LT(max_diff(context, want_context), 1e-5) << group << masked;
      if (masked) {
        EXPECT_EQ(probs[group - 1][2][0][S - 1].item<float>(), 0.f) << "a padded key gets nothing";
      }
    }
  }
  auto wrong_mask = torch::zeros({B, 1, 2, S});
  auto k = torch::randn({B, H, S, d});
  EXPECT_FALSE(kernels::one_query_attention_applies(q, k, k, wrong_mask));
}

// Keys and values read through origin tables (a self-attention cache reordered without moving its
// rows): the same floats as the kernel over the rows gathered in order, with more stored rows
// than queries, rows that change from one position to the next, and separate tables for k and v.
TEST(OneQueryAttention, KeysAndValuesThroughOriginTablesEqualTheGatheredRows) {
  torch::manual_seed(15);
  torch::NoGradGuard no_grad;
  const int64_t B = 4, P = 6, H = 2, d = 8, S = 5;
  auto q = torch::randn({B, H, 1, d});
  auto k = torch::randn({P, H, S, d}), v = torch::randn({P, H, S, d});
  auto k_origin = torch::randint(0, P, {B, S}, torch::kLong), v_origin = torch::randint(0, P, {B, S}, torch::kLong);
  auto gather = [&](const torch::Tensor& t, const torch::Tensor& origin) {
    auto out = torch::empty({B, H, S, d});
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t s = 0; s < S; ++s) out[b].select(1, s).copy_(t[origin[b][s].item<int64_t>()].select(1, s));
    }
    return out;
  };
  auto mask = torch::zeros({B, 1, 1, S});
  mask[1][0][0][0] = -std::numeric_limits<float>::infinity();
  ASSERT_TRUE(kernels::one_query_attention_applies(q, k, v, mask, k_origin, v_origin));
  auto [context, probs] = kernels::one_query_attention(q, k, v, mask, 0.5, k_origin, v_origin);
  auto [want_context, want_probs] = kernels::one_query_attention(q, gather(k, k_origin), gather(v, v_origin), mask, 0.5);
  EXPECT_TRUE(torch::equal(probs, want_probs));
  EXPECT_TRUE(torch::equal(context, want_context));
  // The weighted sum alone (a layer that reuses another's attention distribution).
  auto through = kernels::one_query_context(probs, v, v_origin);
  ASSERT_TRUE(through.defined());
  EXPECT_TRUE(torch::equal(through, kernels::one_query_context(probs, gather(v, v_origin))));
  EXPECT_FALSE(kernels::one_query_context(probs, v, v_origin.narrow(0, 0, B - 1)).defined());
  EXPECT_FALSE(kernels::one_query_attention_applies(q, k, v, mask, k_origin, {})) << "both tables or neither";
  EXPECT_FALSE(kernels::one_query_attention_applies(q, k, v, mask, k_origin.narrow(1, 0, S - 1), v_origin));
}

// Heads of 64 numbers on AVX-512: the same bits as the general loops, for every number of keys
// around a multiple of the 16 summed together, masked pads, beams sharing keys, and rows read
// through origin tables; the weighted sum alone too.
TEST(OneQueryAttention, HeadsOf64TakeTheGeneralLoopsBits) {
  if (!kernels::heads_of_64_loops_available()) GTEST_SKIP() << "this CPU has no AVX-512";
  torch::manual_seed(16);
  torch::NoGradGuard no_grad;
  struct Restore {
    ~Restore() { kernels::use_heads_of_64_loops(true); }
  } restore;
  const int64_t B = 10, H = 4, d = 64, P = 7;
  for (int64_t S : {1, 2, 5, 15, 16, 17, 30, 32, 33, 47}) {
    auto q = torch::randn({B, 1, H, d}).transpose(1, 2) * 3;  // strided, as a projection passes it
    auto k = torch::randn({B / 5, H, S, d}), v = torch::randn({B / 5, H, S, d});
    auto mask = torch::zeros({B / 5, 1, 1, S});
    mask.select(3, S - 1).fill_(-std::numeric_limits<float>::infinity());
    auto table_k = torch::randn({P, H, S, d}), table_v = torch::randn({P, H, S, d});
    auto origin = torch::randint(0, P, {B, S}, torch::kLong);
    std::vector<torch::Tensor> got[2];
    for (bool on : {false, true}) {
      kernels::use_heads_of_64_loops(on);
      auto [context, probs] = kernels::one_query_attention(q, k, v, S > 1 ? mask : torch::Tensor(), 0.125);
      auto [t_context, t_probs] = kernels::one_query_attention(q, table_k, table_v, {}, 0.125, origin, origin);
      got[on] = {context, probs, t_context, t_probs, kernels::one_query_scores(q, k),
                 kernels::one_query_context(probs, v), kernels::one_query_context(t_probs, table_v, origin)};
    }
    for (size_t i = 0; i < got[0].size(); ++i) {
      ASSERT_TRUE(got[0][i].defined() && got[1][i].defined()) << S << " keys, output " << i;
      EXPECT_TRUE(torch::equal(got[0][i], got[1][i])) << S << " keys, output " << i;
    }
  }
}

// Rows that share keys and values (a sentence's beams over its source) are taken together, up to
// five at a time: each row's probabilities and context are the same bits as when it has its own
// copy of the keys and values, for groups that are and are not a multiple of five, numbers of keys
// on both sides of a block of 16, with and without a mask, on one thread and on two.
TEST(OneQueryAttention, RowsSharingKeysGetTheBitsOfTheirOwnCopies) {
  torch::manual_seed(17);
  torch::NoGradGuard no_grad;
  const int64_t H = 4, d = 64, sources = 3;
  const int before = torch::get_num_threads();
  for (int64_t group : {2, 4, 5, 7, 12}) {
    const int64_t B = sources * group;
    for (int64_t S : {3, 9, 16, 21, 40}) {
      auto q = torch::randn({B, 1, H, d}).transpose(1, 2) * 3;
      auto k = torch::randn({sources, H, S, d}), v = torch::randn({sources, H, S, d});
      auto mask = torch::zeros({sources, 1, 1, S});
      mask[1].select(2, S - 1).fill_(-std::numeric_limits<float>::infinity());
      for (bool masked : {false, true}) {
        const auto m = masked ? mask : torch::Tensor();
        auto [want_context, want_probs] = kernels::one_query_attention(
            q, k.repeat_interleave(group, 0), v.repeat_interleave(group, 0),
            masked ? mask.repeat_interleave(group, 0) : torch::Tensor(), 0.125);
        for (int threads : {1, 2}) {
          set_compute_threads(threads);
          auto [context, probs] = kernels::one_query_attention(q, k, v, m, 0.125);
          ASSERT_TRUE(context.defined());
          EXPECT_TRUE(torch::equal(probs, want_probs)) << group << " rows, " << S << " keys, mask " << masked;
          EXPECT_TRUE(torch::equal(context, want_context)) << group << " rows, " << S << " keys, mask " << masked;
        }
        set_compute_threads(before);
      }
    }
  }
}

// Keys and values in bfloat16 (an int8 model's caches): the kernel widens each number as it loads
// it, so its probabilities and context are the bits of the float32 kernel over the widened
// numbers, for heads of 64 and other widths, numbers of keys on both sides of a block of 16, rows
// sharing keys, rows through origin tables, and a mask; with the AVX-512 loops and without.
TEST(OneQueryAttention, Bfloat16KeysAndValuesGetTheBitsOfTheirWidenedNumbers) {
  torch::manual_seed(18);
  torch::NoGradGuard no_grad;
  struct Restore {
    ~Restore() { kernels::use_heads_of_64_loops(true); }
  } restore;
  const int64_t H = 4, sources = 2, group = 5, B = sources * group, P = 7;
  for (bool fast : {true, false}) {
    kernels::use_heads_of_64_loops(fast);
    for (int64_t d : {64, 24}) {
      for (int64_t S : {1, 5, 9, 16, 17, 33}) {
        auto q = torch::randn({B, 1, H, d}).transpose(1, 2) * 3;
        auto bf16 = [](std::vector<int64_t> sizes) { return torch::randn(sizes).to(torch::kBFloat16); };
        auto k = bf16({sources, H, S, d}), v = bf16({sources, H, S, d});
        auto tk = bf16({P, H, S, d}), tv = bf16({P, H, S, d});
        auto origin = torch::randint(0, P, {B, S}, torch::kLong);
        auto mask = torch::zeros({sources, 1, 1, S});
        mask[1].select(2, S - 1).fill_(-std::numeric_limits<float>::infinity());
        auto f = [](const torch::Tensor& t) { return t.to(torch::kFloat); };
        const std::string at = std::to_string(d) + " wide, " + std::to_string(S) + " keys, AVX-512 loops " +
                               std::to_string(fast);
        struct Case {
          const char* name;
          torch::Tensor k, v, mask, origin;
        };
        const std::vector<Case> cases = {
            {"shared", k, v, S > 1 ? mask : torch::Tensor(), {}},
            {"per row", k.repeat_interleave(group, 0), v.repeat_interleave(group, 0), {}, {}},
            {"through tables", tk, tv, {}, origin}};
        for (const auto& c : cases) {
          ASSERT_TRUE(kernels::one_query_attention_applies(q, c.k, c.v, c.mask, c.origin, c.origin)) << c.name;
          auto [context, probs] = kernels::one_query_attention(q, c.k, c.v, c.mask, 0.125, c.origin, c.origin);
          auto [want_context, want_probs] =
              kernels::one_query_attention(q, f(c.k), f(c.v), c.mask, 0.125, c.origin, c.origin);
          ASSERT_TRUE(context.defined() && want_context.defined()) << c.name << ", " << at;
          EXPECT_TRUE(torch::equal(probs, want_probs)) << c.name << ", " << at;
          EXPECT_TRUE(torch::equal(context, want_context)) << c.name << ", " << at;
        }
        EXPECT_FALSE(kernels::one_query_attention_applies(q, k, f(v), {})) << "keys and values of one type";
      }
    }
  }
}
