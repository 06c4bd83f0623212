// The Apple GPUs the Metal cost model (scripts/bench/metal-model.mjs) estimates for, with where each figure
// comes from. FP32 rate = cores x 128 ALUs x 2 (FMA) x clock. Threadgroup-memory bandwidth is not published
// by Apple, and philipturner/metal-benchmarks lists shared-memory bandwidth per cycle as "TBD"; the model
// uses the same table's on-core data bandwidth, 64 B per cycle per core, for it (an assumption the first
// Mac run checks: `npm run test:metal` prints the model beside the measurement).
const PT = 'https://github.com/philipturner/metal-benchmarks (README, GPU table and "On-Chip Memory" table)';
export const TG_BYTES_PER_CYCLE = { value: 64, source: `${PT}: "On-Core Data BW/Cycle 64 B" for Apple 7 and 8` };
export const ALUS_PER_CORE = { value: 128, source: `${PT}: "Apple described each GPU core as having 128 ALUs"` };

export const GPUS = [
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

export const fp32Tflops = (g) => (g.cores * ALUS_PER_CORE.value * 2 * g.ghz) / 1000;
