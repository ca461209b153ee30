"""leanseq: prepare, train, translate, score, quantize and import sequence-to-sequence models from Python.

The same C++ runtime as the ``leanseq`` command: ``Translator(path).translate(lines)`` gives what
``leanseq translate`` prints for those lines.
"""

import concurrent.futures
import os
from typing import Iterable, Iterator, List, Mapping, Optional, Sequence, Union

# OpenBLAS and libgomp read these once, when they are loaded: idle threads of each pool go to sleep
# soon instead of spinning against the other pool (docs/performance.md). A value already set is
# kept; a process that loaded them before (``import torch`` first) keeps what it has.
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
if "OMP_WAIT_POLICY" not in os.environ:
    os.environ.setdefault("GOMP_SPINCOUNT", "10000")

from . import _leanseq  # noqa: E402
from ._leanseq import (  # noqa: E402
    BLEUScore,
    CHRFScore,
    Hypothesis,
    TERScore,
    TranslationResult,
    __version__,
    bleu,
    chrf,
    config_keys,
    list_archs,
    ter,
)
from ._toolkit import average, prepare, quantize, train  # noqa: E402

# Debian's OpenBLAS takes CPUs it does not know for a Prescott and runs float32 products at a fifth
# of their speed: the library switches to the best kernels the CPU supports, as in leanseq's
# programs (core/blas.h), unless OPENBLAS_CORETYPE is set.
_leanseq._use_best_openblas_kernels()

__all__ = ["Translator", "TranslationResult", "Hypothesis", "bleu", "chrf", "ter", "import_fairseq",
           "prepare", "train", "average", "quantize", "list_archs", "config_keys",
           "BLEUScore", "CHRFScore", "TERScore", "__version__"]


def _options(seed=None, return_alignment=False, return_scores=True, constraints=None, constraint_order="ordered",
             replace_unk=False, **decoding):
    """A call's options: the decoding options (``_leanseq._decoding_options()``, declared once in
    C++ for the command line, the server and here) and those of Python's results."""
    o = _leanseq._Options()
    for name, value in decoding.items():
        o.set(name, value)
    o.seed = seed
    o.return_alignment = return_alignment
    o.return_scores = return_scores
    if constraints is not None:
        if isinstance(constraints, str) or any(isinstance(c, str) for c in constraints):
            raise ValueError("constraints must be a list of lists of strings, one list per sentence")
        o.constraints = [list(c) for c in constraints]
    o.constraint_order = constraint_order
    if isinstance(replace_unk, str):
        o.replace_unk, o.replace_unk_dict = True, _leanseq._read_replace_unk_dict(replace_unk)
    elif isinstance(replace_unk, Mapping):
        o.replace_unk, o.replace_unk_dict = True, dict(replace_unk)
    else:
        o.replace_unk = bool(replace_unk)
    return o


def _options_doc():
    """The decoding options' lines for translate()'s docstring."""
    lines = []
    for name, expected, default, help in _leanseq._decoding_options():
        lines.append(f"        - ``{name}``: {help} ({expected}; default {default or repr('')})")
    return "\n".join(lines) + "\n"


def _int(value, name):
    """An integer argument, or ValueError naming it (pybind11 raises TypeError past 64 bits)."""
    if isinstance(value, bool) or not isinstance(value, int) or not -2**63 <= value < 2**63:
        raise ValueError(f"{name} must be an integer that fits 64 bits (got {value!r})")
    return value


