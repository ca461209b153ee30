#!/usr/bin/env bash
# docs/reference/{cli,config,python}.md are what scripts/reference/generate.sh writes from this
# build: a changed --help, config key or docstring without the regenerated page fails here.
#   references_up_to_date.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/leanseq-reference.XXXXXX")
trap 'rm -rf "$work"' EXIT
bash "$src/scripts/reference/generate.sh" "$build" "$work"
stale=0
for page in cli config python; do
  if ! diff -u "$src/docs/reference/$page.md" "$work/$page.md" >"$work/$page.diff"; then
    echo "docs/reference/$page.md is stale: run scripts/reference/generate.sh"
    head -20 "$work/$page.diff"
    stale=1
  fi
done
exit $stale
