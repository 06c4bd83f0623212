#!/usr/bin/env bash
# Packs tessera for a Linux x86-64 host that has no Node.js (the bf16 checks of docs/bf16.md run on a
# 16-core Intel Xeon with AMX-BF16 and AVX512-BF16 and Python, but no Node). Two parts, each under
# the size one transfer to that host may add to the repository copy it receives (--limit-mib, default
# 64 MiB less the repository's tracked files), each with run.sh:
#   OUTDIR/node/node.tar.xz         this machine's node binary, stripped (xz -9e: ~21 MB); made once
#                                   per node version
#   OUTDIR/tessera/tessera.tar.xz   the built addon (build/Release/tessera.node: runtime dispatch, so it
#                                   has the AMX and AVX512-BF16 kernels), the MSL emulator library
#                                   (build/mslemu/libtessera_mslemu.so, ~540 KB: the metal-f16 step's
#                                   metal-emulated backend; libc, libm, libstdc++ and libgcc_s only), dist/ (ES modules), the runtime
#                                   dependencies (zod, picomatch, node-gyp-build, sharp with its linux-x64
#                                   libvips) and the side-by-side bench (bench/pieces/ort-peer.mjs, its helpers,
#                                   onnxruntime-node's linux-x64 library and onnx-proto)
#   OUTDIR/solo/                    both in one transfer, for the accuracy checks alone: node.tar.xz and
#                                   core.tar.xz (the addon, the emulator library, dist/, zod, picomatch, node-gyp-build; no
#                                   bench; no sharp unless --sharp: without it run.sh loads no-sharp.mjs,
#                                   and tessera is fed HF's pixel values instead of decoding the image
#                                   files), ~23 MB (~30 MB with sharp and its linux-x64 libvips)
#   scripts.tar.xz (in all three)   verify/bf16-check, verify/hf-bf16-error.py and verify/hf-f16-error.py,
#                                   so that HF's half of the full-size check can run from the node part alone
# run.sh unpacks whichever part lies beside it into one work folder on the host, so the parts may
# arrive in two transfers (run.sh says how). The tessera/ part needs the bench's own packages
# (npm install in bench); without them only node/ and solo/ are made.
#   npm run build && bash verify/bf16-check/bundle.sh OUTDIR [--limit-mib N] [--sharp]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: bundle.sh OUTDIR [--limit-mib N] [--sharp]}
shift
limit_mib=0 solo_sharp=0
while [ $# -gt 0 ]; do
  case $1 in
    --limit-mib) limit_mib=${2:?--limit-mib N}; shift 2 ;;
    --sharp) solo_sharp=1; shift ;;
    *) echo "bundle.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out/node" "$out/solo"
out=$(cd "$out" && pwd)
cd "$root"
tracked=$(git ls-files -z | xargs -0 stat -c %s | awk '{ s += $1 } END { print s }')
limit=$(( limit_mib > 0 ? limit_mib * 1048576 : 64 * 1048576 - tracked ))
[ -f build/Release/tessera.node ] || { echo "bundle.sh: build/Release/tessera.node missing: run npm run build" >&2; exit 1; }
[ -f dist/index.js ] || { echo "bundle.sh: dist/ missing: run npm run build:ts" >&2; exit 1; }
[ -f build/mslemu/libtessera_mslemu.so ] || { echo "bundle.sh: build/mslemu/libtessera_mslemu.so missing: run node tools/mslemu/build.mjs (clang >= 15)" >&2; exit 1; }
bench=1
[ -d bench/pieces/node_modules/onnxruntime-node ] || { echo "bundle.sh: bench/pieces/node_modules missing (npm install in bench): no tessera/ part" >&2; bench=0; }
parts="node solo"; [ $bench = 1 ] && parts="node tessera solo" && mkdir -p "$out/tessera"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

# the node binary, once per version
nodev=$(node --version)
if [ "$(cat "$out/node/VERSION" 2>/dev/null)" != "$nodev" ] || [ ! -f "$out/node/node.tar.xz" ]; then
  mkdir -p "$stage/n/tessera/bin"
  cp "$(readlink -f "$(command -v node)")" "$stage/n/tessera/bin/node"
  strip "$stage/n/tessera/bin/node"
  tar -C "$stage/n" -cf - tessera | xz -T2 -9e > "$out/node/node.tar.xz"
  echo "$nodev" > "$out/node/VERSION"
