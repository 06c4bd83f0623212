// A queue's name, checked before anything connects: BullMQ refuses an empty name and one with ':'
// (its Redis keys are `bull:<name>:...`), but it does so by throwing from a constructor after the
// connection is made, which left the commands printing a stack trace and holding the connection
// open. Every fleet command and createWorker check here, so the rules live in one place.
import { TesseraError } from '../errors.js';

/** BullMQ's rules (QueueBase's constructor): a non-empty name without ':'. */
export function checkQueueName(name: unknown, what = '--queue'): string {
  if (typeof name !== 'string' || name.length === 0) throw new TesseraError('ERR_INVALID_ARGUMENT', `${what} must be a non-empty queue name`);
  if (name.includes(':')) throw new TesseraError('ERR_INVALID_ARGUMENT', `${what} '${name}': a BullMQ queue name cannot contain ':'`);
  return name;
}
