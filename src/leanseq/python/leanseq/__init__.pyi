import concurrent.futures
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

__version__: str

class Hypothesis:
    text: str
    tokens: List[str]
    score: Optional[float]
    positional_scores: Optional[List[float]]
    alignment: List[int]

class TranslationResult:
    hypotheses: List[Hypothesis]
    text: str
    tokens: List[str]
    score: Optional[float]

class BLEUScore:
    score: float
    precisions: List[float]
    bp: float
    signature: str
    sys_len: float
    ref_len: float
    def format(self) -> str: ...

class CHRFScore:
    score: float
    name: str

class TERScore:
    score: float
    edits: float
    ref_length: float

class Translator:
    path: str
    def __init__(self, path: str, device: str = "cpu", compute_type: str = "default", threads: int = 0,
                 inter_threads: int = 1, shortlist: Optional[str] = None) -> None: ...
    @property
    def inter_threads(self) -> int: ...
    @property
    def intra_threads(self) -> int: ...
    def translate_async(self, sentences: Sequence[str], **options: Any) -> "concurrent.futures.Future[List[TranslationResult]]": ...
    @property
    def compute_type(self) -> str: ...
    @property
    def compute_type_notice(self) -> str: ...
    def translate(self, sentences: Sequence[str], beam: int = 5, nbest: int = 1, lenpen: float = 1.0,
                  max_len_a: float = 0.0, max_len_b: int = 200, return_scores: bool = True,
                  return_alignment: bool = False, *, min_len: int = 1, unk_penalty: float = 0.0,
                  no_repeat_ngram_size: int = 0, sampling: bool = False, sampling_topk: int = -1,
                  sampling_topp: float = -1.0, temperature: float = 1.0, seed: Optional[int] = None,
                  prefix: Optional[str] = None, max_batch_size: int = 64, max_input_length: int = 1024,
                  constraints: Optional[Sequence[Sequence[str]]] = None, constraint_order: str = "ordered",
                  replace_unk: Union[bool, str, Mapping[str, str]] = False) -> List[TranslationResult]: ...
    def translate_tokens(self, tokens: Sequence[Sequence[str]], beam: int = 5, nbest: int = 1, lenpen: float = 1.0,
                         max_len_a: float = 0.0, max_len_b: int = 200, return_scores: bool = True,
                         return_alignment: bool = False, **options) -> List[TranslationResult]: ...
    def translate_iterable(self, iterable: Iterable[str], batch_size: int = 64, **options) -> Iterator[TranslationResult]: ...
    def score(self, sources: Sequence[str], targets: Sequence[str], batch_size: int = 64) -> List[List[float]]: ...

def bleu(hypotheses: Sequence[str], references: Sequence[Sequence[str]], tokenize: str = "13a",
         lowercase: bool = False) -> BLEUScore: ...
def chrf(hypotheses: Sequence[str], references: Sequence[Sequence[str]], word_order: int = 0,
         lowercase: bool = False) -> CHRFScore: ...
def ter(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> TERScore: ...
def import_fairseq(checkpoint: str, data_dir: str, out: str, spm: Optional[str] = None,
                   tokenizer: Optional[str] = None, bpe_codes: Optional[str] = None,
                   source_lang: Optional[str] = None, target_lang: Optional[str] = None) -> dict: ...

def prepare(src: str, tgt: str, train: str, valid: str, out: str, test: Optional[str] = None,
            vocab_size: int = 8000, joint: bool = True, spm_model: Optional[str] = None,
            model_type: str = "unigram", min_len: int = 1, max_len: int = 250, max_ratio: float = 3.0,
            lm: bool = False) -> dict: ...
def train(arch: Optional[str] = None, data: Optional[str] = None, save_dir: Optional[str] = None,
          config: Union[None, str, Sequence[str]] = None, set: Optional[Dict[str, object]] = None,
          task: Optional[str] = None, max_update: Optional[int] = None, max_epoch: Optional[int] = None,
          max_minutes: Optional[float] = None, seed: Optional[int] = None, threads: Optional[int] = None,
          device: Optional[str] = None, resume: bool = False,
          on_log: Optional[Callable[[dict], None]] = None) -> List[dict]: ...
def average(output: str, inputs: Optional[Sequence[str]] = None, dir: Optional[str] = None,
            last: int = 0, last_updates: int = 0) -> List[str]: ...
def quantize(checkpoint: str, out: str, type: str = "int8") -> dict: ...
def list_archs() -> List[dict]: ...
def config_keys(arch: str = "", task: str = "seq2seq") -> List[dict]: ...
