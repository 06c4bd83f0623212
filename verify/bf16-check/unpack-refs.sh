#!/usr/bin/env bash
# Rebuilds, on the host that runs the metal-f16 step, the full-size tower folders that `run.sh refill hf f16 refs`
# measured on another (the emulator takes minutes per block at full size; HF's side wants a GPU): FILES holds what
# came back from that run (results.tgz and the <tower>-<image>.st.* chunks), DIR gets, per tower, model/ (its
# config files, and the weights remade by refill.mjs from the tensor list: the same bytes), one <image>.safetensors
# per image (the tower's input and HF fp32's stages) and HF's hf-f16.json and hf-bf16.json; every file is then
# checked against the run's checksums. Needs the built tessera (dist/) for refill.mjs.
#   bash verify/bf16-check/unpack-refs.sh FILES DIR && node verify/bf16-check/metal-f16.mjs DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
files=${1:?usage: unpack-refs.sh FILES DIR}
dir=${2:?usage: unpack-refs.sh FILES DIR}
res=$(mktemp -d)
trap 'rm -rf "$res"' EXIT
tar -xzf "$files/results.tgz" -C "$res"
for list in "$res"/out/*-tensors.json; do
  t=$(basename "$list" -tensors.json)
  mkdir -p "$dir/$t/model"
  cp "$res/out/$t-config.json" "$dir/$t/model/config.json"
  cp "$res/out/$t-preprocessor_config.json" "$dir/$t/model/preprocessor_config.json"
  for j in hf-f16 hf-bf16; do [ -f "$res/out/$j-$t.json" ] && cp "$res/out/$j-$t.json" "$dir/$t/$j.json"; done
  node "$here/refill.mjs" "$dir/$t/model" --from "$list"
  for first in "$files/$t-"*.st.aa; do
    [ -f "$first" ] || continue
    stem=${first#"$files/$t-"}; stem=${stem%.st.aa}
    cat "$files/$t-$stem".st.* > "$dir/$t/$stem.safetensors"
  done
done
(cd "$dir" && sha256sum -c "$res/out/refs.sha256")
