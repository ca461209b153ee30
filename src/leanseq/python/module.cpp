// The Python module `leanseq` (pybind11): translation, scoring and import over the same runtime as
// `leanseq translate` (one decoding path), and sacreBLEU-compatible metrics. Errors become Python
// exceptions carrying the command line's one-line messages: ValueError for bad arguments,
// FileNotFoundError for missing files, RuntimeError otherwise; the interpreter never aborts.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <c10/util/Exception.h>

#include <mutex>

#include "leanseq/checkpoint/run_config.h"
#include "leanseq/core/error.h"
#include "leanseq/core/signal_stack.h"
#include "leanseq/core/strings.h"
#include "leanseq/core/threads.h"
#include <leanseq/version.h>
#include "leanseq/eval/bleu.h"
#include "leanseq/eval/chrf.h"
#include "leanseq/eval/ter.h"
#include "leanseq/decode/option_table.h"
#include "leanseq/interop/fairseq.h"
#include "leanseq/runtime/inference.h"
#include "leanseq/python/toolkit.h"
#include "leanseq/runtime/translator_pool.h"

namespace py = pybind11;
using namespace leanseq;

namespace {

struct Hypothesis {
  std::string text;
  std::vector<std::string> tokens;
  bool scored = true;  // return_scores: score and positional_scores are None without it
  double score = 0;
  std::vector<float> positional_scores;
  std::vector<int64_t> alignment;
};

struct Result {
  std::vector<Hypothesis> hypotheses;
};

// A call's options: the decoding options of decode/option_table.h (set through set()), and what
// only Python's results take.
struct Options {
  decode::TranslateOptions decoding;
  bool return_alignment = false, return_scores = true;
  std::optional<int64_t> seed;
  // One list of constraint texts per sentence (none: unconstrained), and how they are met.
  std::optional<std::vector<std::vector<std::string>>> constraints;
  std::string constraint_order = "ordered";
  // replace_unk: <unk>s become their aligned source subwords, or these entries of them.
  bool replace_unk = false;
  std::unordered_map<std::string, std::string> replace_unk_dict;

  // Sets the option whose Python keyword is `name`; ConfigError (ValueError) for a value it does
  // not take, with the messages of the command line and the server.
  void set(const std::string& name, const py::handle& value) {
    const auto* option = decode::find_decoding_option(name, /*python=*/true);
    if (!option) throw py::type_error("unexpected keyword argument '" + name + "'");
    decode::OptionValue v;
    if (py::isinstance<py::bool_>(value)) {
      v = value.cast<bool>();
    } else if (py::isinstance<py::int_>(value)) {
      try {
        v = value.cast<int64_t>();
      } catch (const py::cast_error&) {  // past 64 bits
        v = py::str(value).cast<std::string>();
      }
    } else if (py::isinstance<py::float_>(value)) {
      v = value.cast<double>();
    } else if (py::isinstance<py::str>(value) && option->kind() == decode::DecodingOption::Kind::text) {
      v = value.cast<std::string>();
    } else {  // a string for a number is refused here, not read as one (as a form's field is)
      option->refuse(first_line(py::repr(value).cast<std::string>(), 100));
    }
    decode::set_option(decoding, *option, v);
  }
};

decode::TranslateOptions to_options(const Options& o, decode::InputFormat format) {
  decode::TranslateOptions t = o.decoding;
  t.input_format = format;
  t.search.need_attn = o.return_alignment;
  if (o.constraints) {
    try {
      t.search.constraint_order = decode::parse_constraint_order(o.constraint_order);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("constraint_order: ") + e.what());
    }
  }
  t.replace_unk = o.replace_unk;
  if (!o.replace_unk_dict.empty()) {
    t.replace_unk_dict = std::make_shared<const std::unordered_map<std::string, std::string>>(o.replace_unk_dict);
  }
  decode::check_options(t);
  return t;
}

