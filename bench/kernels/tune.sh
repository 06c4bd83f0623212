#!/bin/sh
# Tuning sweep (not a test): builds bench/kernels/cpu_kernels.cc with blocking variants (the TESSERA_*
# macros of native/cpu), runs them in turn for ROUNDS rounds (alternating, so that a busy minute on this
# shared machine hits every variant alike) and prints each op's median per-cpu GFLOP/s per variant.
#   [SIMD=avx2] [ROUNDS=5] [THREADS=1] [DTYPE=bf16] sh bench/kernels/tune.sh [rows] [cores] [variant...]
#   variant = name:flags, e.g. mc48:-DTESSERA_GEMM_MC=48 (flags comma-separated; "base:" = no flags)
# BIN=dir: run the binaries dir/tune-<name> built earlier (e.g. -static, for another machine) instead.
rows=${1:-4096}
cores=${2:-0,1}
shift 2 2>/dev/null
simd=${SIMD:-avx512}
rounds=${ROUNDS:-3}
threads=${THREADS:-2}
dtype=${DTYPE:-bf16}
variants=${*:-"base: kc384:-DTESSERA_GEMM_KC=384 t8x48:-DTESSERA_AVX512_MR=8,-DTESSERA_AVX512_NV=3"}
src="native/common/*.cc native/backend/*.cc native/cpu/*.cc bench/kernels/cpu_kernels.cc"
log=$(mktemp)
bin=${BIN:-$(mktemp -d)}  # /tmp is shared: a directory of our own
if [ -z "$BIN" ]; then
  for v in $variants; do
    name=${v%%:*}
    flags=$(echo "${v#*:}" | tr ',' ' ')
    g++ -std=c++20 -O3 -ffp-contract=off -Inative $flags $src ${LDFLAGS:-} -lpthread -o $bin/tune-$name &
  done
  wait
fi
r=1
while [ $r -le $rounds ]; do
  for v in $variants; do
    name=${v%%:*}
    taskset -c $cores $bin/tune-$name --simd $simd --threads $threads --rows $rows --reps 1 --dtype $dtype |
      sed 's/  (27 blocks.*//' |
      awk -v n=$name -v r=$r '/^  / && $1 != "op" { nm = substr($0, 3, 28); sub(/ +$/, "", nm); print n "\t" r "\t" nm "\t" $NF }' >>"$log"
  done
  r=$((r + 1))
done
# median per (variant, op) of the last column (per-cpu GFLOP/s, or ms for ops without a FLOP count)
sort -t "$(printf '\t')" -k3,3 -k1,1 -k4,4g "$log" | awk -F '\t' '
  { key = $3 "\t" $1; v[key, ++n[key]] = $4; if (!(key in seen)) { seen[key] = 1; order[++m] = key } }
  END { for (i = 1; i <= m; ++i) { k = order[i]; c = n[k]; printf "%-44s %8s\n", k, v[k, int((c + 1) / 2)] } }'
rm -f "$log"
