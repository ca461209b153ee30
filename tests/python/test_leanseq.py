"""The Python module against the command line it shares its runtime with: the same translations,
the same scores, one-line exceptions, and two threads translating at once."""

import json
import os
import random
import re
import subprocess
import sys
import threading

import pytest

import leanseq

CLI = os.environ["LEANSEQ_CLI"]
SHARED = os.environ.get("LEANSEQ_SHARED_DIR", "")


def run(*args, input=None):
    return subprocess.run([CLI, *args], input=input, capture_output=True, text=True, check=True)


def write_task(prefix, n, seed):
    """The synthetic task of the C++ end-to-end tests: aN words to bN words."""
    rng = random.Random(seed)
    with open(prefix + ".src", "w") as s, open(prefix + ".tgt", "w") as t:
        for _ in range(n):
            words = [rng.randrange(20) for _ in range(rng.randrange(3, 9))]
            s.write(" ".join(f"a{w}" for w in words) + "\n")
            t.write(" ".join(f"b{w}" for w in words) + "\n")


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("task"))
    for split, n, seed in (("train", 2000, 1), ("valid", 50, 2), ("test", 100, 3)):
        write_task(f"{d}/{split}", n, seed)
    run("prepare", "--src", "src", "--tgt", "tgt", "--train", f"{d}/train", "--valid", f"{d}/valid",
        "--test", f"{d}/test", "--out", f"{d}/bin", "--vocab-size", "60")
    run("train", "--arch", "transformer_tiny", "--data", f"{d}/bin", "--save-dir", f"{d}/ck", "--seed", "3",
        "--max-update", "200", "--set", "batch.max_tokens=1000", "--set", "optim.lr=0.003",
        "--set", "optim.warmup_updates=50")
    return f"{d}/ck/checkpoint_last.pt"


LINES = ["a1 a2 a3", "a4 a5", "a6 a7 a8 a9 a10", "a11"]


def test_openblas_runs_the_best_kernels_the_cpu_supports():
    # The module switched the library when it was imported, unless the environment had a value of its own.
    if os.environ.get("LEANSEQ_SET_OPENBLAS_CORETYPE") != "1" and "OPENBLAS_CORETYPE" in os.environ:
        pytest.skip("OPENBLAS_CORETYPE set outside: " + os.environ["OPENBLAS_CORETYPE"])
    assert leanseq._leanseq._better_openblas_coretype() == ""


def test_translations_equal_the_command_line(checkpoint):
    t = leanseq.Translator(checkpoint)
    got = t.translate(LINES, beam=5, max_len_a=0, max_len_b=12)
    cli = run("translate", "--checkpoint", checkpoint, "--beam", "5", "--max-len-a", "0", "--max-len-b", "12",
              input="\n".join(LINES) + "\n").stdout.splitlines()
    assert [r.text for r in got] == cli
    assert all(r.tokens and r.score < 0 for r in got)
    # n-best: best first, as the command line's --nbest lists them.
    best3 = t.translate(LINES[:1], beam=5, nbest=3, max_len_b=12)[0]
    assert len(best3.hypotheses) == 3
    assert best3.text == got[0].text
    assert [h.score for h in best3.hypotheses] == sorted((h.score for h in best3.hypotheses), reverse=True)
    # Pre-tokenized input: a line's subword pieces (fairseq format's S line) translate alike.
    s_line = next(l for l in run("translate", "--checkpoint", checkpoint, "--output-format", "fairseq",
                                 "--max-len-b", "12", input=LINES[2] + "\n").stdout.splitlines() if l.startswith("S-0"))
    pieces = s_line.split("\t")[1].split()
    assert t.translate_tokens([pieces], beam=5, max_len_b=12)[0].text == got[2].text