// A loaded model (or ensemble) and the pool of `inter_threads` workers that decode with it (one
// copy of the weights), with the GIL released meanwhile so that other Python threads run. Calls
// from several Python threads share the workers; a seeded sampler runs alone (the random
// generator is the process's).
class PyTranslator {
 public:
  PyTranslator(const std::string& path, const std::string& device, const std::string& compute_type, int64_t threads,
               int64_t inter_threads, const std::string& shortlist) {
    const auto request = runtime::compute_type_request(compute_type, "compute_type");
    set_compute_threads(threads);
    const auto paths = colon_separated_paths(path, "path");
    runtime::check_checkpoints_exist(paths);
    kernels::ResolvedComputeType resolved;
    lt_ = runtime::load_for_inference(paths, checkpoint::resolve_device(device, "device"), request, resolved);
    compute_type_ = kernels::compute_type_name(resolved.type);
    notice_ = resolved.notice;
    try {
      pool_ = std::make_unique<runtime::TranslatorPool>(*lt_.translator, inter_threads, threads);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("inter_threads: ") + e.what());
    }
    if (!shortlist.empty()) {
      shortlist_ = std::make_shared<decode::Shortlist>(decode::Shortlist::read(shortlist, lt_.translator->tgt_dict()));
    }
  }
  int inter_threads() const { return pool_->workers(); }
  int intra_threads() const { return pool_->intra_threads(); }
  const std::string& compute_type() const { return compute_type_; }
  const std::string& compute_type_notice() const { return notice_; }

  std::vector<Result> translate(const std::vector<std::string>& lines, const Options& o, decode::InputFormat format) {
    auto opt = to_options(o, format);
    opt.shortlist = shortlist_;
    std::unique_lock<std::mutex> seeded;
    if (o.seed) {
      seeded = std::unique_lock<std::mutex>(seed_mutex_);
      torch::manual_seed(static_cast<uint64_t>(*o.seed));
    }
    if (o.constraints && o.constraints->size() != lines.size()) {
      throw ConfigError("constraints: " + std::to_string(o.constraints->size()) + " lists for " +
                        std::to_string(lines.size()) + " sentences (one list per sentence)");
    }
    // As `leanseq translate`: an empty line, or one that is not valid UTF-8, has an empty result.
    std::vector<std::string> todo;
    std::vector<size_t> where;
    std::vector<decode::Constraints> constraints;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (!decode::translatable(lines[i])) continue;
      todo.push_back(lines[i]), where.push_back(i);
      if (!o.constraints) continue;
      try {
        constraints.push_back(lt_.translator->encode_constraints((*o.constraints)[i], format));
      } catch (const DataError& e) {
        throw ConfigError("constraints[" + std::to_string(i) + "]: " + e.what());
      }
    }
    const auto done = pool_->translate(todo, opt, nullptr, /*in_order=*/o.seed.has_value(),
                                       o.constraints ? &constraints : nullptr);
    std::vector<std::vector<decode::TranslationHyp>> res(lines.size());
    for (size_t k = 0; k < where.size(); ++k) res[where[k]] = done[k];
    std::vector<Result> out;
    for (const auto& hyps : res) {
      Result r;
      for (const auto& h : hyps) {
        Hypothesis x;
        x.text = h.text;
        x.tokens = h.pieces;
        x.score = h.hyp.score;
        x.scored = o.return_scores;
        x.positional_scores = h.hyp.positional_scores;
        if (o.return_alignment && !h.hyp.alignment.empty()) {
          x.alignment.assign(h.hyp.alignment.begin(), h.hyp.alignment.end() - 1);  // not </s>'s
        }
        r.hypotheses.push_back(std::move(x));
      }
      out.push_back(std::move(r));
    }
    return out;
  }

  std::vector<std::vector<float>> score(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                                        int64_t batch) {
    if (sources.size() != targets.size()) {
      throw ConfigError("score: " + std::to_string(sources.size()) + " sources but " + std::to_string(targets.size()) +
                        " targets");
    }
    decode::TranslateOptions opt;
    opt.max_sentences = std::max<int64_t>(1, batch);
    return lt_.translator->score(sources, targets, opt);
  }

 private:
  std::string compute_type_, notice_;
  runtime::LoadedTranslator lt_;
  std::unique_ptr<runtime::TranslatorPool> pool_;
  std::mutex seed_mutex_;  // one seeded call at a time
  std::shared_ptr<const decode::Shortlist> shortlist_;
};

