"""The toolkit beyond translation: prepare, train, average, quantize (``leanseq.prepare`` etc.)."""

import json
import os
import signal
import subprocess
import sys
import threading
from typing import Callable, Dict, List, Optional, Sequence, Union

from . import _leanseq


def prepare(src: str, tgt: str, train: str, valid: str, out: str, test: Optional[str] = None,
            vocab_size: int = 8000, joint: bool = True, spm_model: Optional[str] = None,
            model_type: str = "unigram", min_len: int = 1, max_len: int = 250, max_ratio: float = 3.0,
            lm: bool = False) -> dict:
    """``leanseq prepare``: a SentencePiece model (trained, or ``spm_model``), fairseq dictionaries
    and binarized splits of ``<train>.<src>``/``<train>.<tgt>`` (and valid, test) in ``out``. With
    ``lm=True``, a monolingual language-model corpus in language ``src``. Returns the counts per
    split (lines, kept, tokens, unknown tokens), the vocabulary sizes and ``report``, the text
    ``leanseq prepare`` prints."""
    return _leanseq._prepare(src, "" if lm else tgt, train, valid, test or "", out, vocab_size, joint,
                             spm_model or "", model_type, min_len, max_len, max_ratio, lm)


def average(output: str, inputs: Optional[Sequence[str]] = None, dir: Optional[str] = None,
            last: int = 0, last_updates: int = 0) -> List[str]:
    """``leanseq average``: the mean of the parameters of ``inputs``, or of the ``last`` epoch
    checkpoints (``last_updates``: update checkpoints) of the save directory ``dir``, written to
    ``output``. Returns the checkpoints averaged."""
    if dir is not None:
        if (last > 0) == (last_updates > 0):
            raise ValueError("average: with dir, give last or last_updates (one of them)")
        return _leanseq._average([], output, dir, last or last_updates, last_updates > 0)
    if not inputs:
        raise ValueError("average: give inputs, or dir with last or last_updates")
    return _leanseq._average(list(inputs), output, "", 0, False)


def quantize(checkpoint: str, out: str, type: str = "int8") -> dict:
    """``leanseq quantize``: ``checkpoint``'s weights stored in ``type`` (int8, bfloat16 or
    float16) in ``out``, without optimizer state. Returns ``bytes`` (the file) and
    ``float32_bytes`` (the model's weights in float32)."""
    return _leanseq._quantize(checkpoint, out, type)


def _executable() -> str:
    """The leanseq command that trains: $LEANSEQ_EXECUTABLE, the package's own, or the build tree's."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path in (os.environ.get("LEANSEQ_EXECUTABLE"), os.path.join(here, "_bin", "leanseq"),
                 os.path.join(here, "..", "..", "leanseq")):
        if path and os.access(path, os.X_OK) and os.path.isfile(path):
            return path
    raise RuntimeError("the leanseq executable was not found (in the package's _bin/ or the build tree); "
                       "set LEANSEQ_EXECUTABLE to its path")


def _flag_value(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def train(arch: Optional[str] = None, data: Optional[str] = None, save_dir: Optional[str] = None,
          config: Union[None, str, Sequence[str]] = None, set: Optional[Dict[str, object]] = None,
          task: Optional[str] = None, max_update: Optional[int] = None, max_epoch: Optional[int] = None,
          max_minutes: Optional[float] = None, seed: Optional[int] = None, threads: Optional[int] = None,
          device: Optional[str] = None, resume: bool = False,
          on_log: Optional[Callable[[dict], None]] = None) -> List[dict]:
    """``leanseq train``, run by the leanseq executable (the same engine, so the same checkpoints
    for the same config and seed): ``arch``, ``data`` (a ``prepare`` directory), ``save_dir``,
    ``config`` (YAML files, applied in order), ``set`` (config keys to values, as ``--set``; see
    ``config_keys``), the stopping flags, ``seed``, ``threads``, ``device``, ``resume``. Every log
    record (a dict: type "train" or "valid", update, epoch, loss, ...) goes to ``on_log`` as it is
    written, and the list of them is returned. The command's own log lines go to standard error.
    KeyboardInterrupt stops training as SIGINT does: the run saves its checkpoint and ends, then
    the exception goes on. A failed run raises ValueError (a config error, exit code 2) or
    RuntimeError, with the command's message."""
    cmd = [_executable(), "train", "--log-format", "json"]
    for name, value in (("--arch", arch), ("--data", data), ("--save-dir", save_dir), ("--task", task),
                        ("--max-update", max_update), ("--max-epoch", max_epoch), ("--max-minutes", max_minutes),
                        ("--seed", seed), ("--threads", threads), ("--device", device)):
        if value is not None:
            cmd += [name, _flag_value(value)]
    for path in ([config] if isinstance(config, str) else list(config or [])):
        cmd += ["--config", path]
    for key, value in (set or {}).items():
        cmd += ["--set", f"{key}={_flag_value(value)}"]
    if resume:
        cmd.append("--resume")
    # Its own session: a Ctrl-C in the terminal reaches Python, which passes on exactly one SIGINT.
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    errors: List[str] = []

    def relay():
        for line in proc.stderr:
            sys.stderr.write(line)
            if ": error: " in line:
                errors.append(line.split(": error: ", 1)[1].strip())

    relay_thread = threading.Thread(target=relay, daemon=True)
    relay_thread.start()
    records: List[dict] = []
    interrupted = None
    try:
        for line in proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            records.append(record)
            if on_log is not None:
                on_log(record)
        proc.wait()
    except KeyboardInterrupt as e:
        interrupted = e
        proc.send_signal(signal.SIGINT)
        for _ in proc.stdout:
            pass
        proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        relay_thread.join()
    if interrupted is not None:
        raise interrupted
    if proc.returncode == 2:
        raise ValueError(errors[-1] if errors else f"leanseq train: exit code 2 ({' '.join(cmd)})")
    if proc.returncode != 0 and proc.returncode != 128 + signal.SIGTERM:
        raise RuntimeError(errors[-1] if errors else f"leanseq train: exit code {proc.returncode}")
    return records
