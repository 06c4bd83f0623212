// The fleet's packages, bullmq and ioredis, are optional peer dependencies (package.json): a user
// who never runs a fleet does not install them. The fleet commands check for them before loading
// anything that imports them, and end, when one is missing, in a TesseraError that names the
// install command, not in Node's module-resolution error.
import { TesseraError, toTesseraError } from '../errors.js';

export const FLEET_PACKAGES = ['bullmq', 'ioredis'] as const;
export const FLEET_INSTALL = `npm install ${FLEET_PACKAGES.join(' ')}`;

/** Whether `e` says that `name` itself (not something it imports) cannot be found. */
function isMissing(e: unknown, name: string): boolean {
  const err = e as NodeJS.ErrnoException;
  return (err?.code === 'ERR_MODULE_NOT_FOUND' || err?.code === 'MODULE_NOT_FOUND') && new RegExp(`['"]${name}['"/]`).test(err.message);
}

/** Loads the fleet's packages; ERR_BACKEND_UNAVAILABLE naming the install command when one is not installed. */
export async function requireFleetPackages(command: string): Promise<void> {
  const missing: string[] = [];
  for (const name of FLEET_PACKAGES) {
    try {
      await import(name);
    } catch (e) {
      if (!isMissing(e, name)) throw e;
      missing.push(name);
    }
  }
  if (missing.length)
    throw new TesseraError(
      'ERR_BACKEND_UNAVAILABLE',
      `${command} needs the optional package${missing.length > 1 ? 's' : ''} ${missing.join(' and ')}, which ${missing.length > 1 ? 'are' : 'is'} not installed: run \`${FLEET_INSTALL}\` in your project (docs/fleet.md)`,
    );
}

/**
 * The fleet commands' check (tessera worker, enqueue, queue-status): requireFleetPackages, with its
 * refusal reported as one line, `<command>: <code>: <message>`, instead of thrown. Returns whether
 * the packages load; when they do not, the command ends with its usage exit code (2).
 */
export async function checkFleetPackages(command: string, report: (line: string) => void): Promise<boolean> {
  try {
    await requireFleetPackages(command);
    return true;
  } catch (e) {
    const err = toTesseraError(e);
    report(`${command}: ${err.code}: ${err.message}`);
    return false;
  }
}
