#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>

#include "leanseq/checkpoint/file.h"
#include "leanseq/checkpoint/model.h"
#include "leanseq/checkpoint/run_config.h"
#include "leanseq/core/error.h"
#include <leanseq/version.h>
#include "leanseq/data/prepare.h"
#include "leanseq/kernels/int8_gemm.h"
#include "leanseq/models/registry.h"
#include "leanseq/train/criterion.h"
#include "leanseq/train/lr_schedule.h"
#include "leanseq/train/mixed_precision.h"
#include "leanseq/train/nag.h"
#include "leanseq/train/trainer.h"
#include "support/fixtures.h"

using namespace leanseq;
using namespace leanseq::train;

TEST(Criterion, ReproducesFairseqLabelSmoothedNllLoss) {
  LEANSEQ_REQUIRE_FIXTURE("label_smoothed_nll_loss_eps0.1", fx);
  auto lp = fx.inputs["lprobs"], t = fx.inputs["target"];
  auto r = label_smoothed_nll_loss(lp, t, 0.1, 1);
  EXPECT_NEAR(r.loss.item<double>(), fx.outputs["loss"].item<double>(), 1e-4);
  EXPECT_NEAR(r.nll_loss.item<double>(), fx.outputs["nll_loss"].item<double>(), 1e-4);
  auto u = label_smoothed_nll_loss_per_token(lp, t, 0.1, 1);
  EXPECT_LT(test::max_abs_diff(u.loss, fx.outputs["loss_unreduced"].view(-1)), 1e-5);
  EXPECT_LT(test::max_abs_diff(u.nll_loss, fx.outputs["nll_loss_unreduced"].view(-1)), 1e-5);
}

TEST(LrSchedule, ReproducesFairseqInverseSqrt) {
  LEANSEQ_REQUIRE_FIXTURE("lr_inverse_sqrt", fx);
  checkpoint::LrScheduleOptions o;
  o.lr = 5e-4;
  o.warmup_updates = 4000;
  o.warmup_init_lr = 1e-7;
  auto n = fx.inputs["num_updates"], lr = fx.outputs["lr"];
  for (int64_t i = 0; i < n.size(0); ++i) {
    EXPECT_NEAR(learning_rate(o, {n[i].item<int64_t>()}), lr[i].item<double>(), 1e-15) << n[i].item<int64_t>();
  }
}

TEST(LrSchedule, FixedShrinksOnPlateauAndAnneals) {
  checkpoint::LrScheduleOptions o;
  o.kind = "fixed";
  o.lr = 0.25;
  o.warmup_updates = 0;
  o.lr_shrink = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(o, {100, 3, 0}), 0.25);
  EXPECT_NEAR(learning_rate(o, {100, 3, 2}), 0.0025, 1e-15);
  o.force_anneal = 5;  // fairseq: lr * shrink^(epoch + 1 - force_anneal) from that epoch on
  EXPECT_DOUBLE_EQ(learning_rate(o, {100, 4, 0}), 0.25);
  EXPECT_NEAR(learning_rate(o, {100, 5, 0}), 0.025, 1e-15);
  EXPECT_NEAR(learning_rate(o, {100, 6, 1}), 0.25 * 1e-3, 1e-15);
}

TEST(Optimizer, NagFollowsFairseqsUpdate) {
  // Two steps by hand: fairseq's NAG with momentum 0.99, weight decay 0.1, lr 0.5 then 0.25.
  auto p = torch::tensor({1.0, -2.0}, torch::kDouble).requires_grad_(true);
  NAG nag({p}, 0.5, 0.99, 0.1);
  auto expect_p = p.detach().clone(), buf = torch::zeros({2}, torch::kDouble);
  double lr_old = 0.5;
  for (double lr : {0.5, 0.25}) {
    for (auto& g : nag.param_groups()) g.options().set_lr(lr);
    nag.zero_grad();
    (p * p).sum().backward();
    auto grad = 2 * p.detach();
    nag.step();
    const double c = lr / lr_old, m = 0.99;
    expect_p = expect_p * (1 - lr * 0.1) + m * m * c * buf - (1 + m) * lr * grad;
    buf = m * c * buf - lr * grad;
    lr_old = lr;
    EXPECT_LT(test::max_abs_diff(p.detach(), expect_p), 1e-12);
  }
}