def test_translate_iterable_and_score(checkpoint):
    t = leanseq.Translator(checkpoint)
    alone = t.translate(LINES, beam=1, max_len_b=12)
    assert [r.text for r in t.translate_iterable(iter(LINES), batch_size=3, beam=1, max_len_b=12)] == [r.text for r in alone]
    # Forced decoding of greedy outputs gives the search's own per-token scores.
    scores = t.score(LINES, [r.text for r in alone])
    for s, r in zip(scores, alone):
        assert len(s) == len(r.hypotheses[0].positional_scores)
        assert s == pytest.approx(r.hypotheses[0].positional_scores, abs=1e-4)
    # Sampling: reproducible per seed.
    a = t.translate(LINES, beam=3, nbest=3, sampling=True, seed=5, max_len_b=10)
    b = t.translate(LINES, beam=3, nbest=3, sampling=True, seed=5, max_len_b=10)
    assert [[h.text for h in r.hypotheses] for r in a] == [[h.text for h in r.hypotheses] for r in b]
    # Without scores, and with alignments: one source position per target token.
    plain = t.translate(LINES, beam=2, max_len_b=12, return_scores=False, return_alignment=True)
    assert [r.text for r in plain] == [r.text for r in t.translate(LINES, beam=2, max_len_b=12)]
    assert all(r.score is None and r.hypotheses[0].positional_scores is None for r in plain)
    assert all(len(r.hypotheses[0].alignment) == len(r.tokens) for r in plain)
    # A prefix starts every translation.
    assert all(r.text.startswith("b7") for r in t.translate(LINES, prefix="b7", max_len_b=10))


def test_metrics_equal_leanseq_score(tmp_path, checkpoint):
    hyps = [r.text for r in leanseq.Translator(checkpoint).translate(LINES, beam=2, max_len_b=12)]
    refs = ["b1 b2 b3", "b4 b5", "b6 b7 b8 b9 b10", "b11"]
    (tmp_path / "hyp").write_text("\n".join(hyps) + "\n")
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    for metric, fn in (("bleu", leanseq.bleu), ("chrf", leanseq.chrf), ("ter", leanseq.ter)):
        line = run("score", "--ref", str(tmp_path / "ref"), "--hyp", str(tmp_path / "hyp"), "--metric", metric).stdout.strip()
        s = fn(hyps, [refs])
        assert str(s) == line
        assert float(re.search(r"= ([0-9.]+)", line).group(1)) == pytest.approx(s.score, abs=0.005)
    assert "nrefs:1" in leanseq.bleu(hyps, [refs]).signature
    assert leanseq.__version__


def test_errors_are_python_exceptions_with_the_command_lines_messages(tmp_path, checkpoint):
    with pytest.raises(FileNotFoundError, match="missing.pt: checkpoint not found"):
        leanseq.Translator(str(tmp_path / "missing.pt"))
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(RuntimeError, match="bad.pt"):
        leanseq.Translator(str(bad))
    t = leanseq.Translator(checkpoint)
    with pytest.raises(ValueError, match=re.escape("beam: expected an integer in [1, 1024], got 0")):
        t.translate(LINES, beam=0)
    with pytest.raises(ValueError, match=re.escape("nbest: expected at most beam (2), got 3")):
        t.translate(LINES, beam=2, nbest=3)
    with pytest.raises(ValueError, match=re.escape("beam: expected an integer in [1, 1024], got '5'")):
        t.translate(LINES, beam="5")
    with pytest.raises(TypeError, match="unexpected keyword argument 'bean'"):
        t.translate(LINES, bean=5)
    with pytest.raises(ValueError, match="unknown compute type 'int4'"):
        leanseq.Translator(checkpoint, compute_type="int4")
    with pytest.raises(ValueError, match="cuda:7"):
        leanseq.Translator(checkpoint, device="cuda:7")
    with pytest.raises(ValueError, match="reference stream has 1 segments"):
        leanseq.bleu(["a", "b"], [["a"]])
    with pytest.raises(ValueError):
        t.translate("one string, not a list")


def test_compute_types_equal_the_command_lines(tmp_path, checkpoint):
    for compute_type in ("int8", "bfloat16"):
        t = leanseq.Translator(checkpoint, compute_type=compute_type)
        if t.compute_type_notice:
            # A CPU without the instructions (bfloat16 needs AVX-512) falls back to float32 and says so;
            # the command line then falls back alike.
            assert t.compute_type == "float32" and compute_type == "bfloat16", t.compute_type_notice
        else:
            assert t.compute_type == compute_type
        cli = run("translate", "--checkpoint", checkpoint, "--compute-type", compute_type,
                  input="\n".join(LINES) + "\n").stdout.splitlines()
        assert [r.text for r in t.translate(LINES)] == cli
    # float16 is for CUDA: on the CPU it falls back to float32 and says why.
    t = leanseq.Translator(checkpoint, compute_type="float16")
    assert t.compute_type == "float32" and "CUDA" in t.compute_type_notice
    assert leanseq.Translator(checkpoint).compute_type == "float32"