std::vector<std::vector<std::string>> reference_streams(const py::object& refs, size_t n) {
  // [refs] (one stream) or [[refs of stream 1], [refs of stream 2], ...], as sacrebleu takes them.
  auto streams = refs.cast<std::vector<std::vector<std::string>>>();
  for (const auto& s : streams) {
    if (s.size() != n) {
      throw ConfigError("a reference stream has " + std::to_string(s.size()) + " segments but there are " +
                        std::to_string(n) + " hypotheses");
    }
  }
  return streams;
}

}  // namespace

namespace {
// Translator and its results.
void add_translation(py::module_& m) {
  py::class_<Hypothesis>(m, "Hypothesis", "One translation of a sentence (an entry of ``TranslationResult.hypotheses``, best first).")
      .def_readonly("text", &Hypothesis::text, "the detokenized translation")
      .def_readonly("tokens", &Hypothesis::tokens, "its subword pieces, without </s>")
      .def_property_readonly(
          "score", [](const Hypothesis& h) { return h.scored ? py::cast(h.score) : py::none(); },
          "its log-probability divided by length ** lenpen, as fairseq's H- line (None with return_scores=False)")
      .def_property_readonly("positional_scores",
                             [](const Hypothesis& h) { return h.scored ? py::cast(h.positional_scores) : py::none(); },
                             "the log-probability of each token, </s> last (None with return_scores=False)")
      .def_readonly("alignment", &Hypothesis::alignment,
                    "with return_alignment=True: per target token, the source position it attends most")
      .def("__repr__", [](const Hypothesis& h) { return "Hypothesis(text=" + py::repr(py::str(h.text)).cast<std::string>() + ")"; });
  py::class_<Result>(m, "TranslationResult", "The translations of one sentence: its n-best hypotheses, and the best one's text, tokens and score.")
      .def_readonly("hypotheses", &Result::hypotheses, "the n-best Hypothesis list, best first")
      .def_property_readonly(
          "text", [](const Result& r) { return r.hypotheses.empty() ? std::string() : r.hypotheses[0].text; },
          "the best translation (empty for an empty or invalid sentence)")
      .def_property_readonly(
          "tokens", [](const Result& r) { return r.hypotheses.empty() ? std::vector<std::string>() : r.hypotheses[0].tokens; },
          "the best translation's subword pieces")
      .def_property_readonly("score", [](const Result& r) {
        return r.hypotheses.empty() || !r.hypotheses[0].scored ? py::none() : py::cast(r.hypotheses[0].score);
      }, "the best translation's score (None without one)")
      .def("__repr__", [](const Result& r) {
        return "TranslationResult(text=" + py::repr(py::str(r.hypotheses.empty() ? "" : r.hypotheses[0].text)).cast<std::string>() + ")";
      });

  py::class_<Options>(m, "_Options")
      .def(py::init<>())
      .def("set", &Options::set, py::arg("name"), py::arg("value"))
      .def_readwrite("seed", &Options::seed)
      .def_readwrite("constraints", &Options::constraints)
      .def_readwrite("constraint_order", &Options::constraint_order)
      .def_readwrite("replace_unk", &Options::replace_unk)
      .def_readwrite("replace_unk_dict", &Options::replace_unk_dict)
      .def_readwrite("return_alignment", &Options::return_alignment)
      .def_readwrite("return_scores", &Options::return_scores);
  m.def(
      "_decoding_options",
      [] {
        const decode::TranslateOptions defaults;
        py::list out;
        for (const auto& o : decode::decoding_options()) {
          out.append(py::make_tuple(o.python_name(), o.expected(), o.value_text(defaults), o.help));
        }
        return out;
      },
      "(keyword, what it takes, default, help) of each decoding option, as translate() takes them");

  py::class_<PyTranslator>(m, "_Translator")
      .def(py::init<const std::string&, const std::string&, const std::string&, int64_t, int64_t, const std::string&>(),
           py::arg("path"), py::arg("device"), py::arg("compute_type"), py::arg("threads"), py::arg("inter_threads"),
           py::arg("shortlist"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("inter_threads", &PyTranslator::inter_threads)
      .def_property_readonly("intra_threads", &PyTranslator::intra_threads)
      .def("translate",
           [](PyTranslator& t, const std::vector<std::string>& lines, const Options& o) {
             return t.translate(lines, o, decode::InputFormat::raw);
           },
           py::call_guard<py::gil_scoped_release>())
      .def("translate_tokens",
           [](PyTranslator& t, const py::sequence& batch, const Options& o) {
             // A string is a sequence too: one given where a list of tokens belongs is refused, not
             // read as its characters.
             const char* shape = "translate_tokens takes a list of sentences, each a list of tokens: [['▁Ein', '▁Hund']]";
             if (py::isinstance<py::str>(batch) || py::isinstance<py::bytes>(batch)) throw py::type_error(shape);
             std::vector<std::string> lines;
             for (const auto item : batch) {
               if (py::isinstance<py::str>(item) || py::isinstance<py::bytes>(item)) {
                 throw py::type_error(std::string(shape) + "; got a string for sentence " + std::to_string(lines.size()));
               }
               lines.push_back(join_words(item.cast<std::vector<std::string>>()));
             }
             py::gil_scoped_release release;
             return t.translate(lines, o, decode::InputFormat::tokens);
           })
      .def("score", &PyTranslator::score, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("compute_type", &PyTranslator::compute_type)
      .def_property_readonly("compute_type_notice", &PyTranslator::compute_type_notice);
}

// Corpus scores as `leanseq score` computes them.
void add_scores(py::module_& m) {
  py::class_<eval::BleuScore>(m, "BLEUScore", "A corpus BLEU score as sacreBLEU 2.x computes it; str() prints leanseq score's line.")
      .def_readonly("score", &eval::BleuScore::score, "BLEU, 0 to 100")
      .def_readonly("precisions", &eval::BleuScore::precisions, "the 1- to 4-gram precisions, in percent")
      .def_readonly("bp", &eval::BleuScore::bp, "the brevity penalty")
      .def_readonly("signature", &eval::BleuScore::signature, "sacreBLEU's signature of the settings")
      .def_property_readonly(
          "sys_len", [](const eval::BleuScore& s) { return s.stats.sys_len; }, "the hypotheses' length in tokens")
      .def_property_readonly(
          "ref_len", [](const eval::BleuScore& s) { return s.stats.ref_len; }, "the references' effective length")
      .def("format", &eval::BleuScore::format, "the score as sacreBLEU prints it")
      .def("__str__", &eval::BleuScore::report)
      .def("__repr__", &eval::BleuScore::report);
  py::class_<eval::ChrfScore>(m, "CHRFScore", "A corpus chrF (or chrF++ with word_order=2) score as sacreBLEU 2.x computes it.")
      .def_readonly("score", &eval::ChrfScore::score, "chrF, 0 to 100")
      .def_readonly("name", &eval::ChrfScore::name, "chrF2 or chrF2++")
      .def("__str__", &eval::ChrfScore::format)
      .def("__repr__", &eval::ChrfScore::format);
  py::class_<eval::TerScore>(m, "TERScore", "A corpus TER score as sacreBLEU 2.x computes it.")
      .def_readonly("score", &eval::TerScore::score, "TER in percent: edits per reference word")
      .def_readonly("edits", &eval::TerScore::edits, "the edits over the corpus")
      .def_readonly("ref_length", &eval::TerScore::ref_length, "the references' average length, summed over sentences")
      .def("__str__", &eval::TerScore::format)
      .def("__repr__", &eval::TerScore::format);

  m.def(
      "bleu",
      [](const std::vector<std::string>& hyps, const py::object& refs, const std::string& tokenize, bool lowercase) {
        auto streams = reference_streams(refs, hyps.size());
        eval::BleuOptions o;
        o.tokenize = eval::parse_tokenize(tokenize);
        o.lowercase = lowercase;
        py::gil_scoped_release release;
        return eval::corpus_bleu(hyps, streams, o);
      },
      py::arg("hypotheses"), py::arg("references"), py::arg("tokenize") = "13a", py::arg("lowercase") = false,
      "Corpus BLEU of `hypotheses` against `references` (one list of lines, or several: one per reference set), as\n"
      "``leanseq score`` and sacreBLEU 2.x: tokenize 13a, intl, char or none.");
  m.def(
      "chrf",
      [](const std::vector<std::string>& hyps, const py::object& refs, int word_order, bool lowercase) {
        auto streams = reference_streams(refs, hyps.size());
        eval::ChrfOptions o;
        o.word_order = word_order;
        o.lowercase = lowercase;
        py::gil_scoped_release release;
        return eval::corpus_chrf(hyps, streams, o);
      },
      py::arg("hypotheses"), py::arg("references"), py::arg("word_order") = 0, py::arg("lowercase") = false,
      "Corpus chrF (word_order=2: chrF++) of `hypotheses` against `references`, as ``leanseq score --metric chrf``.");
  m.def(
      "ter",
      [](const std::vector<std::string>& hyps, const py::object& refs) {
        auto streams = reference_streams(refs, hyps.size());
        py::gil_scoped_release release;
        return eval::corpus_ter(hyps, streams, {});
      },
      py::arg("hypotheses"), py::arg("references"),
      "Corpus TER of `hypotheses` against `references`, as ``leanseq score --metric ter``.");
}

// fairseq checkpoints to leanseq ones.
void add_import(py::module_& m) {
  m.def(
      "import_fairseq",
      [](const std::string& checkpoint, const std::string& data_dir, const std::string& out, const std::string& spm,
         const std::string& tokenizer, const std::string& bpe_codes, const std::string& source_lang,
         const std::string& target_lang) {
        interop::FairseqImportOptions o{checkpoint, data_dir, out, spm, tokenizer, bpe_codes, source_lang, target_lang};
        interop::FairseqImportResult r;
        {
          py::gil_scoped_release release;
          r = interop::import_fairseq(o);
        }
        py::dict d;
        d["fairseq_arch"] = r.fairseq_arch;
        d["leanseq_arch"] = r.leanseq_arch;
        d["source_lang"] = r.source_lang;
        d["target_lang"] = r.target_lang;
        d["parameters"] = r.parameters;
        return d;
      },
      py::arg("checkpoint"), py::arg("data_dir"), py::arg("out"), py::arg("spm") = "", py::arg("tokenizer") = "",
      py::arg("bpe_codes") = "", py::arg("source_lang") = "", py::arg("target_lang") = "");
}
}  // namespace

PYBIND11_MODULE(_leanseq, m) {
  m.doc() = "leanseq: sequence-to-sequence models that pay less attention (translation, scoring, import)";
  m.attr("__version__") = kVersion;
  m.def("_read_replace_unk_dict", [](const std::string& path) { return decode::read_replace_unk_dict(path); },
        "a replace_unk dictionary file ('source target' lines) as a dict");
  m.def("_better_openblas_coretype", &better_openblas_coretype,
        "the OpenBLAS kernel family this process could run better than the loaded one (\"\": none)");
  m.def("_use_best_openblas_kernels", &use_best_openblas_kernels,
        "switch the loaded OpenBLAS to the best kernels the CPU supports, unless OPENBLAS_CORETYPE is set");
  // Python's signal handlers (SIGINT's KeyboardInterrupt among them) run on the thread that
  // imports the module, usually in the middle of a translation's products: on a stack of their own
  // (core/signal_stack.h), or a signal frame would land in the heap.
  use_alternate_signal_stack();

  // One-line messages, as the command line prints them.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ConfigError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const DataError& e) {
      const std::string what = e.what();
      PyErr_SetString(what.find("not found") != std::string::npos ? PyExc_FileNotFoundError : PyExc_ValueError,
                      what.c_str());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });

  add_translation(m);
  add_scores(m);
  python::add_toolkit(m);
  add_import(m);
}
