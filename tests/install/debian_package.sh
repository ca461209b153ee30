#!/usr/bin/env bash
# cpack -G DEB makes a package with the executable, its helper, the library and the CMake package,
# whose Depends name the Debian libraries they link (LibTorch's among them); unpacked anywhere, its
# leanseq runs and translates as the build's does.
#   debian_package.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/leanseq-deb.XXXXXX")
trap 'rm -rf "$work"' EXIT
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1) \
  || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/out/leanseq_*_amd64.deb)
depends=$(dpkg-deb -f "$deb" Depends)
libs=(libtorch1.13 libsentencepiece0 libcpp-httplib0.11 libdnnl2 libicu72 libyaml-cpp0.7 libcld2-0 libgumbo1)
grep -q '^LEANSEQ_JEMALLOC:BOOL=ON' "$build/CMakeCache.txt" && libs+=(libjemalloc2)
for lib in "${libs[@]}"; do
  [[ $depends == *"$lib "* || $depends == *"$lib," ]] || { echo "Depends lacks $lib: $depends"; exit 1; }
done
dpkg-deb -x "$deb" "$work/root"
for f in usr/bin/leanseq usr/libexec/leanseq/leanseq-spm usr/lib/libleanseq.so usr/lib/cmake/leanseq/leanseqConfig.cmake \
         usr/include/leanseq/translator.h; do
  [[ -e $work/root/$f ]] || { echo "not in the package: $f"; exit 1; }
done
unset LEANSEQ_SPM_HELPER
"$work/root/usr/bin/leanseq" --version
fx=$src/tests/fixtures/pre_engine/seq2seq
"$work/root/usr/bin/leanseq" translate --checkpoint "$fx/checkpoint_last.pt" -i "$fx/test.src" -o "$work/deb.txt" --threads 1 2>/dev/null
"$build/leanseq" translate --checkpoint "$fx/checkpoint_last.pt" -i "$fx/test.src" -o "$work/built.txt" --threads 1 2>/dev/null
cmp "$work/deb.txt" "$work/built.txt" || { echo "the packaged leanseq translates otherwise"; exit 1; }
echo "$(basename "$deb"): Depends: $depends"