def test_two_threads_translating_at_once_get_their_own_results(checkpoint):
    t = leanseq.Translator(checkpoint)
    inputs = [LINES * 5, list(reversed(LINES)) * 5]
    expected = [[r.text for r in t.translate(x, beam=3, max_len_b=12)] for x in inputs]
    got = [None, None]

    def work(i):
        got[i] = [r.text for r in t.translate(inputs[i], beam=3, max_len_b=12)]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert got == expected


def test_inter_threads_decode_on_one_model_as_one_thread_does(checkpoint):
    rng = random.Random(5)
    lines = [" ".join(f"a{rng.randrange(20)}" for _ in range(rng.randrange(1, 9))) for _ in range(60)]
    one = leanseq.Translator(checkpoint, threads=1)
    serial = one.translate(lines, beam=4, nbest=2, max_len_b=12, max_batch_size=7)
    pool = leanseq.Translator(checkpoint, inter_threads=3, threads=1)
    assert (pool.inter_threads, pool.intra_threads) == (3, 1)
    parallel = pool.translate(lines, beam=4, nbest=2, max_len_b=12, max_batch_size=7)
    assert [[h.text for h in r.hypotheses] for r in parallel] == [[h.text for h in r.hypotheses] for r in serial]
    for p, s in zip(parallel, serial):
        for hp, hs in zip(p.hypotheses, s.hypotheses):
            assert hp.positional_scores == pytest.approx(hs.positional_scores, abs=1e-5)
    # Calls in the background, one sentence each, share the workers and keep their order.
    futures = [pool.translate_async([line], beam=4, max_len_b=12) for line in lines]
    assert [f.result()[0].text for f in futures] == [r.text for r in serial]
    with pytest.raises(ValueError, match="inter_threads"):
        leanseq.Translator(checkpoint, inter_threads=0)


def test_prepare_train_average_quantize_from_python_as_the_command_line(tmp_path):
    d = str(tmp_path)
    for split, n, seed in (("train", 400, 1), ("valid", 30, 2), ("test", 30, 3)):
        write_task(f"{d}/{split}", n, seed)
    report = leanseq.prepare("src", "tgt", f"{d}/train", f"{d}/valid", f"{d}/py-bin", test=f"{d}/test", vocab_size=60)
    assert [s["name"] for s in report["splits"]] == ["train", "valid", "test"] and report["splits"][0]["lines"] == 400
    run("prepare", "--src", "src", "--tgt", "tgt", "--train", f"{d}/train", "--valid", f"{d}/valid",
        "--test", f"{d}/test", "--out", f"{d}/cli-bin", "--vocab-size", "60")
    keys = {"batch.max_tokens": 600, "optim.lr": 0.003, "optim.warmup_updates": 10, "log.interval": 5,
            "checkpoint.save_interval_updates": 10, "checkpoint.no_epoch_checkpoints": True}
    seen = []
    records = leanseq.train(arch="transformer_tiny", data=f"{d}/py-bin", save_dir=f"{d}/py", set=keys,
                            max_update=30, seed=4, threads=1, on_log=seen.append)
    run("train", "--arch", "transformer_tiny", "--data", f"{d}/cli-bin", "--save-dir", f"{d}/cli", "--max-update", "30",
        "--seed", "4", "--threads", "1", *[a for k, v in keys.items() for a in ("--set", f"{k}={str(v).lower()}")])
    # Every record the run wrote to its log, in order, reached the callback.
    logged = [json.loads(line) for line in open(f"{d}/py/train_log.jsonl")]
    assert seen == records and [r["update"] for r in seen] == [r["update"] for r in logged] and len(seen) >= 6
    # The same weights: the two checkpoints give the same log-probabilities, bit for bit.
    py, cli = (leanseq.Translator(f"{d}/{w}/checkpoint_last.pt", threads=1) for w in ("py", "cli"))
    assert py.score(LINES, ["b1 b2 b3", "b4 b5", "b6", "b11"]) == cli.score(LINES, ["b1 b2 b3", "b4 b5", "b6", "b11"])
    averaged = leanseq.average(f"{d}/avg.pt", dir=f"{d}/py", last_updates=2)
    assert [os.path.basename(p) for p in averaged] == ["checkpoint_4_30.pt", "checkpoint_3_20.pt"]
    run("average", "--dir", f"{d}/py", "--last-updates", "2", "-o", f"{d}/avg-cli.pt")
    assert leanseq.Translator(f"{d}/avg.pt").score(LINES[:1], ["b1"]) == leanseq.Translator(f"{d}/avg-cli.pt").score(LINES[:1], ["b1"])
    q = leanseq.quantize(f"{d}/py/checkpoint_last.pt", f"{d}/q.pt")
    assert q["bytes"] == os.path.getsize(f"{d}/q.pt") and q["float32_bytes"] > 0
    assert leanseq.Translator(f"{d}/q.pt").compute_type == "int8"
    with pytest.raises(ValueError, match="unknown key 'optim.lrr'"):
        leanseq.train(arch="transformer_tiny", data=f"{d}/py-bin", save_dir=f"{d}/bad", set={"optim.lrr": 1})
    with pytest.raises(ValueError, match="type"):
        leanseq.quantize(f"{d}/py/checkpoint_last.pt", f"{d}/q2.pt", type="int4")


