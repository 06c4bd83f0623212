// The Metal cost model (docs/metal.md#cost-model): a dispatch's time on an Apple GPU from what the MSL
// emulator counted it doing (docs/metal-on-linux.md#counters), as the slowest of three roofs:
//   compute      (simdgroup 8x8x8 MACs x 512 + scalar FMAs + other ALU ops + 4 x special functions) lane-ops
//                / (cores x 128 lane-ops per cycle x clock)
//   device       (device bytes read + written) / the chip's memory bandwidth
//   threadgroup  (threadgroup bytes read + written) / (cores x 64 B per cycle x clock)
// with cores = min(the chip's cores, the dispatch's threadgroups). Launch overhead, caches, latency and
// occupancy are not modelled. Used by `npm run bench -- metal-model` (bench/pieces/metal-model.mjs) and by
// tessera doctor, which puts a Mac's measured time beside it.
//
// The Apple GPUs it estimates for, with where each figure comes from. FP32 rate = cores x 128 ALUs x 2 (FMA) x clock. Threadgroup-memory bandwidth is not published
// by Apple, and philipturner/metal-benchmarks lists shared-memory bandwidth per cycle as "TBD"; the model
// uses the same table's on-core data bandwidth, 64 B per cycle per core, for it (an assumption the first
// Mac run checks: `npm run test:metal` prints the model beside the measurement).
const PT: string = 'https://github.com/philipturner/metal-benchmarks (README, GPU table and "On-Chip Memory" table)';
export const TG_BYTES_PER_CYCLE = { value: 64, source: `${PT}: "On-Core Data BW/Cycle 64 B" for Apple 7 and 8` };
export const ALUS_PER_CORE = { value: 128, source: `${PT}: "Apple described each GPU core as having 128 ALUs"` };

/** One Apple GPU's published figures. */
export interface GpuModel {
  name: string;
  cores: number;
  ghz: number;
  bandwidthGBs: number;
  sources: Record<string, string>;
}

export const GPUS: GpuModel[] = [
  {
    name: 'M1', cores: 8, ghz: 1.278, bandwidthGBs: 68.25,
    sources: {
      cores: PT, ghz: PT, fp32: `${PT}: M1 GOPS32 2617`,
      bandwidth: 'derived, not published by Apple: M1\'s LPDDR4X-4266 on a 128-bit bus = 4266 MT/s x 16 B = 68.25 GB/s (Apple\'s M1 Pro announcement, newsroom 2021-10-18, gives M1 Pro\'s 200 GB/s as "nearly 3x" M1\'s)',
    },
  },
  {
    name: 'M2 Max', cores: 38, ghz: 1.398, bandwidthGBs: 400,
    sources: {
      cores: PT, ghz: PT, fp32: `${PT}: M2M GOPS32 13600`,
      bandwidth: 'Apple, "Apple unveils M2 Pro and M2 Max", newsroom, 2023-01-17: "400GB/s of unified memory bandwidth"',
    },
  },
  {
    name: 'M3 Max', cores: 40, ghz: 1.398, bandwidthGBs: 400,
    sources: {
      cores: 'https://macmegasite.com/2024/10/30/m4-max-chip-has-16-core-cpu-40-core-gpu-and-35-increase-in-memory-bandwidth ("M3 Max specs of 14-core CPU, 40-core GPU and 400 GB/s")',
      ghz: 'https://hmc-tech.com/gpu/apple-32-core-m4-max-vs-apple-40-core-m3-max (40-core M3 Max: 1398 MHz, FP32 14.32 TFLOPS)',
      fp32: 'https://hmc-tech.com/gpu/apple-32-core-m4-max-vs-apple-40-core-m3-max (14.32 TFLOPS)',
      bandwidth: 'https://macmegasite.com/2024/10/30/m4-max-chip-has-16-core-cpu-40-core-gpu-and-35-increase-in-memory-bandwidth (400 GB/s)',
    },
  },
  {
    name: 'M4 Max', cores: 40, ghz: 1.678, bandwidthGBs: 546,
    sources: {
      cores: 'https://macmegasite.com/2024/10/30/m4-max-chip-has-16-core-cpu-40-core-gpu-and-35-increase-in-memory-bandwidth ("16-core CPU, 40-core GPU, and 546 GB/s")',
      ghz: 'https://hmc-tech.com/gpu/apple-32-core-m4-max-vs-apple-40-core-m3-max (M4 Max: 1678 MHz; the same clock assumed for the 40-core part)',
      fp32: 'cores x 128 x 2 x clock = 17.2 TFLOPS (derived)',
      bandwidth: 'https://macmegasite.com/2024/10/30/m4-max-chip-has-16-core-cpu-40-core-gpu-and-35-increase-in-memory-bandwidth (546 GB/s)',
    },
  },
];

