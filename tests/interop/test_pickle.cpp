// The restricted unpickler and torch.save's file formats (interop/): what it builds from hand-made
// pickles, what it refuses, the fairseq option mapping, and a bounded fuzz run over the real fairseq
// checkpoints (../shared/fixtures/fairseq-pt): truncated, flipped and forged-length copies must end
// in a clear error, never a crash or an allocation beyond the input.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <random>

#include "leanseq/interop/fairseq.h"
#include "leanseq/interop/pickle.h"
#include "leanseq/interop/torch_file.h"
#include "support/fixtures.h"
#include "support/torch_files.h"

using namespace leanseq::interop;
using Kind = PyValue::Kind;

namespace {
PyRef load(const std::string& bytes) {
  size_t pos = 0;
  return unpickle(bytes, pos, {"test.pkl"});
}
using leanseq::test::pkl;
}  // namespace

TEST(Pickle, BuildsScalarsContainersOrderedDictAndNamespace) {
  // {'a': 1, 'b': [2.5, 'x'], 'c': (None, True), 'd': -2} at protocol 2
  const std::string p = pkl(
      "80027d7100285801000000614b015801000000625d710128474004000000000000580100000078655801000000634e888658010000"
      "00648a01fe752e");
  auto v = load(p);
  ASSERT_EQ(v->kind, Kind::dict);
  EXPECT_EQ(v->get("a")->i, 1);
  ASSERT_EQ(v->get("b")->items.size(), 2u);
  EXPECT_DOUBLE_EQ(v->get("b")->items[0]->f, 2.5);
  EXPECT_EQ(v->get("b")->items[1]->s, "x");
  EXPECT_EQ(v->get("c")->kind, Kind::tuple);
  EXPECT_TRUE(v->get("c")->items[1]->b);
  EXPECT_EQ(v->get("d")->i, -2);
  // OrderedDict([('k', 3)]) and a Namespace(arch='fconv') with memo use.
  const std::string od =
      pkl("800263636f6c6c656374696f6e730a4f726465726564446963740a71005d710158010000006b4b038671026185522e");
  auto d = load(od);
  ASSERT_EQ(d->kind, Kind::dict);
  EXPECT_EQ(d->get("k")->i, 3);
  const std::string ns =
      pkl("80026361726770617273650a4e616d6573706163650a710029817d580400000061726368580500000066636f6e7673622e");
  auto n = load(ns);
  ASSERT_EQ(n->kind, Kind::ns);
  EXPECT_EQ(n->get("arch")->s, "fconv");
}

TEST(Pickle, RefusesForeignGlobalsAndMalformedStreams) {
  for (const std::string name : {"os\nsystem\n", "builtins\neval\n", "subprocess\nPopen\n", "torch\nload\n"}) {
    const std::string p = pkl("8002") + "c" + name + pkl("580100000078710085522e");
    try {
      load(p);
      ADD_FAILURE() << "accepted " << name;
    } catch (const PickleError& e) {
      EXPECT_NE(std::string(e.what()).find("refuses the pickled reference"), std::string::npos) << e.what();
    }
  }
  // Truncated, a length past the end, an unknown opcode, an unset memo entry, deep nesting.
  EXPECT_THROW(load(pkl("80027d71002858010000")), PickleError);     // truncated
  EXPECT_THROW(load(pkl("800258ffffff7f6162632e")), PickleError);   // a length past the end
  EXPECT_THROW(load(pkl("8002ff2e")), PickleError);                 // an unknown opcode
  EXPECT_THROW(load(pkl("800268072e")), PickleError);               // an unset memo entry
  // Lists nested n deep: [] memoized, then n times [memo 0] memoized in its place.
  auto nested = [](int n) {
    std::string p = pkl("80025d710030");
    for (int i = 0; i < n; ++i) p += pkl("5d680061710030");
    return p + pkl("68002e");
  };
  EXPECT_NO_THROW(load(nested(kMaxDepth)));
  EXPECT_THROW(load(nested(kMaxDepth + 1)), PickleError);
  // A tensor rebuild whose storage is not a torch storage.
  EXPECT_THROW(load(pkl("8002") + "ctorch._utils\n_rebuild_tensor_v2\n" + pkl("284b014b00297452" "2e")), PickleError);
}

