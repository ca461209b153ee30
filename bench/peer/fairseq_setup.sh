# Sourced by the peer scripts (fairseq.sh, prepare.sh, ctranslate2.sh): the checks that fairseq
# 0.12.2 can run here, and a copy of its tree with the C extensions built (the given tree is left as
# it is; copy_tree serves ct2_setup.sh too). Needs $py, $here, $work and die(), log() from the
# script that sources it; sets $fs to the built copy.

# leanseq keeps freed memory for reuse (jemalloc, dirty_decay_ms:-1), for requests of any size
# (lg_extent_max_active_fit:30), in transparent huge pages (thp:always, metadata_thp:always). glibc's malloc hands a large buffer's pages back and faults
# them in again when it is next allocated, which on some virtual machines costs a Python-hosted
# peer (fairseq's training, CTranslate2's batches) a third to half of its speed. kept_memory_env
# sets the array kept_memory to the same allocator and policy for a peer, preloaded
# (LD_PRELOAD=libjemalloc.so.2 MALLOC_CONF=...), the policy read from leanseq's own start-up line,
# or to nothing with one log line where leanseq does not use jemalloc or $py cannot preload it.
# Needs $leanseq.
kept_memory_env() {
  kept_memory=()
  local line conf=dirty_decay_ms:-1,lg_extent_max_active_fit:30
  line=$("$leanseq" --version | grep '^allocator: ' || true)
  case "$line" in *"huge pages"*) conf="$conf,thp:always,metadata_thp:always" ;; esac
  if [ "${line#allocator: jemalloc}" = "$line" ]; then
    log "peers keep their own allocator: $leanseq does not use jemalloc"
  elif LD_PRELOAD=libjemalloc.so.2 "$py" -c "raise SystemExit('libjemalloc' not in open('/proc/self/maps').read())" 2>/dev/null; then
    kept_memory=(LD_PRELOAD=libjemalloc.so.2 "MALLOC_CONF=$conf")
  else
    log "peers keep glibc's malloc: $py cannot preload libjemalloc.so.2"
  fi
}

check_fairseq() {
  [ -f "${FAIRSEQ_SRC:-/nonexistent}/fairseq/__init__.py" ] ||
    die "set FAIRSEQ_SRC to a fairseq 0.12.2 source tree (git clone -b v0.12.2 https://github.com/facebookresearch/fairseq)"
  $py -c 'import torch, omegaconf, numpy, Cython, regex, bitarray, tqdm, cffi' 2>/dev/null ||
    die "fairseq needs Debian's python3-torch python3-omegaconf python3-numpy cython3 python3-regex python3-bitarray python3-tqdm python3-cffi python3-dev python3-setuptools (apt-get install them)"
}

# A source tree copied afresh to $2 (emptied first), without its .git, build directories and
# built libraries: the peer tools are built in the copy, never in the tree they were given.
copy_tree() {
  rm -rf "$2" && mkdir -p "$2"
  (cd "$1" && tar cf - --exclude=.git --exclude='*.so' --exclude=build .) | (cd "$2" && tar xf -)
}

build_fairseq_copy() {
  fs="$work/fairseq"
  if [ ! -f "$fs/.built" ]; then
    log "copying $FAIRSEQ_SRC and building its extensions"
    copy_tree "$FAIRSEQ_SRC" "$fs"
    (cd "$fs" && $py "$here/build_extensions.py" >"$work/build_extensions.log" 2>&1) ||
      die "building fairseq's extensions failed; see $work/build_extensions.log"
    touch "$fs/.built"
  fi
}
