# Sourced by ctranslate2.sh and argos.sh. alternate_decodes: for each round, batch size and
# compute type, runs `decode ctranslate2 TYPE BATCH ROUND` and `decode leanseq TYPE BATCH ROUND`
# (the sourcing script's function), alternating which goes first from one pair to the next.
alternate_decodes() {  # rounds "batch sizes" "compute types"
  local turn=0 round b t
  for round in $(seq 1 "$1"); do
    for b in $2; do
      for t in $3; do
        if [ $((turn % 2)) = 0 ]; then decode ctranslate2 "$t" "$b" "$round"; decode leanseq "$t" "$b" "$round"
        else decode leanseq "$t" "$b" "$round"; decode ctranslate2 "$t" "$b" "$round"; fi
        turn=$((turn + 1))
      done
    done
  done
}

# Each tool's layout for several cores: CTranslate2's replicas and leanseq's workers must divide
# the threads between them evenly (the sourcing script's die() otherwise).
check_layout() {  # threads replicas workers
  [ $(($1 % $2)) = 0 ] || die "--ct2-replicas $2 does not divide --threads $1"
  [ $(($1 % $3)) = 0 ] || die "--leanseq-workers $3 does not divide --threads $1"
}

# The CPU's model name and the flags that decide each tool's kernels, for a sitting's header line.
cpu_summary() {
  local name flags f have=()
  name=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  flags=" $(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo | head -1) "
  for f in avx2 avx512f avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16; do
    [[ "$flags" == *" $f "* ]] && have+=("$f")
  done
  echo "$name (${have[*]:-no AVX2}), $(nproc) cores"
}
