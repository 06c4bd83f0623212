#!/bin/sh
# Tuning sweep (not a test): builds bench/cpu_kernels.cc with several blocking variants (the
# TESSERA_* macros of native/cpu) and runs each on 2 cores. Usage: sh bench/tune.sh [rows] [cores]
rows=${1:-4096}
cores=${2:-0,1}
src="native/common/*.cc native/gpu/*.cc native/cpu/*.cc bench/cpu_kernels.cc"
build() { g++ -std=c++20 -O3 -ffp-contract=off -Inative $2 $src -lpthread -o /tmp/tune-$1; }
build base "" &
build mc192 "-DTESSERA_GEMM_MC=192" &
build mc48 "-DTESSERA_GEMM_MC=48" &
build kc192 "-DTESSERA_GEMM_KC=192" &
build kc384 "-DTESSERA_GEMM_KC=384" &
build mr14 "-DTESSERA_AVX512_MR=14" &
build t6x64 "-DTESSERA_AVX512_MR=6 -DTESSERA_AVX512_NV=4" &
build t8x48 "-DTESSERA_AVX512_MR=8 -DTESSERA_AVX512_NV=3" &
build nvk8 "-DTESSERA_AVX512_ATTN_NVK=8" &
build nvk2 "-DTESSERA_AVX512_ATTN_NVK=2" &
wait
for v in base mc192 mc48 kc192 kc384 mr14 t6x64 t8x48 nvk8 nvk2; do
  echo "### $v"
  taskset -c $cores /tmp/tune-$v --simd avx512 --threads 2 --rows $rows --reps 2
done
