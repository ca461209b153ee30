// Checkpoints with weights stored in int8 (a scale per row), bfloat16 or float16: smaller files
// that read back as float32 within each type's rounding, tied weights stored once.
#include <gtest/gtest.h>

#include <filesystem>

#include "leanseq/checkpoint/file.h"
#include "leanseq/models/registry.h"
#include "leanseq/models/state_dict.h"
#include "support/fixtures.h"

using namespace leanseq;
using kernels::ComputeType;

TEST(QuantizedCheckpoint, StoresWeightsSmallerAndReadsThemBackWithinRounding) {
  const auto dir = test::temp_dir("quantized_checkpoint");
  torch::manual_seed(6);
  auto model = models::build_model(*models::registry().preset_config("transformer_small"), {8000, 8000, true});
  std::map<std::string, torch::Tensor> original;
  for (const auto& p : model->named_parameters()) original[p.key()] = p.value().detach().clone();
  const checkpoint::VocabFiles vocab;  // empty: the file is weights only
  const checkpoint::TrainerProgress progress;
  std::map<ComputeType, uintmax_t> bytes;
  for (auto type : {ComputeType::float32, ComputeType::int8, ComputeType::bfloat16, ComputeType::float16}) {
    SCOPED_TRACE(kernels::compute_type_name(type));
    const auto path = dir + "/" + kernels::compute_type_name(type) + ".pt";
    checkpoint::save_checkpoint(path, "arch: transformer_small\n", vocab, progress, *model, nullptr, type);
    bytes[type] = std::filesystem::file_size(path);
    auto ck = checkpoint::read_checkpoint(path);
    EXPECT_EQ(ck.storage, type);
    EXPECT_FALSE(ck.optimizer.has_value());
    for (const auto& [name, want] : original) {
      const auto& got = ck.model_tensors.at(name);
      ASSERT_EQ(got.scalar_type(), torch::kFloat) << name;
      ASSERT_EQ(got.sizes(), want.sizes()) << name;
      const bool reduced = want.dim() >= 2 && want.numel() >= checkpoint::kMinQuantizedSize;
      if (type == ComputeType::float32 || !reduced) {
        EXPECT_TRUE(torch::equal(got, want)) << name;  // biases and norms stay float32
        continue;
      }
      const auto rows = want.reshape({want.size(0), -1});
      const auto err = (got.reshape({want.size(0), -1}) - rows).abs().amax(1);
      const auto amax = rows.abs().amax(1);
      // int8: half a step of 1/127 of each row's largest weight; bfloat16: 8 bits of mantissa.
      const double bound = type == ComputeType::int8 ? 0.5 / 127 + 1e-6 : type == ComputeType::bfloat16 ? 1.0 / 256 : 1.0 / 2048;
      EXPECT_LE((err / amax.clamp_min(1e-12)).max().item<double>(), bound) << name;
      EXPECT_FALSE(torch::equal(got, want)) << name;
    }
  }
  // The tied embedding (encoder, decoder, output projection) is stored once in every type.
  const double float_weights = 4.0 * static_cast<double>(models::count_parameters(*model));
  EXPECT_LT(static_cast<double>(bytes[ComputeType::float32]), 1.05 * float_weights);
  EXPECT_LE(static_cast<double>(bytes[ComputeType::int8]), 0.35 * float_weights);
  EXPECT_LE(static_cast<double>(bytes[ComputeType::bfloat16]), 0.55 * float_weights);
  EXPECT_LE(static_cast<double>(bytes[ComputeType::float16]), 0.55 * float_weights);
}
