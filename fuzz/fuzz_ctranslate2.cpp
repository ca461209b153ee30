// A CTranslate2 model's model.bin as Ct2Model reads it (interop/ctranslate2_file.h): the header,
// every variable's name, shape, type and payload, the aliases; then each variable as float32 (the
// dequantization of int8 and int16 weights by their scales, float16 and bfloat16 widened) and as
// a scalar. The model's directory, with a small vocabulary and config.json, is made once; each
// input is written there as its model.bin.
#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "leanseq/core/error.h"
#include "leanseq/interop/ctranslate2_file.h"

namespace {

std::string model_dir;

void write(const std::string& path, const char* data, size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data, static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  torch::set_num_threads(1);
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/fuzz-ctranslate2-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) std::abort();
  model_dir = dir;
  const std::string vocab = R"(["<unk>", "<s>", "</s>", "a", "b"])";
  write(model_dir + "/shared_vocabulary.json", vocab.data(), vocab.size());
  const std::string config = R"({"add_source_bos": false, "add_source_eos": false, "unk_token": "<unk>"})";
  write(model_dir + "/config.json", config.data(), config.size());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  write(model_dir + "/model.bin", reinterpret_cast<const char*>(data), size);
  try {
    const leanseq::interop::Ct2Model model(model_dir);
    for (const auto& name : model.names()) {
      try {
        const auto w = model.float32(name);
        if (w.numel() > 0 && w.numel() < (1 << 20)) (void)w.sum().item<float>();
        (void)model.integer(name, 0);
        (void)model.real(name, 0.0);
      } catch (const leanseq::CheckpointError&) {
      }
    }
  } catch (const leanseq::CheckpointError&) {
  }
  return 0;
}
