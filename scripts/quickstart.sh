#!/usr/bin/env bash
# The main job: installs what is missing, builds, then builds a Spanish-English corpus from Debian's
# public-domain Bible modules, trains a small ConvS2S (fconv_small) for a few minutes, translates the test
# set and prints BLEU, speed and sample translations. Arguments go to `leanseq quickstart`
# (e.g. --minutes 30, or --train/--valid/--test/--src/--tgt for your own parallel text).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec build/leanseq quickstart "$@"
