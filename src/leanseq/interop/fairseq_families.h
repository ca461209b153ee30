// The table of each fairseq model family leanseq builds (interop/fairseq.cpp reads them): which
// fairseq option sets which leanseq key, with fairseq's default where a checkpoint predates it, and
// which options are refused unless they leave the network as leanseq builds it.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace leanseq::interop {

using json = nlohmann::json;

// One fairseq option that shapes the network: its leanseq key, and its value when the options
// predate it (fairseq's base_architecture default; a string naming another option means "the
// same as that one").
struct Field {
  const char* fairseq;
  const char* leanseq;
  json fallback;
};

// An option leanseq does not build, refused unless it has the value that leaves the network as
// leanseq builds it; `training_only`: one that changes training alone (a decoded model is the same
// network whatever its value), refused for fairseq-train only.
struct Refusal {
  const char* fairseq;
  std::function<bool(const json& value, const json& args)> supported;
  bool training_only = false;
};

struct Family {
  const char* name;  // the leanseq preset that sets the family's defaults
  std::vector<Field> fields;
  std::vector<Refusal> refusals;
};

// The family leanseq builds for a fairseq arch (nullptr: none; transformer_align's is for import
// only); the transformer's table.
const Family* fairseq_family(const std::string& arch);
const Family& fairseq_transformer_family();
// transformer_align, transformer_wmt_en_de_big_align: a transformer trained with an alignment loss.
bool is_alignment_arch(const std::string& arch);

}  // namespace leanseq::interop
