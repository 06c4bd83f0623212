// `npm run check:objc` (docs/metal-on-linux.md#static-check): native/metal/device.mm type-checked as the Mac
// builds it (Objective-C++, ARC, blocks, -Wall -Wextra -Werror) against the hand-written stubs in
// tools/fakemetal/stubs, shaped in turn like the macOS 13, 14 and 15 SDKs (SDKS: the 14 SDK has no mathMode,
// the 13 SDK no MTLGPUFamilyApple9 either); tools/fakemetal/tests/bad.mm must fail with exactly its four
// planted errors.
// Without clang >= 15: says so and exits 0 (--require: exit 1).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { findClang } from '../mslemu/build.mjs';
import { ROOT, writeHeaders } from '../mslemu/prepass.mjs';

export const ARC_FLAGS = ['-x', 'objective-c++', '-std=c++17', '-fobjc-runtime=macosx-13.0', '-fobjc-arc', '-fblocks', '-fsyntax-only',
  '-Wall', '-Wextra', '-Werror', '-I', path.join(ROOT, 'tools/fakemetal/stubs'), '-I', path.join(ROOT, 'native'), '-I', path.join(ROOT, 'build/metal')];

export const BAD_EXPECTED = [
  "error: ARC forbids explicit message send of 'release'",
  "error: no known instance method for selector 'setBuffer:offset:index:'",
  "error: cast of Objective-C pointer type 'id<MTLBuffer>' to C pointer type 'void *' requires a bridged cast",
  "error: no viable conversion from 'int' to 'MTLSize'",
];

// The SDK versions device.mm must build against (__MAC_OS_X_VERSION_MAX_ALLOWED): binding.gyp's deployment
// target, macOS 13, up to the newest.
export const SDKS = [130000, 140000, 150000];

// { sdks: [{ sdk, ok, output }], bad: {errors: [...], output} }
export function checkObjc(cxx) {
  writeHeaders(path.join(ROOT, 'build/metal'));  // sources.gen.h, which device.mm embeds
  const sdks = SDKS.map((sdk) => {
    const dev = spawnSync(cxx, [...ARC_FLAGS, `-DTESSERA_FAKE_SDK=${sdk}`, path.join(ROOT, 'native/metal/device.mm')], { encoding: 'utf8' });
    return { sdk, ok: dev.status === 0, output: (dev.stdout || '') + (dev.stderr || '') };
  });
  const bad = spawnSync(cxx, [...ARC_FLAGS, path.join(ROOT, 'tools/fakemetal/tests/bad.mm')], { encoding: 'utf8' });
  const badOut = (bad.stdout || '') + (bad.stderr || '');
  return {
    sdks,
    bad: { failed: bad.status !== 0, errors: badOut.split('\n').filter((l) => / error: /.test(l)), output: badOut },
  };
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  const tc = findClang();
  if (!tc.cxx) { console.log(`check:objc skipped: ${tc.reason}`); process.exit(process.argv.includes('--require') ? 1 : 0); }
  const r = checkObjc(tc.cxx);
  let failed = 0;
  for (const d of r.sdks) {
    const sdk = `macOS ${d.sdk / 10000} SDK`;
    if (d.ok) console.log(`ok    native/metal/device.mm (${sdk} stubs): clean under -fobjc-arc -fblocks -Wall -Wextra -Werror`);
    else { failed++; console.log(`FAIL  native/metal/device.mm (${sdk} stubs)\n${d.output}`); }
  }
  const missing = BAD_EXPECTED.filter((e) => !r.bad.errors.some((l) => l.includes(e)));
  if (r.bad.failed && !missing.length && r.bad.errors.length === BAD_EXPECTED.length) console.log('ok    tools/fakemetal/tests/bad.mm: rejected with exactly its 4 planted errors');
  else { failed++; console.log(`FAIL  tools/fakemetal/tests/bad.mm: expected exactly\n  ${BAD_EXPECTED.join('\n  ')}\ngot\n${r.bad.output}`); }
  console.log(`${r.sdks.length + 1 - failed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}
