#include "leanseq/checkpoint/file.h"

#include <ATen/CPUGeneratorImpl.h>

#include <sstream>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include <leanseq/version.h>
#include "leanseq/core/zip.h"
#include "leanseq/kernels/int8_gemm.h"

namespace leanseq::checkpoint {

namespace {
constexpr int64_t kFormatVersion = 1;

torch::Tensor bytes_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  if (!s.empty()) std::memcpy(t.data_ptr(), s.data(), s.size());
  return t;
}
std::string tensor_bytes(const torch::Tensor& t) {
  auto c = t.cpu().contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
}

void write_string(torch::serialize::OutputArchive& ar, const std::string& key, const std::string& value) {
  ar.write(key, bytes_tensor(value));
}
std::string read_string(torch::serialize::InputArchive& ar, const std::string& key) {
  torch::Tensor t;
  ar.read(key, t);
  return tensor_bytes(t);
}

bool stored_reduced(const torch::Tensor& t) {
  return t.is_floating_point() && t.dim() >= 2 && t.numel() >= kMinQuantizedSize;
}

// Writes the model tensors under "model.<i>" in `storage` (int8: the values and a ".scale" tensor
// beside them). A tensor shared by several names (tied embeddings) is converted once, so that the
// archive stores it once, as it does a float32 tensor.
void write_model_tensors(torch::serialize::OutputArchive& ar, const std::vector<torch::Tensor>& tensors,
                         kernels::ComputeType storage) {
  using kernels::ComputeType;
  std::map<const void*, std::pair<torch::Tensor, torch::Tensor>> converted;  // by data pointer
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto key = "model." + std::to_string(i);
    const auto& t = tensors[i];
    if (storage == ComputeType::float32 || !stored_reduced(t)) {
      ar.write(key, t);
      continue;
    }
    auto& [values, scale] = converted[t.data_ptr()];
    if (!values.defined()) {
      if (storage == ComputeType::int8) {
        auto q = kernels::quantize_weight(t.reshape({t.size(0), -1}));
        values = q.q.view(t.sizes());
        scale = q.scale;
      } else {
        values = t.to(storage == ComputeType::bfloat16 ? torch::kBFloat16 : torch::kHalf);
      }
    }
    ar.write(key, values);
    if (scale.defined()) ar.write(key + ".scale", scale);
  }
}

// Model tensor `key` as float32 however it was stored.
torch::Tensor read_model_tensor(torch::serialize::InputArchive& ar, const std::string& key) {
  torch::Tensor t, scale;
  ar.read(key, t);
  if (t.scalar_type() == torch::kChar && ar.try_read(key + ".scale", scale)) {
    auto q = kernels::int8_weight_from(t.reshape({t.size(0), -1}), scale);
    return kernels::dequantize(q).view(t.sizes()).to(t.device());
  }
  if (t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kHalf) return t.to(torch::kFloat);
  return t;
}
}  // namespace

void write_bytes(const std::string& path, const std::string& bytes) { io::atomic_write_text(path, bytes); }

void save_checkpoint(const std::string& path, const std::string& config_yaml, const VocabFiles& vocab,
                     const TrainerProgress& progress, torch::nn::Module& model, torch::optim::Optimizer* optimizer,
                     kernels::ComputeType storage) {
  torch::serialize::OutputArchive ar;
  ar.write("format_version", torch::tensor({kFormatVersion}));
  write_string(ar, "writer", std::string("leanseq ") + kVersion);
  write_string(ar, "config", config_yaml);
  write_string(ar, "vocab.src_lang", vocab.src_lang);
  write_string(ar, "vocab.tgt_lang", vocab.tgt_lang);
  write_string(ar, "vocab.src_dict", vocab.src_dict);
  write_string(ar, "vocab.tgt_dict", vocab.tgt_dict);
  write_string(ar, "vocab.src_spm", vocab.src_spm);
  write_string(ar, "vocab.tgt_spm", vocab.tgt_spm);
  ar.write("vocab.joint", torch::tensor({static_cast<int64_t>(vocab.joint)}));
  write_string(ar, "vocab.tokenizer", vocab.tokenizer);
  write_string(ar, "vocab.bpe_codes", vocab.bpe_codes);
  ar.write("vocab.source_framing",
           torch::tensor({static_cast<int64_t>(vocab.source_bos), static_cast<int64_t>(vocab.source_eos),
                          static_cast<int64_t>(vocab.max_len_cuts)}));
  ar.write("progress.ints", torch::tensor({progress.epoch, progress.batch_in_epoch, progress.num_updates, progress.lr_shrinks,
                                          progress.validations_since_best, progress.loss_scale_good_updates}));
  ar.write("progress.floats",
           torch::tensor({progress.best_metric, progress.elapsed_seconds, progress.best_valid_loss, progress.loss_scale}, torch::TensorOptions().dtype(torch::kDouble)));
  std::string names;
  std::vector<torch::Tensor> tensors;
  auto add = [&](const std::string& name, const torch::Tensor& t) {
    names += name + "\n";
    tensors.push_back(t.detach().cpu());
  };
  for (const auto& p : model.named_parameters(true)) add(p.key(), p.value());
  for (const auto& b : model.named_buffers(true)) add(b.key(), b.value());
  write_string(ar, "model.names", names);
  write_model_tensors(ar, tensors, storage);
  write_string(ar, "storage", kernels::compute_type_name(storage));
  if (optimizer) {
    torch::serialize::OutputArchive opt;
    optimizer->save(opt);
    ar.write("optimizer", opt);
  }
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    ar.write("rng", torch::Tensor(gen.get_state()));
  }
  // Through a writer that never fails inside LibTorch's zip writer (which cannot unwind from a
  // failed write: a full disk aborted the process); the error shows at close.
  io::atomic_write(path, [&](const std::string& tmp) {
    io::FileWriter out(tmp);
    ar.save_to([&](const void* data, size_t n) {
      out.write(data, n);
      return n;
    });
    out.close();
  });
}