def test_presets_and_config_keys_as_the_command_line():
    archs = leanseq.list_archs()
    assert [a["name"] for a in archs] == [line.split("\t")[0] for line in run("list-archs").stdout.splitlines()]
    keys = {k["key"]: k for k in leanseq.config_keys("transformer_iwslt_de_en")}
    assert keys["model.encoder.ffn_embed_dim"]["default"] == "1024" and keys["optim.lr"]["type"] == "float"
    assert "model.encoder" in {k["key"] for k in leanseq.config_keys(task="classify")}
    with pytest.raises(ValueError, match="task"):
        leanseq.config_keys(task="summarize")


def test_a_keyboard_interrupt_saves_and_stops_training(tmp_path):
    d = str(tmp_path)
    for split, n, seed in (("train", 400, 1), ("valid", 30, 2)):
        write_task(f"{d}/{split}", n, seed)
    leanseq.prepare("src", "tgt", f"{d}/train", f"{d}/valid", f"{d}/bin", vocab_size=60)

    def interrupt(record):
        if record["update"] >= 10:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        leanseq.train(arch="transformer_tiny", data=f"{d}/bin", save_dir=f"{d}/ck", max_update=100000,
                      set={"log.interval": 5, "batch.max_tokens": 600}, on_log=interrupt)
    # The run saved where it stopped, and goes on from there.
    records = leanseq.train(arch="transformer_tiny", data=f"{d}/bin", save_dir=f"{d}/ck", max_update=20,
                            set={"log.interval": 5, "batch.max_tokens": 600}, resume=True)
    assert records and 10 < records[0]["update"] <= 20


def test_import_fairseq_then_translate_as_fairseq_interactive(tmp_path):
    src = os.path.join(SHARED, "fixtures", "fairseq-pt", "fconv")
    if not os.path.isdir(src):
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail("../shared/fixtures/fairseq-pt is absent, and CI=true requires the reference files")
        pytest.skip("../shared/fixtures/fairseq-pt is absent")
    info = leanseq.import_fairseq(f"{src}/model.pt", src, str(tmp_path / "m.pt"), spm=f"{src}/spm.model",
                                  source_lang="de", target_lang="en")
    assert info["fairseq_arch"] == "fconv" and info["parameters"] == 458192
    lines = open(f"{src}/input.de").read().splitlines()[:5]
    expected = {}
    for line in open(f"{src}/interactive.beam5.txt"):
        if line.startswith("D-"):
            i, _, text = line.rstrip("\n").split("\t")
            expected[int(i[2:])] = text
    got = leanseq.Translator(str(tmp_path / "m.pt")).translate(lines, beam=5)
    assert [r.text for r in got] == [expected[i] for i in range(5)]