TEST(FairseqOptions, MapEveryShapingOptionAndRefuseWhatIsNotBuilt) {
  nlohmann::json args = {{"arch", "lightconv_iwslt_de_en"}, {"encoder_embed_dim", 64}, {"encoder_kernel_size_list", {3, 7}},
                         {"decoder_kernel_size_list", "[3, 7]"}, {"encoder_glu", "True"}, {"decoder_conv_type", "lightweight"}};
  auto v = fairseq_config_values(args, "m.pt");
  EXPECT_EQ(v.values.at("arch"), "lightconv");
  EXPECT_EQ(v.values.at("model.encoder.kernel_size_list"), "3,7");
  EXPECT_EQ(v.values.at("model.decoder.kernel_size_list"), "3,7");
  EXPECT_EQ(v.values.at("model.encoder.glu"), "true");
  EXPECT_EQ(v.values.at("model.decoder.embed_dim"), "64");  // fairseq's default: the encoder's
  EXPECT_EQ(v.values.at("model.decoder.conv_dim"), "64");
  EXPECT_EQ(v.values.at("model.decoder.conv_type"), "lightweight");
  // Built: the transformer's layernorm_embedding and decoder_output_dim (its default: decoder_embed_dim).
  v = fairseq_config_values({{"arch", "transformer"}, {"layernorm_embedding", true}, {"decoder_output_dim", 32},
                             {"decoder_embed_dim", 64}, {"decoder_input_dim", 48}},
                            "m.pt");
  EXPECT_EQ(v.values.at("model.layernorm_embedding"), "true");
  EXPECT_EQ(v.values.at("model.decoder.output_dim"), "32");
  EXPECT_EQ(fairseq_config_values({{"arch", "transformer"}, {"decoder_embed_dim", 64}}, "m.pt").values.at("model.decoder.output_dim"),
            "64");
  // Refused by name: what leanseq does not build, also where a default makes the difference.
  nlohmann::json t = {{"arch", "transformer"}, {"cross_self_attention", true}};
  try {
    fairseq_config_values(t, "m.pt");
    ADD_FAILURE() << "cross_self_attention accepted";
  } catch (const leanseq::CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("m.pt: fairseq option cross_self_attention=true"), std::string::npos) << e.what();
  }
  EXPECT_THROW(fairseq_config_values({{"arch", "lightconv"}, {"decoder_output_dim", 32}}, "m.pt"), leanseq::CheckpointError);
  // Quantization noise changes training alone: a checkpoint trained with it decodes; training refuses it.
  const nlohmann::json noisy = {{"arch", "transformer"}, {"quant_noise_pq", 0.1}, {"quant_noise_pq_block_size", 8}};
  EXPECT_NO_THROW(fairseq_config_values(noisy, "m.pt"));
  EXPECT_THROW(fairseq_config_values(noisy, "fairseq-train", true), leanseq::CheckpointError);
  EXPECT_NO_THROW(fairseq_config_values({{"arch", "lightconv"}, {"decoder_output_dim", 512}}, "m.pt"));
  // transformer_align decodes as the transformer: its alignment options choose printed attention only.
  v = fairseq_config_values({{"arch", "transformer_wmt_en_de_big_align"}, {"alignment_layer", 4}, {"alignment_heads", 1},
                             {"full_context_alignment", true}, {"encoder_embed_dim", 1024}},
                            "m.pt");
  EXPECT_EQ(v.values.at("arch"), "transformer");
  EXPECT_EQ(v.values.at("model.encoder.embed_dim"), "1024");
  EXPECT_THROW(fairseq_config_values({{"arch", "transformer"}, {"alignment_layer", 4}}, "m.pt"), leanseq::CheckpointError);
  // Language models: decoder options only; fairseq's tokens_per_sample bounds the positions when
  // max_target_positions is not saved; lightconv_lm's weight dropout defaults to its attention dropout.
  v = fairseq_config_values({{"arch", "transformer_lm_gpt"}, {"decoder_embed_dim", 64}, {"tokens_per_sample", 128}}, "m.pt");
  EXPECT_EQ(v.values.at("arch"), "transformer_lm");
  EXPECT_EQ(v.values.at("model.decoder.input_dim"), "64");
  EXPECT_EQ(v.values.at("model.max_target_positions"), "128");
  EXPECT_EQ(v.values.count("model.encoder.embed_dim"), 0u);
  v = fairseq_config_values({{"arch", "lightconv_lm"}, {"attention_dropout", 0.2}}, "m.pt");
  EXPECT_EQ(v.values.at("model.weight_dropout"), "0.2");
  EXPECT_EQ(v.values.count("model.attention_dropout"), 0u);
  const std::pair<const char*, nlohmann::json> refused[] = {
      {"adaptive_softmax_cutoff", "10,20"}, {"adaptive_input", true}, {"add_bos_token", true}, {"character_embeddings", true}};
  for (const auto& [option, value] : refused) {
    EXPECT_THROW(fairseq_config_values({{"arch", "transformer_lm"}, {option, value}}, "m.pt"), leanseq::CheckpointError)
        << option;
  }
  EXPECT_THROW(fairseq_config_values({{"arch", "lightconv_lm"}, {"decoder_input_dim", 32}, {"decoder_embed_dim", 64}}, "m.pt"),
               leanseq::CheckpointError);
  EXPECT_THROW(fairseq_config_values({{"arch", "bart_large"}}, "m.pt"), leanseq::CheckpointError);
}
namespace {
using leanseq::test::u32;
void expect_refused(const std::string& bytes, const std::string& reason) {
  try {
    load(bytes);
    ADD_FAILURE() << "accepted; expected: " << reason;
  } catch (const PickleError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}
}  // namespace

// Nesting built top-down through the memo: each new list is appended to the one before it after
// that one is already inside its parent, so no single append sees the depth. A million levels
// (19 MB) overflowed the stack when the values were freed; the whole value's depth is checked now.
TEST(Pickle, RefusesDepthBuiltTopDownThroughTheMemo) {
  std::string p = pkl("8002") + "]r" + u32(0);  // [] as memo 0, left on the stack
  for (uint32_t i = 0; i < 1000000; ++i) {
    p += "]r" + u32(i + 1) + "0";             // a new list as memo i+1, popped
    p += "j" + u32(i) + "j" + u32(i + 1) + "a0";  // memo i .append(memo i+1), popped
  }
  expect_refused(p + ".", "nested more than");
  // The same, shallow, loads.
  std::string q = pkl("8002") + "]r" + u32(0);
  for (uint32_t i = 0; i < 50; ++i) q += "]r" + u32(i + 1) + "0" + "j" + u32(i) + "j" + u32(i + 1) + "a0";
  EXPECT_EQ(load(q + ".")->items.size(), 1u);
}

// A list that contains itself, directly or in a Namespace's attributes: to_json recursed forever.
TEST(Pickle, RefusesValuesThatContainThemselves) {
  expect_refused(pkl("80025d71006800612e"), "contains itself");  // [] as memo 0, memo 0 appended to it
  // Namespace(model=[...the list itself...]) built with BUILD.
  const std::string ns = pkl("8002") + "cargparse\nNamespace\n" + pkl("29817d") + "X" + u32(5) + "model" +
                         pkl("5d710168016173622e");
  expect_refused(ns, "contains itself");
}

// A "billion laughs" DAG: each level a list of the previous one twice. 40 levels unfold to 2^40
// values from 41: walking it (cfg.model to JSON) ran out of memory.
TEST(Pickle, RefusesSharedValuesThatUnfoldBeyondTheBound) {
  auto laughs = [](int levels) {
    auto byte = [](int i) { return std::string(1, static_cast<char>(i)); };
    std::string p = pkl("8002") + "]q" + byte(0) + "0";  // [] as memo 0, popped
    for (int i = 1; i <= levels; ++i) p += "](h" + byte(i - 1) + "h" + byte(i - 1) + "eq" + byte(i) + "0";
    return p + "h" + byte(levels) + ".";
  };
  EXPECT_NO_THROW(load(laughs(10)));  // 2^11 values
  expect_refused(laughs(40), "unfold to more than");
}

namespace {
// A torch.save zip archive of {'w': tensor} in a new temporary directory.
std::string torch_zip(int64_t numel, uint64_t offset, const std::vector<uint64_t>& sizes,
                      const std::vector<uint64_t>& strides, bool corrupt_storage = false) {
  const std::string path = leanseq::test::temp_dir("torch-zip") + "/model.pt";
  leanseq::test::write_torch_zip(path, numel, offset, sizes, strides, corrupt_storage);
  return path;
}

torch::Tensor read_w(const std::string& path) {
  TorchFile f(path);
  return f.tensor(*f.root()->get("w")->tensor);
}

void expect_tensor_refused(const std::string& path, const std::string& reason) {
  try {
    auto t = read_w(path);
    ADD_FAILURE() << "read a tensor of " << t.numel() << " elements; expected: " << reason;
  } catch (const PickleError& e) {
    EXPECT_NE(std::string(e.what()).find(reason), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(TorchFile, ReadsAViewInsideItsStorage) {
  auto t = read_w(torch_zip(8, 1, {2, 3}, {3, 1}));
  EXPECT_TRUE(torch::equal(t, torch::arange(2, 8, torch::kFloat).view({2, 3})));
  // Two tensors of one storage share it: nothing is copied.
  TorchFile f(torch_zip(8, 0, {8}, {1}));
  const auto& ref = *f.root()->get("w")->tensor;
  EXPECT_EQ(f.tensor(ref).data_ptr(), f.tensor(ref).data_ptr());
}

// Offsets near 2^63 overflowed the bounds check: one file crashed in copy_, another imported 32 KB
// of the memory before the storage as weights.
TEST(TorchFile, RefusesViewsWhoseExtentOverflows) {
  expect_tensor_refused(torch_zip(8, (uint64_t{1} << 63) - 1, {4}, {1}), "overflows");
  expect_tensor_refused(torch_zip(8, (uint64_t{1} << 63) - 8191, {8192}, {1}), "overflows");
  expect_tensor_refused(torch_zip(8, 4, {2, 3}, {3, 1}), "reaches past its storage");
  expect_tensor_refused(torch_zip(8, 0, {3}, {uint64_t{1} << 62}), "overflows");
}

// A stride-0 view of 2^14 x 2^14 took 1.2 GB from a 3 MB file.
TEST(TorchFile, RefusesViewsWithMoreElementsThanTheirStorage) {
  expect_tensor_refused(torch_zip(8, 0, {16384, 16384}, {0, 0}), "more elements than its storage");
  expect_tensor_refused(torch_zip(8, 0, {65536, 65536}, {0, 0}), "more elements than its storage");
}

// Bytes changed in a storage record: the zip's CRC32 says so.
TEST(TorchFile, RefusesAStorageWhoseCrcDiffers) {
  expect_tensor_refused(torch_zip(8, 0, {8}, {1}, true), "record data/0 is corrupted");
}

namespace {
// Reads a torch file and every tensor of its model, as the importer does.
void read_all(const std::string& path) {
  TorchFile f(path);
  fairseq_model_args(f.root(), path);
  auto model = f.root()->get("model");
  if (!model) return;
  for (const auto& [k, v] : model->entries) {
    if (v->kind == Kind::tensor) f.tensor(*v->tensor);
  }
}
}  // namespace

TEST(TorchFileFixture, BothFormatsReadAndMutatedCopiesFailCleanly) {
  const std::string dir = leanseq::test::shared_path("fixtures/fairseq-pt");
  if (dir.empty()) LEANSEQ_MISSING_SHARED("fixtures/fairseq-pt");
  const std::string tmp = leanseq::test::temp_dir("fuzz") + "/mutated.pt";
  std::mt19937_64 rng(20261125);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(40);
  int runs = 0, errors = 0;
  for (const char* name : {"transformer_legacy", "fconv"}) {
    const std::string original = leanseq::test::read_text(dir + "/" + name + "/model.pt");
    ASSERT_NO_THROW(read_all(dir + "/" + name + "/model.pt")) << name;
    for (int i = 0; i < 1000 && std::chrono::steady_clock::now() < deadline; ++i, ++runs) {
      std::string bytes = original;
      // Damage the parts that hold structure more often: the start (headers, pickles) and the
      // end (the zip directory); sometimes anywhere.
      auto where = [&]() -> size_t {
        const size_t n = bytes.size();
        switch (rng() % 3) {
          case 0: return rng() % std::min<size_t>(n, 60000);
          case 1: return n - 1 - rng() % std::min<size_t>(n, 30000);
          default: return rng() % n;
        }
      };
      switch (i % 3) {
        case 0: bytes.resize(where()); break;  // truncated
        case 1:
          for (int k = 0; k < 4; ++k) bytes[where()] ^= static_cast<char>(1 + rng() % 255);  // flipped
          break;
        default: {  // a forged length or offset
          const size_t at = where();
          for (size_t k = 0; k < 4 && at + k < bytes.size(); ++k) bytes[at + k] = k == 3 ? '\x7f' : '\xff';
        }
      }
      std::ofstream(tmp, std::ios::binary | std::ios::trunc) << bytes;
      try {
        read_all(tmp);
      } catch (const leanseq::Error&) {
        ++errors;
      } catch (const c10::Error&) {
        ++errors;
      } catch (const std::bad_alloc&) {
        ADD_FAILURE() << name << " mutation " << i << ": an allocation beyond the input";
      }
    }
  }
  std::cout << runs << " mutated files, " << errors << " refused with an error, the rest still readable\n";
  EXPECT_GT(runs, 50);
  EXPECT_GT(errors, runs / 4);
}