fi

t="$stage/t/tessera"
mkdir -p "$t/build/Release" "$t/build/mslemu" "$t/bench/pieces/ort" "$t/node_modules/@img" "$t/bench/pieces/node_modules"
cp build/Release/tessera.node "$t/build/Release/"
cp build/mslemu/libtessera_mslemu.so "$t/build/mslemu/"
cp package.json "$t/"
# dist/ as ES modules: no CommonJS build, types, maps or the doctor's fixture copies
(tar cf - --exclude=dist/cjs --exclude=dist/doctor-fixtures --exclude='*.d.ts' --exclude='*.map' dist) | tar xf - -C "$t"
SHARP="sharp detect-libc semver @img/colour @img/sharp-linux-x64 @img/sharp-libvips-linux-x64"
for d in zod picomatch node-gyp-build $SHARP; do
  cp -r "node_modules/$d" "$t/node_modules/$d"
done
rm -rf "$t/node_modules/zod/src" "$t/node_modules/zod/v3" "$t/node_modules/zod/locales" 2>/dev/null || true
if [ $bench = 1 ]; then
  cp bench/make-synthetic-qwen.mjs bench/make-synthetic-qwen25.mjs "$t/bench/"
  cp bench/pieces/ort-peer.mjs "$t/bench/pieces/"
  cp bench/pieces/ort/*.mjs bench/pieces/ort/*.cc bench/pieces/ort/*.py "$t/bench/pieces/ort/"
  for d in onnxruntime-node onnxruntime-common onnx-proto protobufjs @protobufjs long; do
    cp -r "bench/pieces/node_modules/$d" "$t/bench/pieces/node_modules/"
  done
  rm -rf "$t/bench/pieces/node_modules/protobufjs/cli"
  ort="$t/bench/pieces/node_modules/onnxruntime-node/bin/napi-v6"
  find "$ort" -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} +
  find "$ort/linux" -mindepth 1 -maxdepth 1 ! -name x64 -exec rm -rf {} +
fi
# the one-transfer core: what the accuracy checks load, nothing else (sharp with --sharp)
c="$stage/c/tessera"
mkdir -p "$c/node_modules/@img" "$c/build"
cp -r "$t/build/Release" "$t/build/mslemu" "$t/package.json" "$t/dist" "$c/" && mv "$c/Release" "$c/mslemu" "$c/build/"
cp -r "$t/node_modules/zod" "$t/node_modules/picomatch" "$t/node_modules/node-gyp-build" "$c/node_modules/"
if [ $solo_sharp = 1 ]; then for d in $SHARP; do cp -r "$t/node_modules/$d" "$c/node_modules/$d"; done; fi
tar -C "$stage/c" -cf - tessera | xz -T2 -9e > "$out/solo/core.tar.xz"
cp "$out/node/node.tar.xz" "$out/node/VERSION" "$out/solo/"
git rev-parse --short HEAD > "$out/solo/VERSION"
if [ $bench = 1 ]; then
  tar -C "$stage/t" -cf - tessera | xz -T2 -9e > "$out/tessera/tessera.tar.xz"
  git rev-parse --short HEAD > "$out/tessera/VERSION"
fi

# the kit itself, where run.sh runs it (WORK/tessera/verify)
mkdir -p "$stage/s/tessera/verify"
cp -r verify/bf16-check verify/hf-bf16-error.py verify/hf-f16-error.py "$stage/s/tessera/verify/"
tar -C "$stage/s" -cf - tessera | xz > "$out/node/scripts.tar.xz"
for part in $parts; do [ $part = node ] || cp "$out/node/scripts.tar.xz" "$out/$part/"; done
for part in $parts; do
  cp verify/bf16-check/run.sh "$out/$part/run.sh"
done
status=0
for part in $parts; do
  size=$(du -cb "$out/$part" | tail -1 | cut -f1)
  echo "bundle.sh: $out/$part: $((size / 1024)) KiB (limit $((limit / 1024)) KiB)"
  [ "$size" -lt "$limit" ] || { echo "bundle.sh: $part passes the limit" >&2; status=1; }
done
exit $status
