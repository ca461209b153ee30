#include "leanseq/cli/serve_models.h"

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <stdexcept>

#include "leanseq/core/error.h"
#include "leanseq/core/io.h"
#include "leanseq/interop/ctranslate2.h"

namespace leanseq::cli {

namespace {
void check_name(const std::string& name, const std::string& where) {
  if (name.empty() || name.size() > 64 ||
      name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != std::string::npos) {
    throw ConfigError(where + ": a model's name is 1 to 64 letters, digits, '.', '_' or '-', got '" + name.substr(0, 80) +
                      "'");
  }
}

// A package's model name: its file or directory name without .argosmodel, with what a name may
// not hold replaced by '_' ("translate-en_de-1_0").
std::string package_name(const std::string& path) {
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 11 && name.compare(name.size() - 11, 11, ".argosmodel") == 0) name.resize(name.size() - 11);
  for (auto& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-') c = '_';
  }
  return name.substr(0, 64);
}

std::vector<ModelSpec> read_models_file(const std::string& path, int workers, kernels::ComputeTypeRequest compute_type) {
  YAML::Node root;
  try {
    root = YAML::Load(io::read_file(path, "models file (--models)", uint64_t{4} << 20));
  } catch (const YAML::Exception& e) {
    throw ConfigError(path + ": not YAML: " + e.msg);
  } catch (const DataError& e) {
    throw ConfigError(e.what());
  }
  if (!root.IsSequence() || root.size() == 0) {
    throw ConfigError(path + ": expected a list of models ({name, checkpoint, workers, compute_type, source, target})");
  }
  std::vector<ModelSpec> specs;
  for (size_t i = 0; i < root.size(); ++i) {
    const auto& node = root[i];
    const std::string where = path + ": model " + std::to_string(i + 1);
    if (!node.IsMap()) throw ConfigError(where + ": expected a map with name and checkpoint");
    ModelSpec s{"", "", workers, compute_type, "", ""};
    for (const auto& kv : node) {
      const auto key = kv.first.as<std::string>();
      try {
        if (key == "name") {
          s.name = kv.second.as<std::string>();
        } else if (key == "checkpoint") {
          s.checkpoint = kv.second.as<std::string>();
        } else if (key == "workers") {
          s.workers = kv.second.as<int>();
          if (s.workers < 1 || s.workers > 64) throw ConfigError(where + ": workers must be from 1 to 64");
        } else if (key == "compute_type") {
          s.compute_type = kernels::parse_compute_type(kv.second.as<std::string>());
        } else if (key == "source" || key == "target") {
          auto& code = key == "source" ? s.source : s.target;
          code = kv.second.as<std::string>();
          const bool ok = !code.empty() && code.size() <= 16 &&
                          code.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") ==
                              std::string::npos && code != "auto";
          if (!ok) throw ConfigError(where + ": " + key + " must be a language code of 1 to 16 letters, digits, '-' or '_' (not auto)");
        } else {
          throw ConfigError(where + ": unknown key '" + key + "' (name, checkpoint, workers, compute_type, source, target)");
        }
      } catch (const YAML::Exception&) {
        throw ConfigError(where + ": " + key + " has a value of the wrong type");
      } catch (const std::invalid_argument& e) {
        throw ConfigError(where + ": compute_type: " + e.what());
      } catch (const ConfigError& e) {
        const std::string what = e.what();
        throw ConfigError(what.rfind(where, 0) == 0 ? what : where + ": " + what);
      }
    }
    check_name(s.name, where);
    if (s.checkpoint.empty()) throw ConfigError(where + ": no checkpoint");
    specs.push_back(s);
  }
  return specs;
}
}  // namespace

std::vector<ModelSpec> model_specs(const std::string& checkpoint, const std::vector<std::string>& model_flags,
                                   const std::string& models_file, const std::string& argos_packages, int workers,
                                   kernels::ComputeTypeRequest compute_type) {
  const int given = !checkpoint.empty() + !model_flags.empty() + !models_file.empty();
  // --argos-packages stands alone or joins --model or --models, not --checkpoint.
  if (argos_packages.empty() ? given != 1 : (!checkpoint.empty() || given > 1)) {
    throw ConfigError("serve: give one of --checkpoint (one model), --model NAME=CHECKPOINT (repeatable), --models FILE "
                      "and --argos-packages DIR (which --model or --models may join)");
  }
  std::vector<ModelSpec> specs;
  if (!checkpoint.empty()) specs.push_back({checkpoint, checkpoint, workers, compute_type, "", ""});
  for (const auto& m : model_flags) {
    const auto eq = m.find('=');
    if (eq == std::string::npos || eq + 1 == m.size()) throw ConfigError("--model '" + m + "': expected NAME=CHECKPOINT");
    check_name(m.substr(0, eq), "--model '" + m + "'");
    specs.push_back({m.substr(0, eq), m.substr(eq + 1), workers, compute_type, "", ""});
  }
  if (!models_file.empty()) specs = read_models_file(models_file, workers, compute_type);
  if (!argos_packages.empty()) {
    const auto packages = interop::find_argos_packages(argos_packages);
    if (packages.empty()) {
      throw ConfigError("--argos-packages " + argos_packages +
                        ": no Argos Translate package there (directories with metadata.json and model/, or .argosmodel files)");
    }
    for (const auto& path : packages) {
      auto [source, target] = interop::ctranslate2_languages(path);
      specs.push_back({package_name(path), path, workers, compute_type, source, target});
    }
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (specs[i].name == specs[j].name) throw ConfigError("serve: two models are called " + specs[i].name);
    }
  }
  return specs;
}

}  // namespace leanseq::cli