Checkpoint read_checkpoint(const std::string& path, const torch::Device& device) {
  if (!io::file_exists(path)) throw CheckpointError(path + ": checkpoint not found");
  Checkpoint ck;
  torch::serialize::InputArchive ar;
  try {
    // LibTorch's reader does not check the records' CRC32: a corrupted weight would load as a
    // different number.
    zip::Reader(path).verify_all();
  } catch (const zip::ZipError& e) {
    throw CheckpointError(path + ": cannot read checkpoint (damaged, truncated, or not a leanseq checkpoint): " +
                          e.what());
  }
  try {
    ar.load_from(path, device);
    torch::Tensor version;
    ar.read("format_version", version);
    if (version.item<int64_t>() != kFormatVersion) {
      throw CheckpointError(path + ": checkpoint format " + std::to_string(version.item<int64_t>()) +
                            " is not supported (expected " + std::to_string(kFormatVersion) + ")");
    }
    ck.config_yaml = read_string(ar, "config");
    ck.vocab.src_lang = read_string(ar, "vocab.src_lang");
    ck.vocab.tgt_lang = read_string(ar, "vocab.tgt_lang");
    ck.vocab.src_dict = read_string(ar, "vocab.src_dict");
    ck.vocab.tgt_dict = read_string(ar, "vocab.tgt_dict");
    ck.vocab.src_spm = read_string(ar, "vocab.src_spm");
    ck.vocab.tgt_spm = read_string(ar, "vocab.tgt_spm");
    torch::Tensor joint, ints, floats;
    ar.read("vocab.joint", joint);
    ck.vocab.joint = joint.item<int64_t>() != 0;
    // Checkpoints written before imports had a text pipeline of their own lack these two.
    torch::Tensor text;
    if (ar.try_read("vocab.tokenizer", text)) ck.vocab.tokenizer = tensor_bytes(text);
    if (ar.try_read("vocab.bpe_codes", text)) ck.vocab.bpe_codes = tensor_bytes(text);
    // Written since CTranslate2 models import (absent: fairseq's framing, </s> after the source, and
    // its lengths).
    if (torch::Tensor framing; ar.try_read("vocab.source_framing", framing)) {
      if (framing.numel() != 3 || framing.scalar_type() != torch::kLong) {
        throw CheckpointError(path + ": vocab.source_framing is not three integers");
      }
      ck.vocab.source_bos = framing[0].item<int64_t>() != 0;
      ck.vocab.source_eos = framing[1].item<int64_t>() != 0;
      ck.vocab.max_len_cuts = framing[2].item<int64_t>() != 0;
    }
    ar.read("progress.ints", ints);
    ar.read("progress.floats", floats);
    ck.progress.epoch = ints[0].item<int64_t>();
    ck.progress.batch_in_epoch = ints[1].item<int64_t>();
    ck.progress.num_updates = ints[2].item<int64_t>();
    ck.progress.best_metric = floats[0].item<double>();
    ck.progress.elapsed_seconds = floats[1].item<double>();
    if (ints.numel() > 3) ck.progress.lr_shrinks = ints[3].item<int64_t>();  // older checkpoints: none
    if (ints.numel() > 4) ck.progress.validations_since_best = ints[4].item<int64_t>();
    if (floats.numel() > 2) ck.progress.best_valid_loss = floats[2].item<double>();
    if (floats.numel() > 3) ck.progress.loss_scale = floats[3].item<double>();  // older checkpoints: none
    if (ints.numel() > 5) ck.progress.loss_scale_good_updates = ints[5].item<int64_t>();
    std::istringstream names(read_string(ar, "model.names"));
    std::string name;
    for (int64_t i = 0; std::getline(names, name); ++i) {
      ck.model_tensors[name] = read_model_tensor(ar, "model." + std::to_string(i));
    }
    if (ar.try_read("writer", text)) ck.writer = tensor_bytes(text);  // older checkpoints: none
    if (ar.try_read("storage", text)) {  // older checkpoints: float32
      const auto storage = tensor_bytes(text);
      for (auto type : {kernels::ComputeType::int8, kernels::ComputeType::bfloat16, kernels::ComputeType::float16}) {
        if (storage == kernels::compute_type_name(type)) ck.storage = type;
      }
    }
    torch::serialize::InputArchive opt;
    if (ar.try_read("optimizer", opt)) ck.optimizer.emplace(std::move(opt));
    ar.read("rng", ck.rng_state);
    ck.rng_state = ck.rng_state.cpu();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    throw CheckpointError(path + ": cannot read checkpoint (truncated, or not a leanseq checkpoint): " + msg);
  }
  return ck;
}

bool is_classifier_config(const ConfigValues& config) {
  auto task = config.values.find("task");
  return task != config.values.end() && task->second == "classify";
}

bool is_classifier_checkpoint(const std::string& path) {
  return is_classifier_config(parse_yaml_text(read_checkpoint(path).config_yaml, path + " (config)"));
}

}  // namespace leanseq::checkpoint
