export { packModel, planPack, WEIGHTS_FILE, type PackOptions, type PackResult } from './pack.js';
export { loadPacked, isPackedFolder } from './load.js';
export { parseManifest, specFromManifest, MANIFEST_FILE, PACK_ALIGNMENT, type PackManifest } from './manifest.js';
