# HF transformers' own run of each Qwen fixture tower holding the weights of its llama.cpp Q8_0 mmproj file
# (test/fixtures/<fixture>/mmproj/mmproj-q8_0.gguf): every tensor of the file read with gguf-py (Q8_0 dequantised
# by gguf.quants.dequantize, F16 / F32 widened), the ones the converter split joined back (q | k | v stacked, the
# Conv3d kernel's two time steps), loaded into the HF model in place of its own weights, then run in fp32 (eager
# attention) on the fixture's pixel_values. The stages are what test/mmproj-qwen.test.ts holds the Q8_0 file to.
#   python3 verify/hf-q8-reference.py [repo root]
#     -> test/fixtures/<fixture>/mmproj/q8_0-expected.safetensors (one case: rocket_thin)
# Needs torch, transformers 5.17, gguf (gguf-py) and safetensors.
import importlib.util, json, os, sys
import numpy as np, torch
from gguf import GGUFReader
from gguf.quants import dequantize
from safetensors.torch import load_file, save_file

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location('hfbf16', os.path.join(here, 'hf-bf16-error.py'))
hf = importlib.util.module_from_spec(spec); spec.loader.exec_module(hf)

CASE = 'rocket_thin'
FIXTURES = ['qwen2_vl-tiny', 'qwen2_5_vl-tiny', 'qwen3_vl-tiny', 'qwen3_5-tiny']

def gguf_tensors(path):
    """name -> float32 tensor in numpy (row-major) order, Q8_0 dequantised as gguf-py does."""
    out = {}
    for t in GGUFReader(path).tensors:
        shape = [int(d) for d in reversed(t.shape)]
        out[t.name] = torch.from_numpy(np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(shape))
    return out

def hf_state(g, qwen2, v25, deepstack):
    """The HF visual state dict (names after `model.visual.`) llama.cpp's converter read the file from."""
    s, blocks = {}, sorted({int(k.split('.')[2]) for k in g if k.startswith('v.blk.')})
    w0, w1 = g.pop('v.patch_embd.weight'), g.pop('v.patch_embd.weight.1')
    s['patch_embed.proj.weight'] = torch.stack([w0, w1], dim=2)  # [D, C, T, P, P]
    if 'v.patch_embd.bias' in g: s['patch_embed.proj.bias'] = g.pop('v.patch_embd.bias')
    if 'v.position_embd.weight' in g: s['pos_embed.weight'] = g.pop('v.position_embd.weight')
    mlp = {'ffn_up': 'mlp.up_proj', 'ffn_gate': 'mlp.gate_proj', 'ffn_down': 'mlp.down_proj'} if v25 else \
          {'ffn_up': 'mlp.fc1', 'ffn_down': 'mlp.fc2'} if qwen2 else {'ffn_up': 'mlp.linear_fc1', 'ffn_down': 'mlp.linear_fc2'}
    for n in blocks:
        b, p = f'v.blk.{n}.', f'blocks.{n}.'
        for part in ('weight', 'bias'):
            if qwen2:
                s[p + 'attn.qkv.' + part] = torch.cat([g.pop(b + f'attn_{x}.{part}') for x in 'qkv'])
            else:
                s[p + 'attn.qkv.' + part] = g.pop(b + 'attn_qkv.' + part)
            s[p + 'attn.proj.' + part] = g.pop(b + 'attn_out.' + part)
            for gn, hn in mlp.items(): s[p + hn + '.' + part] = g.pop(b + gn + '.' + part)
        for gn, hn in (('ln1', 'norm1'), ('ln2', 'norm2')):
            s[p + hn + '.weight'] = g.pop(b + gn + '.weight')
            if b + gn + '.bias' in g: s[p + hn + '.bias'] = g.pop(b + gn + '.bias')
    norm, up, down = ('merger.ln_q', 'merger.mlp.0', 'merger.mlp.2') if qwen2 else ('merger.norm', 'merger.linear_fc1', 'merger.linear_fc2')
    for gn, hn in (('v.post_ln', norm), ('mm.0', up), ('mm.2', down)):
        for part in ('weight', 'bias'):
            if f'{gn}.{part}' in g: s[f'{hn}.{part}'] = g.pop(f'{gn}.{part}')
    for k, layer in enumerate(deepstack):
        for gn, hn in (('norm', 'norm'), ('fc1', 'linear_fc1'), ('fc2', 'linear_fc2')):
            for part in ('weight', 'bias'):
                s[f'deepstack_merger_list.{k}.{hn}.{part}'] = g.pop(f'v.deepstack.{layer}.{gn}.{part}')
    if g: raise SystemExit(f'tensors the mapping does not place: {sorted(g)}')
    return s

def main(root):
    for fx in FIXTURES:
        d = os.path.join(root, 'test', 'fixtures', fx)
        m = hf.load(os.path.join(d, 'model'), torch.float32)
        vis = m.model.visual
        cfg = m.config.vision_config
        deepstack = list(getattr(cfg, 'deepstack_visual_indexes', []) or [])
        state = hf_state(gguf_tensors(os.path.join(d, 'mmproj', 'mmproj-q8_0.gguf')), fx.startswith('qwen2'), fx == 'qwen2_5_vl-tiny', deepstack)
        own = vis.state_dict()
        missing = sorted(set(own) - set(state)); extra = sorted(set(state) - set(own))
        if missing or extra: raise SystemExit(f'{fx}: HF tensors not in the file {missing}, file tensors HF lacks {extra}')
        # The mapping is right only if every tensor the file holds unquantised equals HF's own, to its stored type.
        worst = max(hf.rel(state[k].reshape(own[k].shape), own[k]) for k in own)
        for k in own:
            if state[k].shape != own[k].shape:
                if state[k].numel() != own[k].numel(): raise SystemExit(f'{fx}: {k} {tuple(state[k].shape)} vs HF {tuple(own[k].shape)}')
                state[k] = state[k].reshape(own[k].shape)
        vis.load_state_dict(state)
        e = load_file(os.path.join(d, 'expected', f'{CASE}.safetensors'))
        outs = hf.qwen(m, torch.float32, e)
        out = {k: v.contiguous() for k, v in outs.items()}
        dest = os.path.join(d, 'mmproj', 'q8_0-expected.safetensors')
        save_file(out, dest, metadata={'case': CASE, 'made_by': 'verify/hf-q8-reference.py', 'torch': torch.__version__,
                                       'transformers': hf.transformers.__version__})
        print(json.dumps({'fixture': fx, 'case': CASE, 'stages': list(out), 'worst_weight_rel_change': worst,
                          'vs_expected': {k: hf.rel(out[k], e[k]) for k in out if k in e}}))

if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else '.')