# Run in a fresh interpreter: pytest's faulthandler gives the main thread a signal stack of its own,
# which a user's interpreter does not have.
SIGNALS_SCRIPT = """
import ctypes, os, signal, sys, threading, time
import leanseq
class StackT(ctypes.Structure):
    _fields_ = [("ss_sp", ctypes.c_void_p), ("ss_flags", ctypes.c_int), ("ss_size", ctypes.c_size_t)]
ss = StackT()
assert ctypes.CDLL(None).sigaltstack(None, ctypes.byref(ss)) == 0
print("signal stack", ss.ss_size if not ss.ss_flags & 2 else 0)  # 2: SS_DISABLE
t = leanseq.Translator(sys.argv[1], compute_type="float32", threads=1)
lines = sys.argv[2:]
expected = [r.text for r in t.translate(lines, beam=5, max_len_b=12)]
received = 0
def on_usr1(signum, frame):
    global received
    received += 1
signal.signal(signal.SIGUSR1, on_usr1)
stop, sent = threading.Event(), [0]
def send():
    while not stop.is_set():
        os.kill(os.getpid(), signal.SIGUSR1)
        sent[0] += 1
        time.sleep(0.0001)
sender = threading.Thread(target=send, daemon=True)
sender.start()
translations, same = 0, True
deadline = time.monotonic() + 2
while time.monotonic() < deadline:
    same = same and [r.text for r in t.translate(lines, beam=5, max_len_b=12)] == expected
    translations += 1
stop.set()
sender.join()
print(sent[0], received, translations, same)
"""


