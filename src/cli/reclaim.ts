// Keeps a long `tessera encode` run's garbage to a few groups' worth. Every image leaves its pixel
// rows and results behind as ArrayBuffers; V8 collects those only once their bytes pass its
// external-memory limit (tens of MiB), so without help a long run holds tens of MB more garbage at its
// peak than a short one (docs/design.md#bulk-runs; docs/decisions/0014-bulk-run-memory.md). After each
// image the CLI asks for a full collection once the garbage passes GARBAGE_BYTES: a few ms,
// against the hundreds of ms or seconds an image takes on a real tower. The library itself never
// forces collections (a service keeps V8's policy).
import v8 from 'node:v8';
import vm from 'node:vm';

/** ArrayBuffer bytes above the last collection's that trigger the next one. */
const GARBAGE_BYTES = 4 * 2 ** 20;

type Collect = () => void;

function collector(): Collect | undefined {
  try {
    // --expose-gc turned on at run time: the way to reach V8's collector without a command-line flag.
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as unknown;
    return typeof gc === 'function' ? (gc as Collect) : undefined;
  } catch {
    return undefined;
  }
}

export class MemoryReclaimer {
  #collect = collector();
  #floor = process.memoryUsage().arrayBuffers;

  /** Called after each image: collects when the ArrayBuffer garbage has grown past GARBAGE_BYTES. */
  afterImage(): void {
    if (!this.#collect) return;
    if (process.memoryUsage().arrayBuffers - this.#floor < GARBAGE_BYTES) return;
    this.#collect();
    this.#floor = process.memoryUsage().arrayBuffers;
  }
}
