#!/usr/bin/env bash
# Packs tessera for a Linux x86-64 host that has no Node.js (the bf16 checks of docs/bf16.md run on a
# 16-core Intel Xeon with AMX-BF16 and AVX512-BF16 and Python, but no Node). Two parts, each under
# the size one transfer to that host may add to the repository copy it receives (--limit-mib, default
# 64 MiB less the repository's tracked files), each with run.sh:
#   OUTDIR/node/node.tar.xz         this machine's node binary, stripped (xz -9e: ~21 MB); made once
#                                   per node version
#   OUTDIR/tessera/tessera.tar.xz   the built addon (build/Release/tessera.node: runtime dispatch, so it
#                                   has the AMX and AVX512-BF16 kernels), dist/ (ES modules), the runtime
#                                   dependencies (zod, picomatch, node-gyp-build, sharp with its linux-x64
#                                   libvips) and the side-by-side bench (bench/pieces/ort-peer.mjs, its helpers,
#                                   onnxruntime-node's linux-x64 library and onnx-proto)
#   OUTDIR/solo/                    both in one transfer, for the accuracy checks alone: node.tar.xz and
#                                   core.tar.xz (the addon, dist/, zod, picomatch, node-gyp-build; no
#                                   sharp, no bench: run.sh then loads no-sharp.mjs, and images are not
#                                   decoded by tessera there), ~23 MB
#   scripts.tar.xz (in all three)   verify/bf16-check and verify/hf-bf16-error.py, so that HF's half of
#                                   the full-size check can run from the node part alone
# run.sh unpacks whichever part lies beside it into one work folder on the host, so the parts may
# arrive in two transfers (run.sh says how).
#   npm run build && bash verify/bf16-check/bundle.sh OUTDIR [--limit-mib N]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: bundle.sh OUTDIR [--limit-mib N]}
mkdir -p "$out/node" "$out/tessera" "$out/solo"
out=$(cd "$out" && pwd)
cd "$root"
tracked=$(git ls-files -z | xargs -0 stat -c %s | awk '{ s += $1 } END { print s }')
limit=$(( ${3:-0} > 0 ? ${3:-0} * 1048576 : 64 * 1048576 - tracked ))
[ -f build/Release/tessera.node ] || { echo "bundle.sh: build/Release/tessera.node missing: run npm run build" >&2; exit 1; }
[ -f dist/index.js ] || { echo "bundle.sh: dist/ missing: run npm run build:ts" >&2; exit 1; }
[ -d bench/pieces/node_modules/onnxruntime-node ] || { echo "bundle.sh: bench/pieces/node_modules missing: npm install in bench" >&2; exit 1; }

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
mkdir -p "$t/build/Release" "$t/bench/pieces/ort" "$t/node_modules/@img" "$t/bench/pieces/node_modules"
cp build/Release/tessera.node "$t/build/Release/"
cp package.json "$t/"
# dist/ as ES modules: no CommonJS build, types, maps or the doctor's fixture copies
(tar cf - --exclude=dist/cjs --exclude=dist/doctor-fixtures --exclude='*.d.ts' --exclude='*.map' dist) | tar xf - -C "$t"
cp bench/make-synthetic-qwen.mjs "$t/scripts/"
cp bench/pieces/ort-peer.mjs "$t/bench/pieces/"
cp bench/pieces/ort/*.mjs bench/pieces/ort/*.cc bench/pieces/ort/*.py "$t/bench/pieces/ort/"
for d in zod picomatch node-gyp-build sharp detect-libc semver @img/colour @img/sharp-linux-x64 @img/sharp-libvips-linux-x64; do
  cp -r "node_modules/$d" "$t/node_modules/$d"
done
rm -rf "$t/node_modules/zod/src" "$t/node_modules/zod/v3" "$t/node_modules/zod/locales" 2>/dev/null || true
for d in onnxruntime-node onnxruntime-common onnx-proto protobufjs @protobufjs long; do
  cp -r "bench/pieces/node_modules/$d" "$t/bench/pieces/node_modules/"
done
rm -rf "$t/bench/pieces/node_modules/protobufjs/cli"
ort="$t/bench/pieces/node_modules/onnxruntime-node/bin/napi-v6"
find "$ort" -mindepth 1 -maxdepth 1 ! -name linux -exec rm -rf {} +
find "$ort/linux" -mindepth 1 -maxdepth 1 ! -name x64 -exec rm -rf {} +
# the one-transfer core: what the accuracy checks load, nothing else
c="$stage/c/tessera"
mkdir -p "$c/node_modules" "$c/build"
cp -r "$t/build/Release" "$t/package.json" "$t/dist" "$c/" && mv "$c/Release" "$c/build/"
cp -r "$t/node_modules/zod" "$t/node_modules/picomatch" "$t/node_modules/node-gyp-build" "$c/node_modules/"
tar -C "$stage/c" -cf - tessera | xz -T2 -9e > "$out/solo/core.tar.xz"
cp "$out/node/node.tar.xz" "$out/node/VERSION" "$out/solo/"
tar -C "$stage/t" -cf - tessera | xz -T2 -9e > "$out/tessera/tessera.tar.xz"
git rev-parse --short HEAD > "$out/tessera/VERSION"

mkdir -p "$stage/s/tessera/scripts"
cp -r verify/bf16-check verify/hf-bf16-error.py "$stage/s/tessera/scripts/"
tar -C "$stage/s" -cf - tessera | xz > "$out/node/scripts.tar.xz"
for part in tessera solo; do cp "$out/node/scripts.tar.xz" "$out/$part/"; done
for part in node tessera solo; do
  cp verify/bf16-check/run.sh "$out/$part/run.sh"
done
status=0
for part in node tessera solo; do
  size=$(du -cb "$out/$part" | tail -1 | cut -f1)
  echo "bundle.sh: $out/$part: $((size / 1024)) KiB (limit $((limit / 1024)) KiB)"
  [ "$size" -lt "$limit" ] || { echo "bundle.sh: $part passes the limit" >&2; status=1; }
done
exit $status
