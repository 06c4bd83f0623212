// One worker process's counters: jobs completed, images encoded, failed attempts by code, time
// busy; snapshot() is what goes into each job's progress and result (and so into queue-status).
import { hostname } from 'node:os';
import type { ErrorCode } from '../errors.js';
import type { WorkerSnapshot } from './job.js';

export class WorkerCounters {
  readonly name: string;
  #jobs = 0;
  #images = 0;
  #failures: Partial<Record<ErrorCode, number>> = {};
  #busyMs = 0;
  #firstStart: number | undefined;
  #lastEnd: number | undefined;

  constructor(name: string) {
    this.name = name;
  }

  jobStarted(): void {
    this.#firstStart ??= performance.now();
  }

  jobDone(images: number, ms: number): void {
    this.#jobs++;
    this.#images += images;
    this.#busyMs += ms;
    this.#lastEnd = performance.now();
  }

  jobFailed(code: ErrorCode, ms: number): void {
    this.#failures[code] = (this.#failures[code] ?? 0) + 1;
    this.#busyMs += ms;
    this.#lastEnd = performance.now();
  }

  /** An image of a group that failed with an input error while its group completed. */
  imageFailed(code: ErrorCode): void {
    this.#failures[code] = (this.#failures[code] ?? 0) + 1;
  }

  snapshot(): WorkerSnapshot {
    const wallMs = this.#firstStart === undefined ? 0 : (this.#lastEnd ?? performance.now()) - this.#firstStart;
    return {
      name: this.name,
      pid: process.pid,
      host: hostname(),
      jobs: this.#jobs,
      images: this.#images,
      failures: { ...this.#failures },
      imagesPerSecond: wallMs > 0 ? this.#images / (wallMs / 1000) : 0,
      busyMs: Math.round(this.#busyMs),
      wallMs: Math.round(wallMs),
    };
  }
}
