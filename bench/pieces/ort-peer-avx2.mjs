// Bench piece: ort-peer (ort-peer.mjs) with both engines held to AVX2 on an AVX-512 host, for the
// many x86 machines without AVX-512: tessera by TESSERA_SIMD=avx2, onnxruntime by a patched copy of
// its library (ort/ort-held.mjs); each row states its ISA and its % of that ISA's FMA peak. On a host
// whose widest ISA is AVX2 the ort-peer piece already measures this.
//   npm run bench -- ort-peer-avx2      (flags as for ort-peer: --ort-peer-ns=..., --ort-peer-runs=...)
import { fileURLToPath } from 'node:url';
import { section as ortPeer } from './ort-peer.mjs';
import { fmaPeak } from './ort/fma-peak.mjs';

export async function section() {
  const peak = fmaPeak();
  const isa = peak ? peak(1).isa : 'unknown';
  if (isa !== 'avx512') {
    return {
      title: 'Side by side: tessera held to avx2 vs onnxruntime-node',
      body: `Not run: this host's widest ISA is ${isa}, so the ort-peer section already shows ${isa === 'avx2' ? 'the AVX2 kernels' : 'its kernels'}.`,
    };
  }
  return ortPeer('avx2');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const s = await section();
  console.log(`## ${s.title}\n\n${s.body}`);
}
