#!/usr/bin/env bash
# The bf16 checks of docs/bf16.md on a Linux x86-64 host without Node.js (made for the 16-core Intel
# Xeon with AMX-BF16 and AVX512-BF16, Python with torch and transformers 5.17, and an NVIDIA GPU).
# verify/bf16-check/bundle.sh makes two parts, node/ and tessera/, each with a copy of this file;
# each part sits in a copy of the repository (e.g. OUTDIR/node/run.sh, OUTDIR two levels below its root), whose test/fixtures
# the checks read (else TESSERA_REPO names that copy). This file unpacks the archives beside it into
# one work folder ($TESSERA_BF16_WORK, else /tmp/tessera-bf16: outside the repository copy, so it
# outlives a transfer to the same host), so the two parts may arrive in two transfers, then runs the
# steps named:
#   smoke       the node binary runs here, tessera loads (its SIMD and bf16 levels), the tools
#   fixtures    HF's own bf16 (CPU) and fp16 (CUDA) error on the suite's fixture towers: the hf-bf16.json
#               and hf-f16.json the tests read, written to WORK/out/fixtures/<fixture>/ (TESSERA_BF16_FIXTURES:
#               which fixtures, default all)
#   hf          hf_towers.py: full-size Qwen3-VL-8B- and Gemma 4 E4B-shaped towers (random weights,
#               made here; TESSERA_BF16_TOWERS=qwen2_5_vl for the Qwen2.5-VL-7B-shaped one), HF fp32 and
#               HF bf16 (CPU, CUDA) on the suite's images
#   f16         hf_f16_towers.py: HF's fp16 error on CUDA and the fp32 activation ranges on the same
#               full-size towers (TESSERA_BF16_F16_TOWERS, default qwen3_vl,gemma4)
#   precision   precision.mjs (test/api-precision.test.ts's bf16 check) at TESSERA_SIMD=amx, avx512-bf16
#   compare     compare.mjs: tessera f32 and bf16 per level on hf's towers and inputs (fullsize.md)
#   refill      before hf: makes the model folders (TESSERA_BF16_TOWERS, default qwen3_vl,gemma4;
#               TESSERA_BF16_GEMMA_TOKENS: Gemma 4's image budget, default the processor's 280) and refills their
#               weights with tessera's deterministic fill (refill.mjs), writing each tower's config, processor
#               config and tensor list to the results: another host remakes the same folder from them
#   refs        after hf and f16: HF fp32's stages per image, split into 15 MiB chunks beside results.tgz
#               (<tower>-<image>.st.aa, …), and their checksums; unpack-refs.sh rebuilds the folders from them
#               on the host that runs metal-f16 (the emulator is slow, and any host with clang runs it)
#   metal-f16   metal-f16.mjs: tessera's precision 'f16' on metal-emulated (the MSL emulator library the
#               parts carry, TESSERA_MSLEMU_LIB; TESSERA_MSLEMU_WORKERS, default every core) on the towers
#               and images both hf and f16 measured, against HF fp32 beside HF's fp16 error (metal-f16.md);
#               minutes per image at full size: pick the images with TESSERA_BF16_IMAGES
#   bench       the side-by-side bench (bench/pieces/ort-peer.mjs) at 2 and at 16 threads
# e.g.  bash OUTDIR/solo/run.sh smoke hf compare precision        (one copy: solo/)
#   or  bash OUTDIR/node/run.sh smoke          (first copy: node/, unpacked into the work folder)
#       bash OUTDIR/tessera/run.sh smoke hf precision compare bench    (second: tessera/)
# Results go to WORK/out, packed into $OUT/results.tgz after each step (else ./out beside this file).
# Each step has a time limit (TESSERA_BF16_LIMIT_<STEP> seconds), so that one step running long leaves
# the others their time.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
DEST=${OUT:-$here/out}; mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd)
work=${TESSERA_BF16_WORK:-/tmp/tessera-bf16}; mkdir -p "$work/out"; work=$(cd "$work" && pwd)
OUT="$work/out"
log() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$OUT/steps.log" >&2; }
pack() { tar -czf "$DEST/results.tgz" -C "$work" out; }
limit() { local v="TESSERA_BF16_LIMIT_${1^^}"; echo "${!v:-$2}"; }

