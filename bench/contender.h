// A benchmark contender: a preset, optionally followed by model settings, a thread count and a
// compute type after ':' (`pervasive_small:memory_efficient=true:threads=2`,
// `transformer_small:compute_type=int8`), and the most rows of a float32 product that go to
// oneDNN at inference (`transformer_small:onednn_rows=0`: ATen's products only; kernels/dense.h)
// and whether those read packed weights (`transformer_small:packed_weights=0`: the sgemm;
// kernels/packed_products.h)
// and a vocabulary shortlist's size (`transformer_small:shortlist=1500`: each batch searched over
// 1500 target tokens, decode/shortlist.h), and, for training, Adam's form (`transformer_small:adam=composite`: torch::optim::Adam's ATen
// operators instead of train/adam.h's one pass) and the library of the linear layers' products
// (`transformer_small:training_products=aten`; kernels/dense.h), shared by the benchmark programs.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "leanseq/core/config.h"
#include "leanseq/core/threads.h"
#include "leanseq/kernels/compute_type.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/packed_products.h"
#include "leanseq/models/registry.h"

namespace leanseq::bench {

struct Contender {
  std::string name, arch;
  std::vector<std::string> settings;  // key=value for the model config
  int threads = 0;                    // "threads=N" among them: intra-op threads for this contender
  std::string compute_type = "float32";  // "compute_type=T": the inference compute type (decoding)
  std::string amp;                       // "amp=float16|bfloat16": mixed-precision training (CUDA)
  int64_t onednn_rows = -1;              // "onednn_rows=N": kernels::set_onednn_rows (-1: as started)
  std::optional<bool> packed_weights;    // "packed_weights=1|0": kernels::set_packed_weights
  std::string adam = "one_pass";         // "adam=one_pass|composite": the training benchmark's optimizer
  std::optional<kernels::TrainingProducts> training_products;  // "training_products=onednn|aten"
  int64_t shortlist = 0;  // "shortlist=N": decoding searches N target tokens of a batch (0: all)
};

// Parses a spec; an unknown preset fails here, before any run.
inline Contender parse_contender(const std::string& spec) {
  Contender c;
  c.name = c.arch = spec;
  auto colon = spec.find(':');
  if (colon != std::string::npos) {
    c.arch = spec.substr(0, colon);
    std::string item;
    for (char ch : spec.substr(colon + 1) + ":") {
      if (ch != ':') {
        item += ch;
        continue;
      }
      if (item.rfind("threads=", 0) == 0) {
        c.threads = std::stoi(item.substr(8));
      } else if (item.rfind("compute_type=", 0) == 0) {
        c.compute_type = item.substr(13);
        kernels::parse_compute_type(c.compute_type);  // an unknown name fails here
      } else if (item.rfind("onednn_rows=", 0) == 0) {
        const auto value = item.substr(12);
        size_t used = 0;
        try {
          c.onednn_rows = std::stoll(value, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (used == 0 || used != value.size() || c.onednn_rows < 0) {
          throw ConfigError(spec + ": onednn_rows= takes a number of rows (0: none)");
        }
      } else if (item.rfind("packed_weights=", 0) == 0) {
        const auto value = item.substr(15);
        if (value != "1" && value != "0") throw ConfigError(spec + ": packed_weights= takes 1 or 0");
        c.packed_weights = value == "1";
      } else if (item.rfind("adam=", 0) == 0) {
        c.adam = item.substr(5);
        if (c.adam != "one_pass" && c.adam != "composite") throw ConfigError(spec + ": adam= takes one_pass or composite");
      } else if (item.rfind("training_products=", 0) == 0) {
        const auto value = item.substr(18);
        if (value != "onednn" && value != "aten") throw ConfigError(spec + ": training_products= takes onednn or aten");
        c.training_products = kernels::parse_training_products(value.c_str());
      } else if (item.rfind("shortlist=", 0) == 0) {
        try {
          c.shortlist = std::stoll(item.substr(10));
        } catch (const std::exception&) {
          c.shortlist = -1;
        }
        if (c.shortlist < 5) throw ConfigError(spec + ": shortlist= takes a number of target tokens, at least 5");
      } else if (item.rfind("amp=", 0) == 0) {
        c.amp = item.substr(4);
        if (c.amp != "float16" && c.amp != "bfloat16") throw ConfigError(spec + ": amp= takes float16 or bfloat16");
      } else if (!item.empty()) {
        c.settings.push_back(item);
      }
      item.clear();
    }
  }
  models::registry().preset(c.arch);
  return c;
}

// The contender's model config: the preset with its settings applied and validated.
inline std::shared_ptr<models::ModelConfig> contender_config(const Contender& c) {
  auto cfg = models::registry().preset_config(c.arch);
  apply_config(*cfg, parse_assignments(c.settings, c.name));
  cfg->validate();
  return cfg;
}

// Sets the contender's intra-op threads, its oneDNN rows and its training products' library for
// its lifetime.
class ContenderThreads {
 public:
  explicit ContenderThreads(const Contender& c)
      : before_(torch::get_num_threads()),
        rows_before_(kernels::onednn_rows()),
        packed_before_(kernels::packed_weights()),
        training_before_(kernels::training_products()) {
    leanseq::set_compute_threads(c.threads);
    if (c.onednn_rows >= 0) kernels::set_onednn_rows(c.onednn_rows);
    if (c.packed_weights) kernels::set_packed_weights(*c.packed_weights);
    if (c.training_products) kernels::set_training_products(*c.training_products);
  }
  ~ContenderThreads() {
    leanseq::set_compute_threads(before_);
    kernels::set_onednn_rows(rows_before_);
    kernels::set_packed_weights(packed_before_);
    kernels::set_training_products(training_before_);
  }
  int before() const { return before_; }

 private:
  int before_;
  int64_t rows_before_;
  bool packed_before_;
  kernels::TrainingProducts training_before_;
};

}  // namespace leanseq::bench
