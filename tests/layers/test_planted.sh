#!/usr/bin/env bash
# test_planted.sh SOURCE_DIR SCRATCH_DIR [CMAKE_ARGS...]: the build's layer checks (server/layers.txt)
# on server/'s real libraries, in a scratch build of their own (IDEM_TESTS=OFF, target idem_layers):
# the clean tree builds; each wrong-way call or #include planted by -DIDEM_PLANTED_LAYER_BREACH
# (tests/layers/*.c) fails `cmake --build` with a line naming both layers; the clean tree builds
# again. Only the planted file recompiles between the builds.
set -uo pipefail
src=$1 scratch=$2
shift 2
extra=("$@")
log=$scratch.log
fails=0

# build BREACH: configure the scratch tree with BREACH planted (empty: none) and build idem_layers;
# its output in $log, its exit status returned
build() {
  {
    cmake -S "$src" -B "$scratch" -DIDEM_TESTS=OFF -DIDEM_PLANTED_LAYER_BREACH="$1" "${extra[@]}" &&
      cmake --build "$scratch" -j2 --target idem_layers
  } >"$log" 2>&1
}

clean() {
  if build ""; then
    echo "clean tree: built; $(grep -E '^(layers links|check-includes):' "$log" | tr '\n' ' ')"
  else
    echo "FAIL: the clean tree does not build; its last lines:"
    tail -n 30 "$log"
    fails=$((fails + 1))
  fi
}

# planted BREACH REGEX: the build with BREACH must fail, and print a line matching REGEX
planted() {
  local breach=$1 want=$2
  if build "$breach"; then
    echo "FAIL: $breach: the build passed"
    fails=$((fails + 1))
  elif line=$(grep -E "$want" "$log"); then
    echo "$breach: the build failed: $line"
  else
    echo "FAIL: $breach: the build failed without a line matching /$want/; its last lines:"
    tail -n 30 "$log"
    fails=$((fails + 1))
  fi
}

clean
planted store-calls-coord '^layer store \([0-9]+\) calls coord_check_wait_ms of layer coord \([0-9]+\), a higher layer'
planted coord-calls-rpc '^layer coord \([0-9]+\) calls rpc_init of layer rpc \([0-9]+\), a higher layer'
planted coord-includes-rpc 'coord \(layer [0-9]+\) includes a higher layer.s rpc/ \(layer [0-9]+\)'
clean
[ "$fails" = 0 ] && echo "test_planted: every planted breach failed the build, the clean tree built" ||
  echo "test_planted: $fails failure(s)"
[ "$fails" = 0 ]
