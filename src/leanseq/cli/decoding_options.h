// The decoding flags that translate and serve share (fairseq's names), registered once, and
// their checks.
#pragma once
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "leanseq/decode/translator.h"
#include "leanseq/kernels/compute_type.h"
#include "leanseq/runtime/inference.h"

namespace leanseq::cli {

struct DecodingFlags {
  decode::TranslateOptions opt;
  bool greedy = false;
  int64_t seed = 1;
  int64_t threads = 0;
  std::string device = "cpu";
  kernels::ComputeTypeRequest compute_type = kernels::ComputeTypeRequest::default_;
  std::optional<std::string> replace_unk;  // --replace-unk given: its dictionary ("" for none)
  std::optional<std::string> constraints;
  std::string shortlist;  // --shortlist FILE ("": none)  // --constraints given: ordered, unordered ("" for ordered)
};

// --beam, --greedy, --lenpen, --max-len-a/-b, --nbest, --unk-penalty, --min-len,
// --no-repeat-ngram-size, --sampling, --sampling-topk/-topp, --temperature, --seed, --batch-size,
// --max-tokens, --prefix, --replace-unk, --constraints, --threads, --device, --compute-type.
void add_decoding_flags(CLI::App* sub, DecodingFlags& f);
// ConfigError for combinations the flags cannot take; applies --greedy, seeds the sampler.
void check_decoding_flags(DecodingFlags& f);
// Reads --shortlist for the target dictionary of `tr` into f.opt (and logs its size).
void load_shortlist(DecodingFlags& f, const decode::Translator& tr);
// Packs the loaded models for --compute-type and logs the type in use (and a fallback's notice).
// The checkpoint(s) of `spec` (A.pt:B.pt: an ensemble; `key` names the flag in errors) loaded on
// `device` with the products `request` asks for, both logged; a fairseq file gets the command that
// imports it. translate, serve and fairseq-generate load their models so.
runtime::LoadedTranslator load_for_decoding(const std::string& spec, const std::string& key,
                                            kernels::ComputeTypeRequest request, const torch::Device& device);
// The start-up log line of translate and serve on a CPU: the BLAS, where the products run, and the
// allocator.
std::string cpu_decoding_summary();

}  // namespace leanseq::cli
