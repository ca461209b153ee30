#!/usr/bin/env bash
# pip builds and installs the package from the source tree into a fresh virtual environment, and a
# wheel of it into a second one that has no access to the tree's build: from outside the tree, each
# translates the fixture model as the command line does, with the helper inside the package.
#   pip_install.sh SOURCE_DIR BUILD_DIR PYTHON
set -euo pipefail
src=$(cd "$1" && pwd) build=$(cd "$2" && pwd) python=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/leanseq-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
fx=$src/tests/fixtures/pre_engine/seq2seq
unset LEANSEQ_SPM_HELPER PYTHONPATH
"$build/leanseq" translate --checkpoint "$fx/checkpoint_last.pt" -i "$fx/test.src" -o "$work/cli.txt" --threads 1 2>/dev/null

translate_with() {  # VENV OUT: from /, with that environment's leanseq
  (cd / && "$1/bin/python" - "$fx" "$2" <<'PY'
import os, sys
import leanseq
fx, out = sys.argv[1], sys.argv[2]
here = os.path.dirname(leanseq.__file__)
assert os.path.exists(os.path.join(here, "leanseq-spm")), "no helper in " + here
assert os.access(os.path.join(here, "_bin", "leanseq"), os.X_OK), "no leanseq executable in " + here
assert "transformer_small" in [a["name"] for a in leanseq.list_archs()]
t = leanseq.Translator(fx + "/checkpoint_last.pt", threads=1)
lines = [l.rstrip("\n") for l in open(fx + "/test.src", encoding="utf-8")]
open(out, "w", encoding="utf-8").write("".join(r.text + "\n" for r in t.translate(lines)))
import tempfile
with tempfile.TemporaryDirectory() as save:  # training runs the package's own executable
    records = leanseq.train(arch="transformer_tiny", data=fx + "/data", save_dir=save, max_update=2,
                            set={"log.interval": 1, "batch.max_tokens": 500})
    assert [r["update"] for r in records if r["type"] == "train"] == [1, 2], records
print("leanseq", leanseq.__version__, "from", here)
PY
  )
}

# 1. pip install . with Debian's setuptools and wheel (hence --system-site-packages).
"$python" -m venv --system-site-packages "$work/dev"
"$work/dev/bin/pip" install --no-build-isolation --no-deps --no-index "$src" >"$work/pip-install.log" 2>&1 \
  || { tail -30 "$work/pip-install.log"; exit 1; }
translate_with "$work/dev" "$work/installed.txt"
cmp "$work/installed.txt" "$work/cli.txt" || { echo "pip install .: translates otherwise than leanseq translate"; exit 1; }

# 2. A wheel, installed into a plain environment.
"$work/dev/bin/pip" wheel --no-build-isolation --no-deps --no-index -w "$work/wheels" "$src" >"$work/pip-wheel.log" 2>&1 \
  || { tail -30 "$work/pip-wheel.log"; exit 1; }
wheel=$(ls "$work"/wheels/leanseq-*.whl)
"$python" -m venv "$work/user"
"$work/user/bin/pip" install --no-deps --no-index "$wheel" >"$work/pip-wheel-install.log" 2>&1 \
  || { tail -30 "$work/pip-wheel-install.log"; exit 1; }
translate_with "$work/user" "$work/wheel.txt"
cmp "$work/wheel.txt" "$work/cli.txt" || { echo "the wheel translates otherwise than leanseq translate"; exit 1; }
echo "$(basename "$wheel"): installed and translated $(wc -l <"$work/wheel.txt") lines as leanseq translate"
