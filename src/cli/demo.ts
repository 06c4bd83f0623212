// The demo tower `tessera encode` runs without --model: a tiny Qwen3.5-shaped tower (2 blocks,
// hidden 64) with RANDOM weights, generated deterministically on first use into <package>/demo/
// (or the temp folder when the package folder is read-only). It exercises the whole pipeline —
// decode, PIL-exact preprocessing, the tower, the output file — but its embeddings mean nothing.
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const DEMO_NAME = 'qwen3_5-random';
const VISION = { depth: 2, hidden_size: 64, num_heads: 4, intermediate_size: 128, out_hidden_size: 64 };
// Budget capped at 1 MP (real checkpoints: 16 MP) so that the demo answers in a moment.
const PREPROCESSOR = {
  size: { shortest_edge: 65536, longest_edge: 1048576 },
  patch_size: 16,
  temporal_patch_size: 2,
  merge_size: 2,
  image_mean: [0.5, 0.5, 0.5],
  image_std: [0.5, 0.5, 0.5],
  processor_class: 'Qwen3VLProcessor',
  image_processor_type: 'Qwen2VLImageProcessorFast',
};

export const DEMO_NOTICE =
  'note: no --model given: using the built-in demo tower (Qwen3.5-shaped, 2 blocks, hidden 64) whose weights are RANDOM; ' +
  'its embeddings mean nothing. Pass --model <path> to encode with a real checkpoint.';

export function tesseraVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function tensors(): { name: string; shape: number[]; kind: 'w' | 'b' | 'one' | 'e' }[] {
  const { depth, hidden_size: D, intermediate_size: I, out_hidden_size: O } = VISION;
  const W = 4 * D;
  const t: [string, number[], 'w' | 'b' | 'one' | 'e'][] = [
    ['patch_embed.proj.weight', [D, 3, 2, 16, 16], 'w'],
    ['patch_embed.proj.bias', [D], 'b'],
    ['pos_embed.weight', [2304, D], 'e'],
  ];
  for (let l = 0; l < depth; l++) {
    const p = `blocks.${l}.`;
    t.push(
      [p + 'norm1.weight', [D], 'one'], [p + 'norm1.bias', [D], 'b'],
      [p + 'attn.qkv.weight', [3 * D, D], 'w'], [p + 'attn.qkv.bias', [3 * D], 'b'],
      [p + 'attn.proj.weight', [D, D], 'w'], [p + 'attn.proj.bias', [D], 'b'],
      [p + 'norm2.weight', [D], 'one'], [p + 'norm2.bias', [D], 'b'],
      [p + 'mlp.linear_fc1.weight', [I, D], 'w'], [p + 'mlp.linear_fc1.bias', [I], 'b'],
      [p + 'mlp.linear_fc2.weight', [D, I], 'w'], [p + 'mlp.linear_fc2.bias', [D], 'b'],
    );
  }
  t.push(
    ['merger.norm.weight', [D], 'one'], ['merger.norm.bias', [D], 'b'],
    ['merger.linear_fc1.weight', [W, W], 'w'], ['merger.linear_fc1.bias', [W], 'b'],
    ['merger.linear_fc2.weight', [O, W], 'w'], ['merger.linear_fc2.bias', [O], 'b'],
  );
  return t.map(([name, shape, kind]) => ({ name: 'model.visual.' + name, shape, kind }));
}

/** Random bf16 weights (xorshift32, U(-a, a) with a = sqrt(3 / fan_in)) as one safetensors file. */
function weightsFile(): Buffer {
  const list = tensors();
  const header: Record<string, unknown> = { __metadata__: { format: 'pt', note: 'tessera demo tower: RANDOM weights' } };
  let offset = 0;
  const sizes = list.map((t) => t.shape.reduce((a, b) => a * b, 1) * 2);
  list.forEach((t, i) => {
    header[t.name] = { dtype: 'BF16', shape: t.shape, data_offsets: [offset, offset + sizes[i]!] };
    offset += sizes[i]!;
  });
  let text = JSON.stringify(header);
  text += ' '.repeat((8 - ((8 + text.length) % 8)) % 8);
  const buf = Buffer.alloc(8 + text.length + offset);
  buf.writeBigUInt64LE(BigInt(text.length), 0);
  buf.write(text, 8, 'latin1');
  let pos = 8 + text.length;
  const f32 = new Float32Array(1);
  const u32 = new Uint32Array(f32.buffer);
  list.forEach((t, i) => {
    let s = (i + 1) * 2654435761 >>> 0 || 1;
    const fanIn = t.shape.length > 1 ? t.shape.slice(1).reduce((a, b) => a * b, 1) : 1;
    const scale = t.kind === 'w' ? Math.sqrt(3 / fanIn) : t.kind === 'e' ? 0.5 : 0.02;
    for (let k = 0; k < sizes[i]! / 2; k++) {
      s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
      f32[0] = t.kind === 'one' ? 1 : ((s / 4294967296) * 2 - 1) * scale;
      buf.writeUInt16LE(u32[0]! >>> 16, pos);
      pos += 2;
    }
  });
  return buf;
}

async function generate(dir: string): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  await mkdir(tmp, { recursive: true });
  await writeFile(
    join(tmp, 'config.json'),
    JSON.stringify(
      {
        model_type: 'qwen3_5',
        vision_config: {
          model_type: 'qwen3_5',
          ...VISION,
          hidden_act: 'gelu_pytorch_tanh',
          in_channels: 3,
          patch_size: 16,
          temporal_patch_size: 2,
          spatial_merge_size: 2,
          num_position_embeddings: 2304,
          deepstack_visual_indexes: [],
        },
        text_config: { hidden_size: VISION.out_hidden_size },
        tessera_demo: 'RANDOM weights: a demo of the pipeline, not a model',
      },
      null,
      2,
    ),
  );
  await writeFile(join(tmp, 'preprocessor_config.json'), JSON.stringify(PREPROCESSOR, null, 2));
  await writeFile(join(tmp, 'model.safetensors'), weightsFile());
  try {
    await rename(tmp, dir);
  } catch (e) {
    // Another process generated it first: use theirs.
    await rm(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, 'model.safetensors'))) throw e;
  }
}

/** The demo tower's folder, generated on first use. */
export async function demoTowerPath(): Promise<string> {
  const candidates = [join(ROOT, 'demo', DEMO_NAME), join(tmpdir(), `tessera-demo-${tesseraVersion()}`, DEMO_NAME)];
  for (const dir of candidates) {
    if (existsSync(join(dir, 'model.safetensors'))) return dir;
  }
  let last: unknown;
  for (const dir of candidates) {
    try {
      await mkdir(join(dir, '..'), { recursive: true });
      await generate(dir);
      return dir;
    } catch (e) {
      last = e; // read-only package folder: try the temp folder
    }
  }
  throw last;
}