class Translator:
    """A checkpoint (or an ensemble, ``"a.pt:b.pt"``) loaded for translation.

    ``device``: "cpu", "cuda" or "cuda:N"; ``compute_type``: "default" (the checkpoint's own type),
    "auto" (the fastest on the device), "float32", "int8", "int8_bfloat16", "bfloat16" or "float16"
    (docs/fast.md); ``.compute_type`` says which runs, ``.compute_type_notice`` why, when another
    than asked. ``inter_threads``: translations run at once, on one copy of the weights (the
    sentences of a call are split between them, and calls from several Python threads or
    ``translate_async`` share them); ``threads``: CPU threads of each (0: the CPUs divided by
    ``inter_threads``, or the default for one; at most 4 x the CPUs, ValueError otherwise). The
    threads settings are the process's. Calls run without holding the GIL, so that other Python
    threads go on meanwhile. ``shortlist``: a vocabulary shortlist file (``leanseq shortlist``,
    CTranslate2's vmap format): each batch is searched over the target subwords it allows.
    """

    def __init__(self, path: str, device: str = "cpu", compute_type: str = "default", threads: int = 0,
                 inter_threads: int = 1, shortlist: Optional[str] = None):
        if not isinstance(path, str):
            raise ValueError("path must be a string")
        self._t = _leanseq._Translator(path, device, compute_type, _int(threads, "threads"),
                                       _int(inter_threads, "inter_threads"), shortlist or "")
        self._executor = None
        self.path = path

    @property
    def inter_threads(self) -> int:
        """Translations that run at once."""
        return self._t.inter_threads

    @property
    def intra_threads(self) -> int:
        """CPU threads of each translation."""
        return self._t.intra_threads

    def translate_async(self, sentences: Sequence[str], **options) -> "concurrent.futures.Future":
        """``translate(sentences, **options)`` started in the background: a
        ``concurrent.futures.Future`` whose ``result()`` is the list of results. Up to
        ``inter_threads`` such calls decode at once."""
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=self.inter_threads,
                                                                   thread_name_prefix="leanseq")
        return self._executor.submit(self.translate, sentences, **options)

    @property
    def compute_type(self) -> str:
        """The type the products run in ("float32", "int8", ...)."""
        return self._t.compute_type

    @property
    def compute_type_notice(self) -> str:
        """Why the type differs from the one asked for (empty when it does not)."""
        return self._t.compute_type_notice

    def translate(self, sentences: Sequence[str], **options) -> List[TranslationResult]:
        """Translates raw sentences; one result per sentence (``.text``, ``.tokens``, ``.score``,
        ``.hypotheses`` for the n-best). An empty sentence, or one that is not valid UTF-8, has an
        empty result, as ``leanseq translate`` writes an empty line for it. Options out of range
        raise ValueError with the command line's message; an unknown one TypeError.

        Options of the results: ``return_scores`` (True; scores None with False),
        ``return_alignment`` (False; with True each hypothesis' ``.alignment``: per target token
        the source position it attends most), ``seed`` (of sampling), ``constraints`` (one list
        of target texts per sentence that its translation must contain, fairseq's --constraints,
        met in their order or, with ``constraint_order="unordered"``, in any), ``replace_unk``
        (True puts in place of each <unk> the source subword it attends most; a path to a
        dictionary file, "source target" lines, or a dict translates that subword).

        Decoding options, as ``leanseq translate``'s flags:

"""
        if isinstance(sentences, str):
            raise ValueError("sentences must be a list of strings, not one string")
        return self._t.translate(list(sentences), _options(**options))

    def translate_tokens(self, tokens: Sequence[Sequence[str]], **options) -> List[TranslationResult]:
        """Translates sentences given as subword tokens (the model's dictionary symbols), with
        translate()'s options; ``constraints`` as tokens too: per sentence a list of token lists."""
        if options.get("constraints") is not None:
            options["constraints"] = [[" ".join(c) for c in cs] for cs in options["constraints"]]
        return self._t.translate_tokens([list(t) for t in tokens], _options(**options))

    def translate_iterable(self, iterable: Iterable[str], batch_size: int = 64, **options) -> Iterator[TranslationResult]:
        """Translates a long or endless iterable of sentences ``batch_size`` at a time, yielding
        results in order as each batch is done."""
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        batch = []
        for line in iterable:
            batch.append(line)
            if len(batch) == batch_size:
                yield from self.translate(batch, **options)
                batch = []
        if batch:
            yield from self.translate(batch, **options)

    def score(self, sources: Sequence[str], targets: Sequence[str], batch_size: int = 64) -> List[List[float]]:
        """Forced decoding: each target's per-token log-probabilities given its source (``</s>`` last)."""
        return self._t.score(list(sources), list(targets), batch_size)


Translator.translate.__doc__ += _options_doc()


def import_fairseq(checkpoint: str, data_dir: str, out: str, spm: Optional[str] = None,
                   tokenizer: Optional[str] = None, bpe_codes: Optional[str] = None,
                   source_lang: Optional[str] = None, target_lang: Optional[str] = None) -> dict:
    """``leanseq import-fairseq``: a fairseq checkpoint as a leanseq checkpoint at ``out``.

    Its text pipeline: ``spm`` (a SentencePiece model), or ``tokenizer`` ("moses": fairseq's Moses
    with its dash splits and escaping; "moses no-dash-splits", "moses no-escape"; "none": the text
    comes tokenized) with optional ``bpe_codes`` (subword-nmt's or fastBPE's)."""
    return _leanseq.import_fairseq(checkpoint, data_dir, out, spm or "", tokenizer or "", bpe_codes or "",
                                   source_lang or "", target_lang or "")
