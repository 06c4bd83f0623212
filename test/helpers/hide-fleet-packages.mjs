// Loaded with `node --import` (test/fleet-optional-deps.test.ts): a module-resolution hook under which
// bullmq and ioredis are not installed, as for a user who never installed the fleet's optional peer
// dependencies. Node's own resolution error is thrown for them; everything else resolves as usual.
import { register } from 'node:module';

const hook = `
const HIDDEN = ['bullmq', 'ioredis'];
export async function resolve(specifier, context, next) {
  if (HIDDEN.some((p) => specifier === p || specifier.startsWith(p + '/'))) {
    const e = new Error("Cannot find package '" + specifier + "' imported from " + context.parentURL);
    e.code = 'ERR_MODULE_NOT_FOUND';
    throw e;
  }
  return next(specifier, context);
}`;
register('data:text/javascript,' + encodeURIComponent(hook));
