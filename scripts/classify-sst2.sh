#!/usr/bin/env bash
# SST-2 with the three sentence encoders under the same budget (the same epochs over the same
# batches): DiSAN, a mean-pooled Transformer encoder and a mean-pooled LightConv encoder.
# Prints one JSON line per model (test accuracy of checkpoint_best, wall time).
# Usage: scripts/classify-sst2.sh [EPOCHS] [OUT_DIR] [ARCHS...]
# Environment: THREADS (default 2), SEED (default 1), SETS (more config settings for every model,
# e.g. SETS="model.dropout=0.4 optim.lr_shrink=0.5").
set -euo pipefail
cd "$(dirname "$0")/.."
epochs=${1:-3}
out=${2:-runs/sst2}
shift $(( $# > 2 ? 2 : $# ))
archs=("$@")
[ ${#archs[@]} -eq 0 ] && archs=(disan transformer_classifier lightconv_classifier)
data=../shared/data/sst2
sets=()
for kv in ${SETS:-}; do sets+=(--set "$kv"); done
[ -f "$data/train.tsv" ] || { echo "classify-sst2: $data/train.tsv not found (see ../shared/data/sst2/README.txt)" >&2; exit 1; }
for arch in "${archs[@]}"; do
  dir=$out/$arch
  rm -rf "$dir" && mkdir -p "$out"
  start=$(date +%s)
  build/leanseq train --task classify -a "$arch" --set data.train=$data/train.tsv --set data.valid=$data/dev.tsv \
    --set data.test=$data/test.tsv --set valid.interval_updates=300 ${sets[@]+"${sets[@]}"} --max-epoch "$epochs" \
    --seed "${SEED:-1}" --save-dir "$dir" --threads "${THREADS:-2}" 2> "$dir.log" || { tail -3 "$dir.log" >&2; exit 1; }
  secs=$(( $(date +%s) - start ))
  python3 - "$arch" "$dir" "$secs" <<'PY'
import json, sys
arch, d, secs = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = json.load(open(d + "/test_report.json"))
best = max(r["accuracy"] for r in map(json.loads, open(d + "/train_log.jsonl")) if r.get("type") == "valid")
print(json.dumps({"arch": arch, "test_accuracy": round(100 * t["accuracy"], 2), "test_macro_f1": round(100 * t["macro_f1"], 2),
                  "best_valid_accuracy": round(100 * best, 2), "wall_seconds": secs}))
PY
done