for a in "$here"/*.tar.xz; do
  [ -f "$a" ] || continue
  stamp="$work/.$(basename "$a").stamp"
  now="$(stat -c '%s %Y' "$a") $(cat "$here/VERSION" 2>/dev/null)"
  [ "$(cat "$stamp" 2>/dev/null)" = "$now" ] && continue
  log "unpacking $(basename "$a")"
  tar -xJf "$a" -C "$work" || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$a" "$work"
  echo "$now" > "$stamp"
done
[ -x "$work/tessera/bin/node" ] || log "no node binary in $work: the node/ part has not been unpacked on this host"
repo=$(cd "${TESSERA_REPO:-$here/../../..}" && pwd)
[ -d "$repo/test/fixtures/images" ] || { log "no test/fixtures in $repo (set TESSERA_REPO)"; exit 2; }
mkdir -p "$work/tessera/test"
ln -sfn "$repo/test/fixtures" "$work/tessera/test/fixtures"
cd "$work/tessera"
export PATH="$work/tessera/bin:$PATH"
# the one-transfer part carries no sharp (bundle.sh): tessera loads without it, decoding no image
[ -d node_modules/sharp ] || export NODE_OPTIONS="--import=$work/tessera/verify/bf16-check/no-sharp.mjs"
levels=${TESSERA_BF16_LEVELS-amx avx512-bf16}
# the emulator library where bundle.sh puts it (the addon's own default, named here so that smoke and the
# error of a missing library say which file)
export TESSERA_MSLEMU_LIB=${TESSERA_MSLEMU_LIB:-$work/tessera/build/mslemu/libtessera_mslemu.so}

smoke() {
  { ldd --version | head -1; echo "cores $(nproc)"; grep -m1 'model name' /proc/cpuinfo
    echo "flags: $(grep -m1 -o -w -E 'amx_bf16|amx_tile|avx512_bf16|avx512f' /proc/cpuinfo | sort -u | tr '\n' ' ')"
    node --version
    if [ -f dist/native.js ]; then
      for s in '' $levels avx512 avx2; do
        TESSERA_SIMD=$s node -e "import('./dist/native.js').then(({ addon }) => console.log('TESSERA_SIMD=${s:-(unset)}: simdLevel', addon().simdLevel, 'bf16Level', addon().bf16Level))"
      done
    fi
    python3 -c 'import torch, transformers, numpy; print("torch", torch.__version__, "transformers", transformers.__version__, "numpy", numpy.__version__, "cuda", torch.cuda.is_available() and torch.cuda.get_device_name(0))'
    command -v c++ g++ || echo "no c++ compiler"
    [ -f "$TESSERA_MSLEMU_LIB" ] && ldd "$TESSERA_MSLEMU_LIB"
  } 2>&1 | tee -a "$OUT/smoke.txt"
}

hf() {
  timeout "$(limit hf 420)" python3 verify/bf16-check/hf_towers.py --out "$work/fullsize" \
    ${TESSERA_BF16_TOWERS:+--towers "$TESSERA_BF16_TOWERS"} ${TESSERA_BF16_IMAGES:+--images "$TESSERA_BF16_IMAGES"} > "$OUT/hf.log" 2>&1
  echo "exit $?" >> "$OUT/hf.log"
  grep '^{' "$OUT/hf.log" | cut -c1-300; grep -A3 Traceback "$OUT/hf.log"
  for t in "$work"/fullsize/*/; do cp "$t/hf-bf16.json" "$OUT/hf-bf16-$(basename "$t").json" 2>/dev/null; done
}

fixtures() {
  local only=${TESSERA_BF16_FIXTURES:+--fixtures $TESSERA_BF16_FIXTURES}
  timeout "$(limit fixtures 240)" python3 verify/hf-bf16-error.py "$repo" $only --write "$OUT/fixtures" > "$OUT/fixtures-bf16.log" 2>&1
  echo "exit $?" >> "$OUT/fixtures-bf16.log"; grep -E '^\{|^exit|Error' "$OUT/fixtures-bf16.log" | cut -c1-300
  timeout "$(limit fixtures 240)" python3 verify/hf-f16-error.py "$repo" $only --write "$OUT/fixtures" > "$OUT/fixtures-f16.log" 2>&1
  echo "exit $?" >> "$OUT/fixtures-f16.log"; grep -E '^\{|^exit|Error' "$OUT/fixtures-f16.log" | cut -c1-300
}

