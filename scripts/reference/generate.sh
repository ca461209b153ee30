#!/usr/bin/env bash
# Writes the generated reference pages from a build: cli.md (every command's --help), config.md
# (train --list-keys: the run's keys, then each model family's) and python.md (the module's
# docstrings). Tests/Docs.ReferencesAreUpToDate compares them with docs/reference/.
#   scripts/reference/generate.sh [BUILD_DIR [OUT_DIR]]     (defaults: build, docs/reference)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../../build}" && pwd)
out=${2:-$here/../../docs/reference}
mkdir -p "$out"
# Each page is written beside its place and moved there whole; a failed run leaves no part of one.
trap 'rm -f "$out"/*.md.tmp' EXIT
leanseq=$build/leanseq
# The help text wraps at CLI11's fixed widths; the environment must not change it.
export COLUMNS=100 LC_ALL=C.UTF-8

# Each program start loads LibTorch (about a second), so each --help runs once; its text is kept
# whole (a command substitution would drop its trailing newlines).
help_of() {
  help=$("$leanseq" "$@" --help 2>&1 && printf x)
  help=${help%x}
}
block() { printf '```text\n%s```\n\n' "$1"; }
subcommands() { awk '/^Subcommands:/{on=1; next} on && NF {print $1}' <<<"$1"; }

{
  echo "# Command reference"
  echo
  echo "Generated from \`leanseq --help\` and every command's \`--help\` (scripts/reference/generate.sh);"
  echo "the guides in [docs/](../index.md) say when to use what."
  echo
  help_of
  block "$help"
  subcommands "$help" | while read -r cmd; do
    echo "## leanseq $cmd"
    echo
    help_of "$cmd"
    block "$help"
    subcommands "$help" | while read -r sub; do
      echo "### leanseq $cmd $sub"
      echo
      help_of "$cmd" "$sub"
      block "$help"
    done
  done
} >"$out/cli.md.tmp"
mv "$out/cli.md.tmp" "$out/cli.md"

{
  echo "# Config keys"
  echo
  echo "Generated from \`leanseq train --list-keys\` (scripts/reference/generate.sh). Every key is set the"
  echo "same way: in a YAML file (\`-c\`, nested or dotted), with \`--set key=value\`, or by the flag that"
  echo "names it. Later wins: the family's defaults < the preset (\`arch\`) < config files < \`--set\` < flags."
  echo "\`leanseq train --list-keys --arch A\` prints the keys and values of any preset."
  echo
  echo "## A sequence-to-sequence run (translation, language models)"
  echo
  echo "The keys of every run, with \`transformer_small\`'s values; the \`model.*\` keys of each family follow."
  echo
  "$leanseq" train --list-keys | grep -v '^| `model\.'
  echo
  echo "## A text classification run (\`--task classify\`)"
  echo
  echo "With \`disan\`'s values."
  echo
  "$leanseq" train --list-keys --task classify --arch disan
  "$leanseq" list-archs | awk -F'\t' '$2 != "classifier" && !seen[$2]++ {print $2 "\t" $1}' | while IFS=$'\t' read -r family arch; do
    echo
    echo "## Model keys: $family"
    echo
    echo "With \`$arch\`'s values (\`leanseq list-archs\` names every preset of the family)."
    echo
    "$leanseq" train --list-keys --arch "$arch" | awk 'NR <= 2 || /^\| `model\./'
  done
} >"$out/config.md.tmp"
mv "$out/config.md.tmp" "$out/config.md"

PYTHONPATH=$build/python python3 "$here/python_reference.py" >"$out/python.md.tmp"
mv "$out/python.md.tmp" "$out/python.md"