namespace {
// Writes a tiny parallel corpus (a word substitution cipher) and prepares it.
std::string tiny_data(const std::string& dir) {
  auto write = [&](const std::string& name, int n, int seed) {
    std::ofstream s(dir + "/" + name + ".xx"), t(dir + "/" + name + ".yy");
    for (int i = 0; i < n; ++i) {
      for (int k = 0; k < 3 + (i + seed) % 4; ++k) {
        int w = (i * 7 + k * 5 + seed) % 12;
        s << (k ? " " : "") << "s" << w;
        t << (k ? " " : "") << "t" << w;
      }
      s << "\n", t << "\n";
    }
  };
  write("train", 200, 0);
  write("valid", 20, 3);
  data::PrepareOptions po;
  po.src_lang = "xx", po.tgt_lang = "yy";
  po.train = dir + "/train", po.valid = dir + "/valid";
  po.out_dir = dir + "/bin";
  po.vocab_size = 40;
  data::prepare(po);
  return po.out_dir;
}

checkpoint::RunConfig tiny_config(const std::string& data, const std::string& save_dir, int64_t max_update,
                      const std::vector<std::string>& extra = {}) {
  ConfigValues v = parse_assignments(extra, "test");
  v.set("arch", "transformer_tiny", "test");
  v.set("data", data, "test");
  v.set("save_dir", save_dir, "test");
  v.set("stop.max_update", std::to_string(max_update), "test");
  v.set("model.dropout", "0.1", "test");  // exercises the RNG state on resume
  v.set("batch.max_tokens", "200", "test");
  v.set("optim.warmup_updates", "5", "test");
  v.set("optim.lr", "0.002", "test");
  v.set("log.format", "text", "test");
  return checkpoint::resolve_run_config(v);
}
}  // namespace

TEST(Trainer, ResumeContinuesExactly) {
  auto dir = test::temp_dir("resume");
  auto data = tiny_data(dir);
  {
    Trainer t(tiny_config(data, dir + "/straight", 12), false);
    EXPECT_EQ(t.run().num_updates, 12);
  }
  {
    Trainer t(tiny_config(data, dir + "/split", 5), false);
    EXPECT_EQ(t.run().num_updates, 5);
  }
  {
    Trainer t(tiny_config(data, dir + "/split", 12), true);
    EXPECT_EQ(t.run().num_updates, 12);
  }
  auto a = checkpoint::read_checkpoint(dir + "/straight/checkpoint_last.pt");
  auto b = checkpoint::read_checkpoint(dir + "/split/checkpoint_last.pt");
  ASSERT_EQ(a.model_tensors.size(), b.model_tensors.size());
  for (const auto& [k, v] : a.model_tensors) {
    EXPECT_LT(test::max_abs_diff(v, b.model_tensors[k]), 1e-6) << k;
  }
  EXPECT_EQ(a.progress.num_updates, 12);
  EXPECT_EQ(b.progress.batch_in_epoch, a.progress.batch_in_epoch);
}

