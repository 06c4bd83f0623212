#!/bin/sh
# Tuning sweep (not a test): builds scripts/bench/kernels/cpu_kernels.cc with blocking variants (the TESSERA_*
# macros of native/cpu) and runs each on the given cores.
#   sh scripts/bench/kernels/tune.sh [rows] [cores] [variant...]      variant = name:flags, e.g. mc48:-DTESSERA_GEMM_MC=48
rows=${1:-4096}
cores=${2:-0,1}
shift 2 2>/dev/null
variants=${*:-"base: kc384:-DTESSERA_GEMM_KC=384 t8x48:-DTESSERA_AVX512_MR=8,-DTESSERA_AVX512_NV=3"}
src="native/common/*.cc native/gpu/*.cc native/cpu/*.cc scripts/bench/kernels/cpu_kernels.cc"
for v in $variants; do
  name=${v%%:*}
  flags=$(echo "${v#*:}" | tr ',' ' ')
  g++ -std=c++20 -O3 -ffp-contract=off -Inative $flags $src -lpthread -o /tmp/tune-$name &
done
wait
for v in $variants; do
  name=${v%%:*}
  echo "### $name"
  taskset -c $cores /tmp/tune-$name --simd avx512 --threads 2 --rows $rows --reps 2
done
