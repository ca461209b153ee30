#!/usr/bin/env bash
# Resident memory of `leanseq serve` with four language pairs (en-de, de-en, en-es, es-en) of one
# checkpoint: at start, after a request to one pair, after a request to each. One JSON object.
#   bench/serve_memory.sh CHECKPOINT [SERVE FLAGS...]     e.g. --lazy, --threads 1
set -euo pipefail
[ $# -ge 1 ] && [ -f "$1" ] || { echo "usage: bench/serve_memory.sh CHECKPOINT [SERVE FLAGS...]" >&2; exit 2; }
cli="$(cd "$(dirname "$0")/.." && pwd)/build/leanseq"
checkpoint=$(realpath "$1")
shift
work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"' EXIT
for pair in en-de de-en en-es es-en; do
  printf -- '- name: %s\n  checkpoint: %s\n  source: %s\n  target: %s\n' "$pair" "$checkpoint" "${pair%-*}" "${pair#*-}"
done > "$work/models.yaml"
"$cli" serve --models "$work/models.yaml" --port 0 "$@" > "$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "listening on" "$work/serve.log" && break; sleep 0.2; done
port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/serve.log" | grep -o '[0-9]*$') || { cat "$work/serve.log" >&2; exit 1; }
rss() { awk '/VmRSS/ {print int($2 / 1024)}' "/proc/$pid/status"; }
ask() {
  curl -sf "localhost:$port/translate" -H 'Content-Type: application/json' \
       -d "{\"q\": \"A man rides a bike.\", \"source\": \"$1\", \"target\": \"$2\"}" > /dev/null
}
start=$(rss); ask en de; one=$(rss); ask de en; ask en es; ask es en; four=$(rss)
echo "{\"bench\": \"serve_memory\", \"flags\": \"$*\", \"started_mib\": $start, \"one_pair_used_mib\": $one, \"four_pairs_used_mib\": $four}"
