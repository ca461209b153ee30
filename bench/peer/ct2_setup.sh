# Sourced by ctranslate2.sh: builds CTranslate2 from the source tree in $CT2_SRC, CPU only, into
# $work/ctranslate2 (once; the given tree is left as it is), and puts its Python module on
# PYTHONPATH. Needs $py, $work and die(), log() from the script that sources it, and copy_tree()
# from fairseq_setup.sh.
#
# The build is the one a CPU-only machine without Intel MKL can make from Debian packages: products
# on oneDNN (libdnnl-dev), GNU OpenMP, no command-line clients. Debian 12's oneDNN is 2.6, and
# CTranslate2 after 3.2 writes its Conv1D (used only by speech models) for oneDNN 3's API: in the
# copy, that file falls back to CTranslate2's own Conv1D when oneDNN is older than 3.

build_ctranslate2() {
  local ct2="$work/ctranslate2"
  if [ ! -f "$ct2/.built" ]; then
    [ -f "$CT2_SRC/CMakeLists.txt" ] && [ -f "$CT2_SRC/python/setup.py" ] ||
      die "CT2_SRC=$CT2_SRC is not a CTranslate2 source tree (git clone --recursive https://github.com/OpenNMT/CTranslate2)"
    for sub in spdlog cpu_features; do
      [ -f "$CT2_SRC/third_party/$sub/CMakeLists.txt" ] ||
        die "$CT2_SRC/third_party/$sub is empty: clone with --recursive, or run git submodule update --init third_party/$sub there"
    done
    command -v cmake >/dev/null && [ -f /usr/include/dnnl.hpp ] ||
      die "building CTranslate2 needs cmake and libdnnl-dev (apt-get install them)"
    $py -c 'import pybind11, setuptools, numpy, yaml' 2>/dev/null ||
      die "CTranslate2's Python module needs python3-pybind11 python3-setuptools python3-numpy python3-yaml python3-dev (apt-get install them)"
    log "copying $CT2_SRC and building it (CPU only, oneDNN; $ct2/build.log)"
    rm -rf "$ct2" && copy_tree "$CT2_SRC" "$ct2/src"
    local conv="$ct2/src/src/ops/conv1d_cpu.cc"
    if [ -f "$conv" ] && grep -q '^#ifdef CT2_WITH_DNNL$' "$conv"; then
      $py - "$conv" <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
guard = ("#ifdef CT2_WITH_DNNL\n#  include <dnnl_version.h>\n#endif\n"
         "#if defined(CT2_WITH_DNNL) && DNNL_VERSION_MAJOR >= 3\n")
open(path, "w").write(text.replace("#ifdef CT2_WITH_DNNL\n", guard, 1))
EOF
    fi
    {
      cmake -S "$ct2/src" -B "$ct2/build" -DCMAKE_BUILD_TYPE=Release -DWITH_MKL=OFF -DWITH_DNNL=ON \
        -DOPENMP_RUNTIME=COMP -DBUILD_CLI=OFF -DCMAKE_INSTALL_PREFIX="$ct2/install" -DCMAKE_INSTALL_LIBDIR=lib &&
        cmake --build "$ct2/build" -j "$(nproc)" && cmake --install "$ct2/build" &&
        (cd "$ct2/src/python" && CTRANSLATE2_ROOT="$ct2/install" LDFLAGS="-Wl,-rpath,$ct2/install/lib" \
          $py setup.py build_ext --inplace)
    } >"$ct2/build.log" 2>&1 || die "building CTranslate2 failed; see $ct2/build.log"
    touch "$ct2/.built"
  fi
  export PYTHONPATH="$ct2/src/python${PYTHONPATH:+:$PYTHONPATH}"
}