export const fp32Tflops = (g: GpuModel): number => (g.cores * ALUS_PER_CORE.value * 2 * g.ghz) / 1000;

// One 8x8x8 multiply-accumulate = 512 FMAs of the SIMD-group, half or float alike: philipturner/metal-benchmarks
// measures the same FMA rate for F16 and F32 on Apple 7 and 8 (256 operations per core-cycle each; Matrix FFMA16
// 102.5, FFMA32 101.7), and no public figure gives Apple 9 (M3, M4) a faster half (docs/metal.md#cost-model).
const MMA_LANE_OPS = 512;
const SPECIAL_LANE_OPS = 4;  // exp, tanh, division ...: a few ALU slots each (assumed)

/** What the emulator counted for one dispatch (TESSERA_MSLEMU_COUNTS: one JSON line per dispatch). */
export interface DispatchCounts {
  kernel: string;
  groups: [number, number, number];
  dev_read: number;
  dev_write: number;
  tg_read: number;
  tg_write: number;
  mma: number;
  fma: number;
  alu: number;
  special: number;
}

/** Lane-operations of one dispatch (the compute roof's numerator). */
export const laneOps = (d: DispatchCounts): number => d.mma * MMA_LANE_OPS + d.fma + d.alu + d.special * SPECIAL_LANE_OPS;

/** Seconds of one dispatch on `g`, and which roof bounds it. */
export function dispatchTime(d: DispatchCounts, g: GpuModel): { s: number; bound: string; roofs: Record<string, number> } {
  const groups = d.groups[0] * d.groups[1] * d.groups[2];
  const cores = Math.min(g.cores, groups);
  const hz = g.ghz * 1e9;
  const roofs = {
    compute: laneOps(d) / (cores * ALUS_PER_CORE.value * hz),
    device: (d.dev_read + d.dev_write) / (g.bandwidthGBs * 1e9),
    threadgroup: (d.tg_read + d.tg_write) / (cores * TG_BYTES_PER_CYCLE.value * hz),
  };
  const bound = Object.entries(roofs).sort((a, b) => b[1] - a[1])[0]!;
  return { s: bound[1], bound: bound[0], roofs };
}

export interface KernelEstimate {
  dispatches: number;
  s: number;
  dev: number;
  tg: number;
  laneOps: number;
  bounds: Record<string, number>;
}

/** Totals of `counts` on `g`: seconds, and per kernel what it moved and cost. */
export function estimate(counts: DispatchCounts[], g: GpuModel): { s: number; perKernel: Map<string, KernelEstimate> } {
  let s = 0;
  const perKernel = new Map<string, KernelEstimate>();
  for (const d of counts) {
    const t = dispatchTime(d, g);
    s += t.s;
    const k = perKernel.get(d.kernel) ?? { dispatches: 0, s: 0, dev: 0, tg: 0, laneOps: 0, bounds: {} };
    k.dispatches++;
    k.s += t.s;
    k.dev += d.dev_read + d.dev_write;
    k.tg += d.tg_read + d.tg_write;
    k.laneOps += laneOps(d);
    k.bounds[t.bound] = (k.bounds[t.bound] ?? 0) + t.s;
    perKernel.set(d.kernel, k);
  }
  return { s, perKernel };
}

/** The modelled GPU a Metal device name ("Apple M4 Max") is, or undefined. */
export function gpuModelFor(deviceName: string): GpuModel | undefined {
  const bare = deviceName.replace(/^Apple\s+/, '').trim();
  return GPUS.find((g) => g.name === bare);
}
