// fairseq checkpoints (0.9 to 0.12) as leanseq checkpoints. The options fairseq saved (`args`, a
// flat argparse.Namespace, or `cfg.model` in newer files) choose the leanseq family and set its
// keys through one table per family; an option that changes the network and that leanseq does not
// build is refused by name, never ignored. The state dict keeps fairseq's names, which are
// leanseq's, less what fairseq stores beside the weights (version buffers, the sinusoidal tables'
// _float_tensor, unused conv biases), with the legacy fused attention projection split and half
// precision widened. Dictionaries come from the data directory, with fairseq's padding to a
// multiple of 8 (madeupword0000, ...) as the embeddings were sized.
#pragma once
#include <leanseq/fairseq.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "leanseq/core/config.h"
#include "leanseq/interop/pickle.h"

namespace leanseq::interop {

// The model options of a fairseq checkpoint as JSON (the Namespace's attributes), from `root`:
// args when present, else cfg.model. Throws CheckpointError naming `origin` when neither is there.
nlohmann::json fairseq_model_args(const PyRef& root, const std::string& origin);

// The options a fairseq checkpoint saved for `section` ("task", "criterion"): cfg.<section> in
// fairseq 0.10 and later, else the flat args (which hold every section's); {} when neither.
nlohmann::json fairseq_section_args(const PyRef& root, const std::string& section);

// The leanseq config values (arch + model.* keys) for fairseq model options: the family from
// args["arch"] (or "_name"), every option that shapes the network mapped. Throws CheckpointError
// naming the fairseq option and its value for what leanseq cannot build; with `training`, also for
// options that change training alone (quantization noise), which a checkpoint to decode may carry.
ConfigValues fairseq_config_values(const nlohmann::json& args, const std::string& origin, bool training = false);

// A fairseq state dict of a model of leanseq `family`, renamed and reshaped for leanseq: drops
// version/_float_tensor buffers and the copies kept for other code paths, splits legacy
// in_proj_weight/bias into q/k/v, renames list-held layer norms, widens float16/bfloat16, and
// names the output projection as leanseq does (decoder.embed_out, or with `tied_output` the
// decoder's input embedding, when fairseq saved none).
std::map<std::string, torch::Tensor> fairseq_state_dict(std::map<std::string, torch::Tensor> tensors,
                                                        const std::string& family, bool tied_output);

// The model options fairseq-train takes for `arch`'s family (their fairseq names: encoder_embed_dim,
// share_all_embeddings, ...: those leanseq maps and those it refuses unless they leave the network
// as it builds it), each with whether it is a flag without a value; ConfigError for an arch whose
// family leanseq does not build.
std::vector<std::pair<std::string, bool>> fairseq_model_options(const std::string& arch);

// The defaults a fairseq 0.12 named architecture sets beyond its family's (transformer_iwslt_de_en:
// 512/1024, 4 heads, 6+6 layers; fconv_iwslt_de_en: ...), as fairseq options; ConfigError naming
// the archs leanseq knows for another (interop/fairseq_archs.cpp).
nlohmann::json fairseq_arch_defaults(const std::string& arch);

// (include/leanseq/fairseq.h declares them)
using FairseqImportOptions = leanseq::FairseqImportOptions;
using FairseqImportResult = leanseq::FairseqImportResult;

// Reads, maps, checks that the weights load into the leanseq model (every tensor, no other), and
// writes `out` atomically. Errors name the file and the problem.
FairseqImportResult import_fairseq(const FairseqImportOptions& opt);

}  // namespace leanseq::interop
