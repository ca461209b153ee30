#!/usr/bin/env bash
# Runs LibreTranslate's own API tests (libretranslate/tests/test_api of a LibreTranslate checkout)
# over HTTP against `leanseq serve`, with CHECKPOINT served as an en-es pair as those tests expect
# (they start LibreTranslate with --load-only en,es). The tests are copied to a private directory
# beside scripts/libretranslate/conftest.py, which gives them an HTTP client in place of Flask's.
#   scripts/libretranslate-api-tests.sh LIBRETRANSLATE_DIR CHECKPOINT
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -ne 2 ]; then
  echo "usage: scripts/libretranslate-api-tests.sh LIBRETRANSLATE_DIR CHECKPOINT" >&2
  exit 2
fi
tests="$1/libretranslate/tests/test_api"
[ -d "$tests" ] || { echo "no $tests: give a LibreTranslate checkout" >&2; exit 2; }
[ -f "$2" ] || { echo "no checkpoint $2" >&2; exit 2; }
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT
cp "$tests"/test_*.py "$work"/
cp scripts/libretranslate/conftest.py "$work"/
printf -- '- name: en-es\n  checkpoint: %s\n  source: en\n  target: es\n' "$(realpath "$2")" > "$work/models.yaml"
build/leanseq serve --models "$work/models.yaml" --port 0 --max-len-b 10 > "$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  grep -q "listening on" "$work/serve.log" && break
  sleep 0.2
done
port=$(grep -o 'listening on http://127.0.0.1:[0-9]*' "$work/serve.log" | grep -o '[0-9]*$') || {
  cat "$work/serve.log" >&2
  exit 1
}
cd "$work"
LT_URL="http://127.0.0.1:$port" /usr/bin/python3 -m pytest -v -p no:cacheprovider .
