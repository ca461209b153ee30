// The one-pass updates of train/adam.h and train/nag.h against the composite forms they replace.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "leanseq/core/threads.h"
#include "leanseq/train/adam.h"
#include "leanseq/train/nag.h"
#include "support/fixtures.h"

using namespace leanseq;
using namespace leanseq::train;

namespace {

// Parameters of awkward sizes (a scalar, odd lengths, one larger than a thread's share) and
// values, with gradients set by hand.
std::vector<torch::Tensor> make_params(torch::Dtype dtype, uint64_t seed) {
  torch::manual_seed(static_cast<int64_t>(seed));
  std::vector<torch::Tensor> ps;
  for (auto shape : std::vector<std::vector<int64_t>>{{}, {7}, {33, 5}, {3, 1000, 97}, {2, 3}}) {
    ps.push_back((torch::randn(shape, torch::kDouble) * 0.5).to(dtype).requires_grad_(true));
  }
  ps[4].detach().mul_(1e4);  // large weights, for the weight decay's term
  return ps;
}

void set_grads(std::vector<torch::Tensor>& ps, int step) {
  torch::manual_seed(1000 + step);
  for (size_t i = 0; i < ps.size(); ++i) {
    auto g = torch::randn(ps[i].sizes(), torch::kDouble);
    if (i == 2) g.mul_(1e-7);  // gradients near eps's scale
    if (i == 3) g.view(-1).slice(0, 0, 100).mul_(300);  // outliers
    ps[i].mutable_grad() = g.to(ps[i].scalar_type());
  }
  if (step == 2) ps[1].mutable_grad() = torch::Tensor();  // a parameter without a gradient this step
}

// How far a is from b beyond a relative tolerance of 1e-5 of b, in units of b's largest magnitude
// (at least 1): float32 against float64 rounding, where values that cancel to near zero keep the
// absolute error of the terms that cancelled.
double error_beyond_relative(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  const double scale = std::max(1.0, bd.abs().max().item<double>());
  return ((ad - bd).abs() - 1e-5 * bd.abs()).max().item<double>() / scale;
}

}  // namespace

TEST(Optimizer, AdamInOnePassFollowsTorchsAdam) {
  for (double wd : {0.0, 0.01}) {
    auto mine = make_params(torch::kFloat, 1), ref = make_params(torch::kDouble, 1);
    auto opts = torch::optim::AdamOptions(1e-3).betas({0.9, 0.98}).eps(1e-8).weight_decay(wd);
    Adam fused(mine, opts);
    torch::optim::Adam reference(ref, opts);
    int64_t one_pass = 0;
    for (int step = 0; step < 6; ++step) {
      const double lr = 1e-3 * (step + 1);  // the learning rate changes every update, as under warm-up
      fused.param_groups()[0].options().set_lr(lr);
      reference.param_groups()[0].options().set_lr(lr);
      set_grads(mine, step);
      set_grads(ref, step);
      one_pass += test::calls_of("leanseq::adam_update", [&] { fused.step(); });
      reference.step();
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_LT(error_beyond_relative(mine[i].detach(), ref[i].detach()), 1e-6) << "wd " << wd << " step " << step << " param " << i;
      }
    }
    EXPECT_EQ(one_pass, 6);
    // Written as an in-place operator writes: each update counts as a modification (caches keyed
    // on the version, such as weight normalisation's at inference, see it).
    EXPECT_EQ(mine[0]._version(), ref[0]._version()) << "wd " << wd;
    EXPECT_GT(mine[0]._version(), 0);
  }
}

