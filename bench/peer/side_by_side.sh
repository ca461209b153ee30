# Sourced by ctranslate2.sh and argos.sh: for each round, batch size and compute type, runs
# `decode ctranslate2 TYPE BATCH ROUND` and `decode leanseq TYPE BATCH ROUND` (the sourcing
# script's function), alternating which goes first from one pair to the next.
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