TEST(Checkpoint, RebuildsTheModelAndRejectsTruncatedFiles) {
  auto dir = test::temp_dir("ckpt");
  auto data = tiny_data(dir);
  Trainer t(tiny_config(data, dir + "/ck", 3,
                        {"checkpoint.save_interval_updates=1", "checkpoint.keep_interval_updates=2"}),
            false);
  t.run();
  // Every update saved checkpoint_<epoch>_<update>.pt; only the last two are kept.
  EXPECT_FALSE(std::filesystem::exists(dir + "/ck/checkpoint_1_1.pt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/ck/checkpoint_1_2.pt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/ck/checkpoint_1_3.pt"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/ck/checkpoint_best.pt"));
  auto loaded = checkpoint::load_model(dir + "/ck/checkpoint_last.pt");
  EXPECT_EQ(loaded.arch, "transformer_tiny");
  EXPECT_EQ(checkpoint::read_checkpoint(dir + "/ck/checkpoint_last.pt").writer, std::string("leanseq ") + kVersion);
  EXPECT_EQ(loaded.src_vocab_size, loaded.tgt_vocab_size);
  std::string path = dir + "/ck/checkpoint_last.pt";
  std::filesystem::copy_file(path, dir + "/trunc.pt");
  std::filesystem::resize_file(dir + "/trunc.pt", std::filesystem::file_size(path) / 2);
  try {
    checkpoint::load_model(dir + "/trunc.pt");
    FAIL();
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/trunc.pt: cannot read checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_THROW(checkpoint::load_model(dir + "/missing.pt"), CheckpointError);
}

TEST(MixedPrecision, TheLossScaleHalvesOnOverflowDoublesAfterAWindowAndHasAFloor) {
  LossScale s(128, 3, 16);
  s.update(false), s.update(false);
  EXPECT_EQ(s.value(), 128);
  s.update(false);
  EXPECT_EQ(s.value(), 256);  // three good updates in a row
  s.update(false), s.update(false), s.update(true);
  EXPECT_EQ(s.value(), 128);  // an overflow halves it and restarts the count
  s.update(false), s.update(false);
  EXPECT_EQ(s.value(), 128);
  s.update(true), s.update(true), s.update(true);
  EXPECT_EQ(s.value(), 16);
  EXPECT_THROW(s.update(true), Error);  // 8 is under the floor
}

TEST(MixedPrecision, ARestoredLossScaleGoesOnAsTheSavedOneWould) {
  LossScale a(128, 3, 16);
  a.update(false), a.update(true), a.update(false), a.update(false);  // 64, two good updates in a row
  LossScale b(128, 3, 16);
  b.restore(a.value(), a.good_updates());
  EXPECT_EQ(b.value(), 64);
  for (bool overflow : {false, false, false, true, false}) {
    a.update(overflow), b.update(overflow);
    EXPECT_EQ(b.value(), a.value());  // the third good update doubles both, not three more
    EXPECT_EQ(b.good_updates(), a.good_updates());
  }
  EXPECT_THROW(b.restore(0, 1), Error);
  EXPECT_THROW(b.restore(std::numeric_limits<double>::quiet_NaN(), 0), Error);
  EXPECT_THROW(b.restore(8, -1), Error);
}

TEST(MixedPrecision, CheckpointsKeepTheLossScaleAndOlderOnesHaveNone) {
  const auto dir = test::temp_dir("amp_checkpoint");
  auto model = models::build_model(*models::registry().preset_config("transformer_tiny"), {40, 40, true});
  checkpoint::TrainerProgress progress;
  progress.num_updates = 12;
  checkpoint::save_checkpoint(dir + "/none.pt", "arch: transformer_tiny\n", {}, progress, *model, nullptr);
  progress.loss_scale = 512;
  progress.loss_scale_good_updates = 7;
  checkpoint::save_checkpoint(dir + "/scaled.pt", "arch: transformer_tiny\n", {}, progress, *model, nullptr);
  const auto none = checkpoint::read_checkpoint(dir + "/none.pt"), scaled = checkpoint::read_checkpoint(dir + "/scaled.pt");
  EXPECT_TRUE(std::isnan(none.progress.loss_scale));
  EXPECT_EQ(scaled.progress.loss_scale, 512);
  EXPECT_EQ(scaled.progress.loss_scale_good_updates, 7);
  EXPECT_EQ(scaled.progress.num_updates, 12);
  // Written before the loss scale was kept: none.
  const auto old = checkpoint::read_checkpoint(
      test::tests_path("fixtures/pre_engine/seq2seq/checkpoint_last.pt"));
  EXPECT_TRUE(std::isnan(old.progress.loss_scale));
  EXPECT_EQ(old.progress.loss_scale_good_updates, 0);
}

TEST(MixedPrecision, OffOrBfloat16OnlyDividesAndFloat16OnTheCpuIsRefused) {
  for (const std::string dtype : {"", "bfloat16"}) {
    MixedPrecision mp(dtype, false, 128, 10, 1e-4);
    auto w = torch::ones({3}, torch::requires_grad());
    mp.scale_loss((w * 4).sum()).backward();
    EXPECT_TRUE(mp.unscale({w}, 2.0));
    EXPECT_TRUE(torch::allclose(w.grad(), torch::full({3}, 2.0))) << dtype;
  }
  auto dir = test::temp_dir("amp_cpu");
  try {
    tiny_config(dir, dir + "/ck", 1, {"optim.amp=float16"});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optim.amp: float16 trains on CUDA only (device is cpu)"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(tiny_config(dir, dir + "/ck", 1, {"optim.amp=bfloat16"}));
  EXPECT_THROW(tiny_config(dir, dir + "/ck", 1, {"optim.amp=int8", "device=cuda"}), ConfigError);
}

TEST(MixedPrecision, CudaUnscalesInOnePassAndSkipsAnOverflowingUpdate) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  MixedPrecision mp("float16", true, 128, 2000, 1e-4);
  auto w = torch::ones({4}, torch::TensorOptions().device(torch::kCUDA).requires_grad(true));
  mp.scale_loss((w * 2).sum()).backward();  // gradients 2 x 128
  EXPECT_TRUE(mp.unscale({w}, 2.0));
  EXPECT_TRUE(torch::allclose(w.grad().cpu(), torch::ones({4}))) << w.grad();
  w.mutable_grad().fill_(1.0);
  w.mutable_grad()[2] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(mp.unscale({w}, 1.0));
  EXPECT_EQ(mp.scale(), 64);
}

TEST(MixedPrecision, TrainsOnCudaInFloat16AndBfloat16CloseToFloat32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto dir = test::temp_dir("amp_cuda");
  auto data = tiny_data(dir);
  auto run = [&](const std::string& amp) {
    std::vector<std::string> extra{"device=cuda"};
    if (!amp.empty()) extra.push_back("optim.amp=" + amp);
    Trainer t(tiny_config(data, dir + "/run_" + amp, 60, extra), false);
    return t.run();
  };
  const auto f32 = run(""), f16 = run("float16"), bf16 = run("bfloat16");
  EXPECT_EQ(f16.num_updates, 60);
  EXPECT_EQ(bf16.num_updates, 60);
  // From one seed on one batch order, the three runs end near each other.
  std::cout << "valid loss after 60 updates: float32 " << f32.last_valid_loss << ", float16 " << f16.last_valid_loss
            << ", bfloat16 " << bf16.last_valid_loss << "\n";
  EXPECT_NEAR(f16.last_valid_loss, f32.last_valid_loss, 0.05 * f32.last_valid_loss);
  EXPECT_NEAR(bf16.last_valid_loss, f32.last_valid_loss, 0.1 * f32.last_valid_loss);
}

TEST(MixedPrecision, AResumedFloat16RunGoesOnWithTheSavedLossScale) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto dir = test::temp_dir("amp_cuda_resume");
  auto data = tiny_data(dir);
  const std::vector<std::string> extra{"device=cuda", "optim.amp=float16", "optim.amp_scale_window=4"};
  Trainer(tiny_config(data, dir + "/ck", 10, extra), false).run();
  const auto saved = checkpoint::read_checkpoint(dir + "/ck/checkpoint_last.pt").progress;
  ASSERT_FALSE(std::isnan(saved.loss_scale));
  EXPECT_NE(saved.loss_scale, 128);  // moved from optim.amp_init_scale: doubled every 4 good updates
  Trainer(tiny_config(data, dir + "/ck", 11, extra), true).run();
  const auto after = checkpoint::read_checkpoint(dir + "/ck/checkpoint_last.pt").progress;
  EXPECT_EQ(after.num_updates, 11);
  // One update on from the saved scale (kept, doubled or halved), not from 128 again.
  EXPECT_TRUE(after.loss_scale == saved.loss_scale || after.loss_scale == 2 * saved.loss_scale ||
              after.loss_scale == saved.loss_scale / 2)
      << "saved " << saved.loss_scale << ", after one more update " << after.loss_scale;
}

TEST(MixedPrecision, TrainsOnTheCpuInBfloat16CloseToFloat32) {
  if (!kernels::onednn_cpu_support().avx512bf16) {
    GTEST_SKIP() << "no AVX512_BF16 (or oneDNN capped below it): bfloat16 training falls back to float32";
  }
  auto dir = test::temp_dir("amp_cpu_bf16");
  auto data = tiny_data(dir);
  auto run = [&](const std::string& amp) {
    std::vector<std::string> extra;
    if (!amp.empty()) extra.push_back("optim.amp=" + amp);
    Trainer t(tiny_config(data, dir + "/run_" + amp, 40, extra), false);
    return t.run();
  };
  const auto f32 = run(""), bf16 = run("bfloat16");
  EXPECT_EQ(bf16.num_updates, 40);
  std::cout << "valid loss after 40 updates: float32 " << f32.last_valid_loss << ", bfloat16 " << bf16.last_valid_loss
            << "\n";
  // The products really ran in bfloat16: the runs differ, but not by much.
  EXPECT_NE(bf16.last_valid_loss, f32.last_valid_loss);
  EXPECT_NEAR(bf16.last_valid_loss, f32.last_valid_loss, 0.1 * f32.last_valid_loss);
}
