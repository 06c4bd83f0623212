// Which backend a tower opens on. 'auto' is Metal on Apple silicon with the CPU behind it: a Mac whose GPU
// cannot run the kernels (an Apple5 "Apple Paravirtual device" in a VM or a hosted CI runner, see
// native/metal/capability.h) makes the Metal backend refuse with ERR_BACKEND_UNAVAILABLE naming the GPU and
// what it lacks, and 'auto' then says so in one warning line and opens on the CPU. `TowerInfo.backend`
// tells which ran. An explicit backend never falls back.
import { TesseraError } from './errors.js';

const onAppleSilicon = (platform: string, arch: string) => platform === 'darwin' && arch === 'arm64';

/** The backends to try, in order. */
export function backendCandidates(requested: string, platform: string = process.platform, arch: string = process.arch): string[] {
  if (requested === 'auto') return onAppleSilicon(platform, arch) ? ['metal', 'cpu'] : ['cpu'];
  if (requested === 'metal' && !onAppleSilicon(platform, arch))
    throw new TesseraError('ERR_BACKEND_UNAVAILABLE', `backend 'metal' needs macOS on Apple Silicon (this is ${platform}/${arch})`);
  return [requested];
}

/**
 * Opens on the first candidate that is available: `open(candidate)` failing with ERR_BACKEND_UNAVAILABLE
 * passes to the next one, with one line to `warn`; any other error, or the last candidate's, is thrown.
 */
export async function openFirstAvailable<T>(
  candidates: string[],
  open: (backend: string) => Promise<T>,
  warn: (line: string) => void = (line) => process.emitWarning(line, { code: 'TESSERA_BACKEND_FALLBACK' }),
): Promise<{ value: T; backend: string }> {
  for (let i = 0; ; i++) {
    const backend = candidates[i]!;
    try {
      return { value: await open(backend), backend };
    } catch (e) {
      const next = candidates[i + 1];
      if (next === undefined || !(e instanceof TesseraError) || e.code !== 'ERR_BACKEND_UNAVAILABLE') throw e;
      warn(`tessera: backend 'auto': ${backend} is unavailable (${e.message}); running on ${next}`);
    }
  }
}