f16() {
  timeout "$(limit f16 300)" python3 verify/bf16-check/hf_f16_towers.py --out "$work/fullsize" --fixtures "$repo/test/fixtures" \
    --towers "${TESSERA_BF16_F16_TOWERS:-qwen3_vl,gemma4}" ${TESSERA_BF16_IMAGES:+--images "$TESSERA_BF16_IMAGES"} > "$OUT/f16.log" 2>&1
  echo "exit $?" >> "$OUT/f16.log"
  grep -E '^\{|^exit|model folder' "$OUT/f16.log" | cut -c1-400; grep -A3 Traceback "$OUT/f16.log"
  for t in "$work"/fullsize/*/; do cp "$t/hf-f16.json" "$OUT/hf-f16-$(basename "$t").json" 2>/dev/null; done
}

precision() {
  for s in $levels; do
    TESSERA_SIMD=$s timeout "$(limit precision 120)" node verify/bf16-check/precision.mjs test/fixtures > "$OUT/precision-$s.md" 2>&1
    echo "exit $?" >> "$OUT/precision-$s.md"; tail -3 "$OUT/precision-$s.md"
  done
}

compare() {
  timeout "$(limit compare 300)" node verify/bf16-check/compare.mjs "$work/fullsize" --levels "$levels" --json "$OUT/fullsize.json" > "$OUT/fullsize.md" 2> "$OUT/compare.log"
  echo "exit $?" >> "$OUT/compare.log"; cat "$OUT/fullsize.md" "$OUT/compare.log"
}

refill() {
  local towers=${TESSERA_BF16_TOWERS:-qwen3_vl,gemma4}
  python3 verify/bf16-check/hf_towers.py --out "$work/fullsize" --towers "$towers" --build-only \
    ${TESSERA_BF16_GEMMA_TOKENS:+--gemma-soft-tokens "$TESSERA_BF16_GEMMA_TOKENS"} > "$OUT/refill.log" 2>&1
  for t in ${towers//,/ }; do
    m="$work/fullsize/$t/model"
    node verify/bf16-check/refill.mjs "$m" --list "$OUT/$t-tensors.json" >> "$OUT/refill.log" 2>&1
    cp "$m/config.json" "$OUT/$t-config.json"; cp "$m/preprocessor_config.json" "$OUT/$t-preprocessor_config.json"
  done
  grep -E '^refill|Error' "$OUT/refill.log"
}

refs() {
  for f in "$work"/fullsize/*/*.safetensors; do
    t=$(basename "$(dirname "$f")")
    split -b 15M "$f" "$DEST/$t-$(basename "$f" .safetensors).st."
  done
  (cd "$work/fullsize" && sha256sum */*.safetensors */model/model.safetensors) | tee "$OUT/refs.sha256"
}

metal_f16() {
  TESSERA_MSLEMU_WORKERS=${TESSERA_MSLEMU_WORKERS:-$(nproc)} timeout "$(limit metal_f16 540)" node verify/bf16-check/metal-f16.mjs "$work/fullsize" \
    --towers "${TESSERA_BF16_F16_TOWERS:-qwen3_vl,gemma4}" --json "$OUT/metal-f16.json" > "$OUT/metal-f16.md" 2> "$OUT/metal-f16.log"
  echo "exit $?" >> "$OUT/metal-f16.log"; cat "$OUT/metal-f16.md" "$OUT/metal-f16.log"
}

bench() {
  # 2 threads: N up to 4,096 (8,192 at 2 threads takes minutes per engine); 16 threads: all four
  for t in 2 16; do
    ns=$([ "$t" = 2 ] && echo 256,1120,4096 || echo 256,1120,4096,8192)
    timeout "$(limit bench 240)" node bench/pieces/ort-peer.mjs --ort-peer-threads=$t --ort-peer-no-1t --ort-peer-runs=3 \
      --ort-peer-wait-s=30 --ort-peer-ns=${TESSERA_BF16_BENCH_NS:-$ns} > "$OUT/bench-${t}t.md" 2> "$OUT/bench-${t}t.log"
    echo "exit $?" >> "$OUT/bench-${t}t.log"; tail -3 "$OUT/bench-${t}t.log"
    mv bench/out/ort-peer-results.json "$OUT/bench-${t}t.json" 2>/dev/null
  done
}

[ $# -gt 0 ] || set -- smoke
for step in "$@"; do
  case $step in
    smoke|fixtures|hf|f16|precision|compare|refill|refs|bench) log "$step"; $step; pack ;;
    metal-f16) log "$step"; metal_f16; pack ;;
    *) log "unknown step $step (smoke, fixtures, hf, f16, precision, compare, refill, refs, metal-f16, bench)"; exit 2 ;;
  esac
done
log "done: $*"; pack