def test_signals_in_the_middle_of_translations_leave_them_and_the_heap_intact(checkpoint):
    # Python's handlers interrupt a translation's products (oneDNN's JIT sgemm points the stack
    # register into the heap while it runs: tests/train/test_signals.cpp) and its SentencePiece
    # helper's reads and writes. Importing the module gives the importing thread a signal stack
    # for the handlers, and the pipes' calls resume (without that, the translation failed: "the
    # SentencePiece helper exited unexpectedly").
    env = dict(os.environ, PYTHONFAULTHANDLER="")
    r = subprocess.run([sys.executable, "-c", SIGNALS_SCRIPT, checkpoint, *LINES], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    stack, result = r.stdout.splitlines()
    assert int(stack.split()[-1]) >= 16384
    sent, received, translations, same = result.split()
    assert int(sent) > 1000 and int(received) > 0 and int(translations) > 10
    assert same == "True"


def test_bad_input_follows_the_command_lines_rules(checkpoint):
    t = leanseq.Translator(checkpoint)
    # An empty sentence, or bytes that are not UTF-8: an empty result, as translate writes an empty line.
    got = t.translate(["", LINES[0], b"a1 \xff a2"])
    assert got[0].text == "" and got[0].hypotheses == []
    assert got[1].text == t.translate([LINES[0]])[0].text
    assert got[2].text == "" and got[2].hypotheses == []
    # Options out of range are ValueErrors naming the option, not RuntimeErrors from deep inside.
    for options, name in (({"sampling": True, "sampling_topk": -5}, "sampling_topk"),
                          ({"sampling": True, "sampling_topp": -1.5}, "sampling_topp"),
                          ({"lenpen": float("nan")}, "lenpen"), ({"max_len_b": -100}, "max_len_b"),
                          ({"beam": 10**12}, "beam"), ({"max_input_length": -1}, "max_input_length")):
        with pytest.raises(ValueError, match=name):
            t.translate(LINES, **options)
    for threads in (-3, 10**6, 10**30):
        with pytest.raises(ValueError, match="threads"):
            leanseq.Translator(checkpoint, threads=threads)
    # A sentence longer than max_input_length is cut to it, not refused, as by the command line.
    long = " ".join(f"a{i % 20}" for i in range(300))
    cli = subprocess.run([CLI, "translate", "--checkpoint", checkpoint, "--max-input-length", "8"], input=long + "\n",
                         capture_output=True, text=True, check=True)
    assert "longer than --max-input-length 8" in cli.stderr
    assert t.translate([long], max_input_length=8)[0].text == cli.stdout.strip()
    assert t.translate([long], max_input_length=8)[0].text != t.translate([long], max_input_length=0)[0].text


def test_translators_made_in_parallel_all_load_and_leave_no_temporary_files(checkpoint, tmp_path, monkeypatch):
    # Each SentencePiece model goes to a private directory of its own (mkdtemp): a fixed per-process
    # name made concurrent constructions fail ("cannot load SentencePiece model").
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    errors, made = [], []

    def load():
        try:
            made.append(leanseq.Translator(checkpoint).translate([LINES[0]])[0].text)
        except Exception as e:  # noqa: BLE001 - every failure is reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=load) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    assert len(set(made)) == 1 and len(made) == 6
    assert os.listdir(tmp_path) == []


def _fixture_or_skip(*parts):
    path = os.path.join(SHARED, *parts)
    if not os.path.isdir(path):
        if os.environ.get("CI") in ("true", "1"):
            pytest.fail(f"{path} is absent, and CI=true requires the reference files")
        pytest.skip(f"{path} is absent")
    return path


def test_import_fairseq_then_constraints_and_replace_unk(tmp_path):
    """constraints= gives fairseq-interactive --constraints' translations (the fixture's D lines);
    replace_unk= puts source subwords, or their dictionary entries, in place of <unk>s."""
    src = _fixture_or_skip("fixtures", "fairseq-pt", "transformer")
    here = os.path.join(os.path.dirname(__file__), "..", "fixtures", "fairseq-constraints")
    leanseq.import_fairseq(f"{src}/model.pt", src, str(tmp_path / "m.pt"), spm=f"{src}/spm.model",
                           source_lang="de", target_lang="en")
    t = leanseq.Translator(str(tmp_path / "m.pt"))
    rows = [line.split("\t") for line in open(f"{here}/input.de", encoding="utf-8").read().splitlines()[:6]]
    for order in ("ordered", "unordered"):
        expected = {}
        for line in open(f"{here}/transformer.{order}.txt", encoding="utf-8"):
            if line.startswith("D-"):
                i, _, text = line.rstrip("\n").split("\t")
                expected[int(i[2:])] = text
        got = t.translate([r[0] for r in rows], constraints=[r[1:] for r in rows], constraint_order=order)
        assert [r.text for r in got] == [expected[i] for i in range(6)]
    with pytest.raises(ValueError, match=r"constraints\[0\]: an empty constraint"):
        t.translate(["Ein Hund."], constraints=[[""]])
    with pytest.raises(ValueError, match="one list per sentence"):
        t.translate(["Ein Hund.", "Eine Katze."], constraints=[["dog"]])
    with pytest.raises(ValueError, match="constraint_order"):
        t.translate(["Ein Hund."], constraints=[["dog"]], constraint_order="sideways")

    lines = [r[0] for r in rows]
    plain = t.translate(lines, unk_penalty=-10, return_alignment=True)
    unks = sum(h.tokens.count("<unk>") for r in plain for h in r.hypotheses)
    assert unks > 0
    replaced = t.translate(lines, unk_penalty=-10, replace_unk=True, return_alignment=True)
    for before, after in zip(plain, replaced):
        assert "<unk>" not in after.tokens
        for k, tok in enumerate(before.tokens):
            if tok == "<unk>":
                assert after.tokens[k] != "<unk>" and after.tokens[k] != ""
            else:
                assert after.tokens[k] == tok
    mapped = t.translate(lines, unk_penalty=-10, replace_unk={tok: "X" for r in replaced for tok in r.tokens})
    for before, after in zip(plain, mapped):
        assert [a for b, a in zip(before.tokens, after.tokens) if b == "<unk>"] == ["X"] * before.tokens.count("<unk>")
    dict_file = tmp_path / "unk.txt"
    dict_file.write_text("onlyone\n")
    with pytest.raises(ValueError, match="unk.txt:1"):
        t.translate(lines, replace_unk=str(dict_file))
    # A shortlist: of three subwords, every translation uses only them.
    (tmp_path / "three.txt").write_text("\t▁A ▁man .\n", encoding="utf-8")
    short = leanseq.Translator(str(tmp_path / "m.pt"), shortlist=str(tmp_path / "three.txt"))
    for r in short.translate(lines):
        assert set(r.tokens) <= {"▁A", "▁man", ".", "<unk>"}
    with pytest.raises(FileNotFoundError):
        leanseq.Translator(str(tmp_path / "m.pt"), shortlist=str(tmp_path / "absent.txt"))


def test_a_bad_option_gets_one_message_from_the_command_line_the_server_and_python(tmp_path, checkpoint):
    """Each decoding option is declared and checked once (decode/option_table.h): the same bad
    value gives the same line through ``leanseq translate``, /v1/translate, LibreTranslate's
    /translate (a form's text too) and Python."""
    import urllib.error
    import urllib.parse
    import urllib.request

    log = open(tmp_path / "serve.log", "w")
    server = subprocess.Popen([CLI, "serve", "--checkpoint", checkpoint, "--host", "127.0.0.1", "--port", "0"],
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        port = None
        for _ in range(300):
            found = re.search(r"listening on http://127.0.0.1:(\d+)/", open(tmp_path / "serve.log").read())
            if found:
                port = int(found.group(1))
                break
            threading.Event().wait(0.1)
        assert port, open(tmp_path / "serve.log").read()

        def http_error(path, body, content_type):
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                             headers={"Content-Type": content_type})
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(request, timeout=60)
            assert e.value.code == 400
            return json.loads(e.value.read())["error"]

        t = leanseq.Translator(checkpoint)
        for name, flag, value, message in (
                ("beam", "--beam", 0, "beam: expected an integer in [1, 1024], got 0"),
                ("beam", "--beam", 1025, "beam: expected an integer in [1, 1024], got 1025"),
                ("lenpen", "--lenpen", 2e6, "lenpen: expected a finite number in [-1e+06, 1e+06], got 2e+06"),
                ("max_len_b", "--max-len-b", -1, "max_len_b: expected an integer in [0, 65536], got -1")):
            cli = subprocess.run([CLI, "translate", "--checkpoint", checkpoint, flag, str(value)], input="a1\n",
                                 capture_output=True, text=True)
            assert cli.returncode == 2, cli.stderr
            assert cli.stderr.strip().splitlines() == ["leanseq: error: " + message]
            with pytest.raises(ValueError) as e:
                t.translate(LINES, **{name: value})
            assert str(e.value) == message
            assert http_error("/v1/translate", json.dumps({"text": "a1", name: value}).encode(),
                              "application/json") == message
            assert http_error("/translate", json.dumps({"q": "a1", "source": "src", "target": "tgt",
                                                        name: value}).encode(), "application/json") == message
            form = urllib.parse.urlencode({"q": "a1", "source": "src", "target": "tgt", name: str(value)}).encode()
            assert http_error("/translate", form, "application/x-www-form-urlencoded") == message
        # A good value is taken by each, and translates alike.
        want = [r.text for r in t.translate(["a1 a2"], beam=2, max_len_b=12)]
        cli = run("translate", "--checkpoint", checkpoint, "--beam", "2", "--max-len-b", "12", input="a1 a2\n")
        assert cli.stdout.splitlines() == want
        body = json.dumps({"text": "a1 a2", "beam": 2, "max_len_b": 12}).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/translate", data=body,
                                         headers={"Content-Type": "application/json"})
        assert json.loads(urllib.request.urlopen(request, timeout=60).read())["translations"][0]["text"] == want[0]
    finally:
        server.terminate()
        server.wait()
        log.close()


def test_a_ctranslate2_directory_translates_as_ctranslate2_and_the_command_line():
    """Translator(path) on a CTranslate2 model directory (tests/fixtures/ctranslate2, written by
    CTranslate2's own converters) gives CTranslate2's tokens, greedy and beam 5, as translate does."""
    here = os.path.join(os.path.dirname(__file__), "..", "fixtures", "ctranslate2", "spec-postnorm")
    lines = open(f"{here}/input.txt", encoding="utf-8").read().splitlines()
    t = leanseq.Translator(here, compute_type="float32")
    for name, beam in (("greedy", 1), ("beam5", 5)):
        expected = open(f"{here}/out.{name}.txt", encoding="utf-8").read().splitlines()
        got = [" ".join(r.tokens) for r in t.translate_tokens([l.split() for l in lines], beam=beam, max_len_b=64)]
        assert sum(a == b for a, b in zip(got, expected)) >= 49, name
        cli = run("translate", "--checkpoint", here, "--input-format", "tokens", "--compute-type", "float32",
                  "--beam", str(beam), "--max-len-b", "64", input="\n".join(lines) + "\n").stdout.splitlines()
        assert got == cli
