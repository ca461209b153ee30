#include "leanseq/python/toolkit.h"

#include <pybind11/stl.h>

#include "leanseq/checkpoint/operations.h"
#include "leanseq/core/config.h"
#include "leanseq/core/error.h"
#include "leanseq/data/prepare.h"
#include "leanseq/models/registry.h"

namespace py = pybind11;

namespace leanseq::python {


void add_toolkit(py::module_& m) {
  m.def(
      "_prepare",
      [](const std::string& src, const std::string& tgt, const std::string& train, const std::string& valid,
         const std::string& test, const std::string& out, int64_t vocab_size, bool joint, const std::string& spm_model,
         const std::string& model_type, int64_t min_len, int64_t max_len, double max_ratio, bool lm) {
        data::PrepareOptions o;
        o.language_model = lm;
        o.src_lang = lm ? "" : src, o.tgt_lang = lm ? src : tgt;
        o.train = train, o.valid = valid, o.test = test, o.out_dir = out;
        o.vocab_size = vocab_size, o.joint = joint, o.spm_model = spm_model, o.model_type = model_type;
        o.min_len = min_len, o.max_len = max_len, o.max_ratio = max_ratio;
        data::PrepareReport r;
        {
          py::gil_scoped_release release;
          r = data::prepare(o);
        }
        py::dict d;
        py::list splits;
        for (const auto& s : r.splits) {
          py::dict x;
          x["name"] = s.name, x["lines"] = s.lines, x["kept"] = s.kept, x["src_tokens"] = s.src_tokens;
          x["tgt_tokens"] = s.tgt_tokens, x["src_unk"] = s.src_unk, x["tgt_unk"] = s.tgt_unk;
          splits.append(x);
        }
        d["splits"] = splits, d["src_vocab"] = r.src_vocab, d["tgt_vocab"] = r.tgt_vocab, d["report"] = r.format();
        return d;
      },
      py::arg("src"), py::arg("tgt"), py::arg("train"), py::arg("valid"), py::arg("test"), py::arg("out"),
      py::arg("vocab_size"), py::arg("joint"), py::arg("spm_model"), py::arg("model_type"), py::arg("min_len"),
      py::arg("max_len"), py::arg("max_ratio"), py::arg("lm"));
  m.def(
      "_average",
      [](std::vector<std::string> inputs, const std::string& output, const std::string& dir, int64_t last,
         bool by_updates) {
        py::gil_scoped_release release;
        if (!dir.empty()) inputs = checkpoint::last_checkpoints(dir, last, by_updates);
        checkpoint::average_checkpoints(inputs, output);
        return inputs;
      },
      py::arg("inputs"), py::arg("output"), py::arg("dir"), py::arg("last"), py::arg("by_updates"));
  m.def(
      "_quantize",
      [](const std::string& input, const std::string& output, const std::string& type) {
        const auto& types = checkpoint::quantized_storage_types();
        const auto t = types.find(type);
        if (t == types.end()) throw ConfigError("type: expected int8, bfloat16 or float16, got '" + type + "'");
        checkpoint::QuantizeReport r;
        {
          py::gil_scoped_release release;
          r = checkpoint::quantize_checkpoint(input, output, t->second);
        }
        py::dict d;
        d["bytes"] = r.bytes, d["float32_bytes"] = r.float32_bytes;
        return d;
      },
      py::arg("input"), py::arg("output"), py::arg("type"));
  m.def(
      "list_archs",
      [] {
        py::list out;
        for (const auto& p : models::registry().presets()) {
          py::dict d;
          d["name"] = p.name, d["family"] = p.family, d["summary"] = models::registry().preset_config(p.name)->summary();
          d["description"] = p.description;
          out.append(d);
        }
        return out;
      },
      "The model presets, as ``leanseq list-archs``: dicts of name, family, summary (key dimensions) and description.");
  m.def(
      "config_keys",
      [](const std::string& arch, const std::string& task) {
        if (task != "seq2seq" && task != "classify") {
          throw ConfigError("task: expected seq2seq or classify, got '" + task + "'");
        }
        ConfigValues values;
        if (!arch.empty()) values.set("arch", arch, "arch");
        values.set("task", task, "task");
        py::list out;
        for (const auto& k : checkpoint::run_config_keys(values)) {
          py::dict d;
          d["key"] = k.key, d["type"] = k.type, d["default"] = k.value, d["help"] = k.help;
          out.append(d);
        }
        return out;
      },
      py::arg("arch") = "", py::arg("task") = "seq2seq",
      "Every config key of a training run, as ``leanseq train --list-keys``: dicts of key, type, default (the\n"
      "preset's value, as text) and help. ``arch``: the preset whose values to give (default: the task's).");
}

}  // namespace leanseq::python