TEST(Optimizer, AdamsOnePassStateIsTorchsState) {
  // A checkpoint's optimizer state moves between the two classes unchanged: the same keys, steps
  // and moments.
  auto a = make_params(torch::kFloat, 2), b = make_params(torch::kFloat, 2);
  Adam fused(a, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam reference(b, torch::optim::AdamOptions(1e-2));
  for (int step = 0; step < 3; ++step) {
    set_grads(a, step);
    set_grads(b, step);
    fused.step();
    reference.step();
  }
  std::stringstream saved;
  {
    torch::serialize::OutputArchive ar;
    fused.save(ar);
    ar.save_to(saved);
  }
  auto c = make_params(torch::kFloat, 2);
  torch::optim::Adam restored(c, torch::optim::AdamOptions(1e-2));
  torch::serialize::InputArchive in;
  in.load_from(saved);
  restored.load(in);
  // One more step from the saved state, by torch's Adam, against the fused run's own next step.
  for (size_t i = 0; i < c.size(); ++i) c[i].detach().copy_(a[i].detach());
  set_grads(a, 3);
  set_grads(c, 3);
  fused.step();
  restored.step();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_LT(error_beyond_relative(a[i].detach(), c[i].detach()), 1e-6) << i;
}

TEST(Optimizer, AdamKeepsTheCompositeWhereOnePassDoesNotApply) {
  // float64 parameters: the base class's update, exactly torch's.
  auto mine = make_params(torch::kDouble, 3), ref = make_params(torch::kDouble, 3);
  Adam fused(mine, torch::optim::AdamOptions(1e-3));
  torch::optim::Adam reference(ref, torch::optim::AdamOptions(1e-3));
  set_grads(mine, 0);
  set_grads(ref, 0);
  EXPECT_EQ(test::calls_of("leanseq::adam_update", [&] { fused.step(); }), 0);
  reference.step();
  for (size_t i = 0; i < mine.size(); ++i) EXPECT_TRUE(torch::equal(mine[i], ref[i])) << i;
}

TEST(Optimizer, NagInOnePassEqualsTheComposite) {
  // float32 parameters take the one-pass update; float64 ones the composite (NagFollowsFairseqsUpdate
  // checks that against fairseq's formula). With the learning rate changing between updates.
  for (double wd : {0.0, 0.1}) {
    auto mine = make_params(torch::kFloat, 4), ref = make_params(torch::kDouble, 4);
    NAG fused(mine, 0.25, 0.99, wd), reference(ref, 0.25, 0.99, wd);
    int64_t one_pass = 0;
    for (int step = 0; step < 5; ++step) {
      const double lr = 0.25 / (1 + step);
      for (auto* o : {&fused, &reference}) o->param_groups()[0].options().set_lr(lr);
      set_grads(mine, step);
      set_grads(ref, step);
      one_pass += test::calls_of("leanseq::nag_update", [&] { fused.step(); });
      reference.step();
      for (size_t i = 0; i < mine.size(); ++i) {
        EXPECT_LT(error_beyond_relative(mine[i].detach(), ref[i].detach()), 1e-6) << "wd " << wd << " step " << step << " param " << i;
      }
    }
    EXPECT_EQ(one_pass, 5);
    EXPECT_GE(mine[0]._version(), 5) << "wd " << wd;
  }
}

TEST(Optimizer, OnePassUpdatesDoNotDependOnTheThreadCount) {
  auto one = make_params(torch::kFloat, 5), two = make_params(torch::kFloat, 5);
  Adam a(one, torch::optim::AdamOptions(1e-2)), b(two, torch::optim::AdamOptions(1e-2));
  const int64_t before = compute_threads();
  set_compute_threads(1);
  set_grads(one, 0);
  a.step();
  set_compute_threads(2);
  set_grads(two, 0);
  b.step();
  set_compute_threads(before);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(torch::equal(one[i], two[i])) << i;
}

TEST(Optimizer, AdamsClosureRunsBeforeTheUpdateIsChosen) {
  // No gradient before step(): the closure computes them, and the one pass then applies.
  auto p = torch::tensor({1.0f, -2.0f, 3.0f}).requires_grad_(true);
  auto q = torch::tensor({1.0, -2.0, 3.0}, torch::kDouble).requires_grad_(true);
  Adam fused({p}, torch::optim::AdamOptions(0.1));
  torch::optim::Adam reference({q}, torch::optim::AdamOptions(0.1));
  torch::Tensor loss;
  EXPECT_EQ(test::calls_of("leanseq::adam_update", [&] {
              loss = fused.step([&] {
                fused.zero_grad();
                auto l = (p * p).sum();
                l.backward();
                return l;
              });
            }),
            1);
  EXPECT_FLOAT_EQ(loss.item<float>(), 14.0f);
  reference.step([&] {
    reference.zero_grad();
    auto l = (q * q).sum();
    l.backward();
    return l;
  });
  EXPECT_LT(error_beyond_relative(p.detach(), q.detach()), 1e-6);
}

TEST(Optimizer, AGradientFactorActsAsGradientsDividedBeforehand) {
  // The trainer's normalisation by the update's weight, done inside the update, against dividing
  // the gradients first; in the one pass (float32) and the composite (float64) of both optimizers.
  // The factor holds for one step: the last step below asks for none, and the gradients are used
  // as they are.
  const double weight = 37;
  auto run = [&](torch::Dtype dtype, bool nag, bool in_update) {
    auto ps = make_params(dtype, 6);
    std::unique_ptr<torch::optim::Optimizer> o;
    if (nag) {
      o = std::make_unique<NAG>(ps, 0.25, 0.99, 0.1);
    } else {
      o = std::make_unique<Adam>(ps, torch::optim::AdamOptions(1e-2).weight_decay(0.01));
    }
    for (int step = 0; step < 4; ++step) {
      set_grads(ps, step);
      if (step < 3) {
        if (in_update) {
          dynamic_cast<GradientFactor&>(*o).multiply_gradients_at_next_step(1 / weight);
        } else {
          for (auto& p : ps) {
            if (p.grad().defined()) p.mutable_grad().div_(weight);
          }
        }
      }
      o->step();
    }
    return ps;
  };
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    for (bool nag : {false, true}) {
      auto inside = run(dtype, nag, true), before = run(dtype, nag, false);
      for (size_t i = 0; i < inside.size(); ++i) {
        EXPECT_LT(error_beyond_relative(inside[i].detach(), before[i].detach()), 1e-6)
            << (nag ? "NAG " : "Adam ") << dtype << " param " << i;
      }
    }
  }
}

TEST(Optimizer, ClearedGradientsAreUndefinedUntilABackwardGivesOne) {
  auto used = torch::tensor({1.0f, 2.0f}).requires_grad_(true);
  auto unused = torch::tensor({5.0f}).requires_grad_(true);
  used.mutable_grad() = torch::full({2}, 9.0f);
  unused.mutable_grad() = torch::full({1}, 9.0f);
  clear_gradients({used, unused});
  EXPECT_FALSE(used.grad().defined());
  EXPECT_FALSE(unused.grad().defined());
  (used * 3).sum().backward();  // the first gradient, as it is
  (used * used).sum().backward();  // the next ones add to it
  EXPECT_TRUE(torch::equal(used.grad(), torch::tensor({5.0f, 7.0f})));
  EXPECT_FALSE(unused.grad().defined());
  // Adam leaves a parameter without a gradient alone, as fairseq's does.
  Adam adam({used, unused}, torch::optim::AdamOptions(0.1));
  adam.step();
  EXPECT_TRUE(torch::equal(unused, torch::tensor({5.0f})));
  EXPECT_FALSE(torch::equal(used, torch::tensor({1.0f, 2.0f})));
}
