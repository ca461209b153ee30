#!/usr/bin/env bash
# Installs the build into a fresh prefix, then checks that what is installed works without the
# build tree: the installed leanseq translates with its helper from libexec/; the headers are
# include/leanseq/*.h only, with standard headers only; the library exports the API of
# docs/versioning.md only; and the program of docs/cpp.md (its two files, taken from the page
# itself) builds against find_package(leanseq), without LibTorch's headers, and translates as the
# command does.
#   install_and_build.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/leanseq-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix model=$src/tests/fixtures/pre_engine/seq2seq/checkpoint_last.pt
input=$src/tests/fixtures/pre_engine/seq2seq/test.src

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
for f in bin/leanseq libexec/leanseq/leanseq-spm lib/libleanseq.so lib/cmake/leanseq/leanseqConfig.cmake \
         include/leanseq/leanseq.h include/leanseq/translator.h include/leanseq/version.h share/doc/leanseq/LICENSE; do
  [[ -e $prefix/$f ]] || { echo "not installed: $f"; exit 1; }
done
other=$(cd "$prefix/include" && find . -mindepth 1 ! -path './leanseq' ! -path './leanseq/*.h')
[[ -z $other ]] || { echo "installed besides include/leanseq/*.h: $other"; exit 1; }
if grep -n '#include' "$prefix"/include/leanseq/*.h | grep -v -E '#include <([a-z_]+|leanseq/[a-z_]+\.h)>$'; then
  echo "an installed header includes more than standard headers and its own"; exit 1
fi
# Every symbol the library exports is the API's (its classes' type information included).
exported=$(nm -D --defined-only "$prefix/lib/libleanseq.so" | awk '{print $3}' | c++filt \
  | grep -v -E '^leanseq::(Translator|TranslationOptions)::|^leanseq::(import_fairseq|score_corpus)\(|^(typeinfo|typeinfo name|vtable) for leanseq::(Error|ConfigError|DataError|CheckpointError)$' || true)
[[ -z $exported ]] || { echo "libleanseq.so exports more than the API:"; echo "$exported" | head; exit 1; }

# The installed command, with nothing pointing at the build tree.
unset LEANSEQ_SPM_HELPER
"$prefix/bin/leanseq" --version | grep -q "^leanseq $(sed -n 's/^project(leanseq VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")" \
  || { echo "installed leanseq --version: wrong version"; exit 1; }
"$prefix/bin/leanseq" translate --checkpoint "$model" -i "$input" -o "$work/installed.txt" --threads 1
"$build/leanseq" translate --checkpoint "$model" -i "$input" -o "$work/built.txt" --threads 1
cmp "$work/installed.txt" "$work/built.txt" || { echo "the installed leanseq translates otherwise"; exit 1; }

# docs/cpp.md's program, built outside the tree against the installed package.
mkdir "$work/app"
awk '/^```cpp$/{on=1; next} /^```$/{on=0} on' "$src/docs/cpp.md" >"$work/app/translate.cpp"
awk '/^```cmake$/{on=1; next} /^```$/{on=0} on' "$src/docs/cpp.md" >"$work/app/CMakeLists.txt"
[[ -s $work/app/translate.cpp && -s $work/app/CMakeLists.txt ]] || { echo "docs/cpp.md: no cpp or cmake block"; exit 1; }
cmake -S "$work/app" -B "$work/app/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/app.log" 2>&1 \
  || { cat "$work/app.log"; exit 1; }
cmake --build "$work/app/build" >>"$work/app.log" 2>&1 || { cat "$work/app.log"; exit 1; }
if ldd "$work/app/build/translate" | grep -q "$build"; then echo "the program links the build tree"; exit 1; fi
OMP_NUM_THREADS=1 "$work/app/build/translate" "$model" <"$input" >"$work/app.txt"
cmp "$work/app.txt" "$work/built.txt" || { echo "docs/cpp.md's program translates otherwise"; diff "$work/app.txt" "$work/built.txt" | head; exit 1; }
echo "installed in $prefix: leanseq, its helper, the library and the package; the program translates $(wc -l <"$work/app.txt") lines as leanseq does"
