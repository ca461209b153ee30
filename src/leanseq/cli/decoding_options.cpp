#include "leanseq/cli/decoding_options.h"

#include <torch/torch.h>

#include "leanseq/core/blas.h"
#include "leanseq/core/error.h"
#include "leanseq/core/logging.h"
#include "leanseq/core/memory.h"
#include "leanseq/core/strings.h"
#include "leanseq/core/threads.h"
#include "leanseq/decode/option_table.h"
#include "leanseq/interop/torch_file.h"
#include "leanseq/kernels/dense.h"
#include "leanseq/kernels/int8_gemm.h"

namespace leanseq::cli {

void add_decoding_flags(CLI::App* sub, DecodingFlags& f) {
  // The options of decode/option_table.h, bound to f.opt; their ranges are checked with the
  // others' in check_decoding_flags (the same messages as the server's and Python's).
  for (const auto& option : decode::decoding_options()) {
    const bool number = option.kind() == decode::DecodingOption::Kind::integer ||
                        option.kind() == decode::DecodingOption::Kind::number;
    const std::string help = std::string(option.help) + (number ? " (" + option.expected() + ")" : "");
    std::visit(
        [&](auto field) {
          auto& value = field(f.opt);
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, bool>) {
            sub->add_flag(option.flags, value, help)->group(option.group);
          } else {
            sub->add_option(option.flags, value, help)->capture_default_str()->group(option.group);
          }
        },
        option.field);
  }
  sub->add_flag("--greedy", f.greedy, "greedy search (beam 1)")
      ->group("Search");
  sub->add_option("--seed", f.seed, "random seed of sampling (the same seed and threads: the same samples)")
      ->capture_default_str()
      ->group("Sampling");
  sub->add_option("--replace-unk", f.replace_unk,
                  "each <unk> of a translation becomes the source subword it attends most, or that subword's "
                  "translation in DICT ('source target' lines) when one is given (fairseq's --replace-unk)")
      ->expected(0, 1)
      ->type_name("[DICT]")
      ->group("Search");
  sub->add_option("--constraints", f.constraints,
                  "lexically constrained decoding: each input line is a source, then a tab before each constraint "
                  "(target text every translation contains); ordered (the default without a value) keeps their "
                  "order, unordered takes any (fairseq's --constraints)")
      ->expected(0, 1)
      ->type_name("[ORDER]")
      ->group("Search");
  sub->add_option("--shortlist", f.shortlist,
                  "a vocabulary shortlist (CTranslate2's vmap format, `leanseq shortlist` makes one): each batch is "
                  "searched over the target subwords it allows for the batch's sources")
      ->group("Performance");
  sub->add_option("--threads", f.threads, kComputeThreadsHelp)
      ->group("Performance");
  sub->add_option("--device", f.device, "cpu, cuda or cuda:N (a CUDA build)")->capture_default_str()
      ->group("Performance");
  const auto& names = kernels::compute_type_requests();
  const std::map<std::string, kernels::ComputeTypeRequest> types(names.begin(), names.end());
  sub->add_option("--compute-type", f.compute_type,
                  "type of the matrix products: default (the checkpoint's), auto (the fastest on this device), "
                  "float32, int8, int8_bfloat16, bfloat16, float16 (docs/fast.md)")
      ->transform(CLI::CheckedTransformer(types))
      ->default_str("default")
      ->group("Performance");
}

runtime::LoadedTranslator load_for_decoding(const std::string& spec, const std::string& key,
                                            kernels::ComputeTypeRequest request, const torch::Device& device) {
  const auto paths = colon_separated_paths(spec, key);
  kernels::ResolvedComputeType resolved;
  runtime::LoadedTranslator lt;
  try {
    lt = runtime::load_for_inference(paths, device, request, resolved);
  } catch (const CheckpointError&) {  // a fairseq file gets the command that imports it
    const auto& path = paths.front();
    if (!interop::is_torch_pickle_file(path)) throw;
    throw CheckpointError(path + " is a fairseq checkpoint: import it first with 'leanseq import-fairseq --checkpoint " +
                          path + " --data-dir <the directory of its dict.*.txt> --spm <its SentencePiece model> --out " +
                          path.substr(0, path.rfind(".pt")) + ".leanseq.pt', then translate with that file");
  }
  if (!resolved.notice.empty()) log::warn(resolved.notice);
  const bool int8 = resolved.type == kernels::ComputeType::int8;
  log::info("compute type " + kernels::compute_type_name(resolved.type) + (int8 ? " (" + kernels::int8_products_summary() + ")" : ""));
  if (paths.size() > 1) log::info("an ensemble of " + std::to_string(paths.size()) + " models");
  return lt;
}

void load_shortlist(DecodingFlags& f, const decode::Translator& tr) {
  if (f.shortlist.empty()) return;
  auto s = std::make_shared<decode::Shortlist>(decode::Shortlist::read(f.shortlist, tr.tgt_dict()));
  log::info("shortlist " + f.shortlist + ": " + std::to_string(s->entries()) + " source entries" +
            (s->skipped() > 0 ? ", " + std::to_string(s->skipped()) + " target subwords not in the dictionary skipped" : ""));
  f.opt.shortlist = std::move(s);
}

void check_decoding_flags(DecodingFlags& f) {
  auto& s = f.opt.search;
  if (f.greedy) s.beam = 1;
  if (f.replace_unk) {
    f.opt.replace_unk = true;
    if (!f.replace_unk->empty()) {
      f.opt.replace_unk_dict =
          std::make_shared<const std::unordered_map<std::string, std::string>>(decode::read_replace_unk_dict(*f.replace_unk));
    }
  }
  if (f.constraints) {
    try {
      s.constraint_order = decode::parse_constraint_order(f.constraints->empty() ? "ordered" : *f.constraints);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--constraints: ") + e.what());
    }
  }
  decode::check_options(f.opt);
  set_compute_threads(f.threads);
  torch::manual_seed(static_cast<uint64_t>(f.seed));
}

std::string cpu_decoding_summary() {
  return blas_summary() + "; " + kernels::dense_products_summary() + "; " + allocator_summary();
}

}  // namespace leanseq::cli
