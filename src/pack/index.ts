export { packModel, planPack, WEIGHTS_FILE, type PackOptions, type PackResult } from './pack.js';
export { loadPacked, isPackedFolder } from './load.js';
export { parseManifest, specFromManifest, MANIFEST_FILE, packAlignment, type PackManifest } from './manifest.js';
