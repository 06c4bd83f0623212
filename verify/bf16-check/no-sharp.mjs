// For the one-transfer part of bundle.sh (solo/), which leaves sharp and its libvips out to stay under
// the transfer limit: `node --import ./no-sharp.mjs` resolves 'sharp' to a module whose every use
// throws, so that tessera loads. The checks run here never decode an image in tessera (they feed it
// HF's pixel values through encodePixels), so no figure depends on sharp; a step that did decode
// would fail loudly, naming this file.
import { register } from 'node:module';

const absent = 'export default function sharp() { throw new Error("sharp is not carried in this bundle (verify/bf16-check/no-sharp.mjs): tessera cannot decode images here"); }';
const hooks = `export async function resolve(specifier, context, next) {
  if (specifier === 'sharp') return { url: 'data:text/javascript,' + encodeURIComponent(${JSON.stringify(absent)}), shortCircuit: true };
  return next(specifier, context);
}`;
register('data:text/javascript,' + encodeURIComponent(hooks));
