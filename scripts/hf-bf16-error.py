# HF's own bf16 error against its fp32 on the suite's fixture towers and images, per stage: max |bf16 -
# fp32| / max |fp32| (the bound tessera's precision 'bf16' is held to: test/fixtures/*/hf-bf16.json,
# docs/bf16.md). Each dtype runs its own copy of the model, loaded from the checkpoint (a tower cast to
# bf16 and back would run its fp32 pass on bf16-rounded weights). Needs torch and transformers 5.17.
#   python3 scripts/hf-bf16-error.py [repo root]     -> one JSON line per fixture image
import json, os, sys
import torch
from safetensors.torch import load_file
from transformers import AutoModelForImageTextToText

root = sys.argv[1] if len(sys.argv) > 1 else '.'

def rel(a, b):
    a, b = a.float(), b.float()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))

def load(d, dtype):
    m = AutoModelForImageTextToText.from_pretrained(os.path.join(d, 'model'), dtype=torch.float32, attn_implementation='eager')
    return m.to(dtype).eval()

def hooked(layers, outs):
    def keep(i):
        return lambda mod, inp, out: outs.__setitem__(f'block.{i}', (out[0] if isinstance(out, tuple) else out).detach().float().clone())
    return [b.register_forward_hook(keep(i)) for i, b in enumerate(layers)]

def qwen(m, dtype, e):
    vis, outs = m.model.visual, {}
    hs = hooked(vis.blocks, outs)
    with torch.no_grad():
        r = vis(e['pixel_values'].to(dtype), grid_thw=e['image_grid_thw'])
    for h in hs: h.remove()
    outs['merged'] = r.pooler_output.float()
    for k, t in enumerate(getattr(r, 'deepstack_features', None) or []): outs[f'deepstack.{k}'] = t.float()
    return outs

def gemma(m, dtype, e):
    vt, outs = m.model.vision_tower, {}
    hs = hooked(getattr(getattr(vt, 'encoder', vt), 'layers', []), outs)
    with torch.no_grad():
        r = m.model.get_image_features(pixel_values=e['pixel_values'][None].to(dtype), image_position_ids=e['positions'][None])
    for h in hs: h.remove()
    outs['projected'] = r.pooler_output.float().reshape(-1, e['projected'].shape[-1])
    return outs

for fx, run in (('qwen3_5-tiny', qwen), ('qwen3_vl-tiny', qwen), ('gemma4-tiny', gemma)):
    d = os.path.join(root, 'test/fixtures', fx)
    m32, m16 = load(d, torch.float32), load(d, torch.bfloat16)
    for c in json.load(open(os.path.join(d, 'cases.json')))['cases']:
        e = load_file(os.path.join(d, 'expected', c['name'] + '.safetensors'))
        f32, bf = run(m32, torch.float32, e), run(m16, torch.bfloat16, e)
        print(json.dumps({'fixture': fx, 'case': c['name'],
                          'fp32_vs_expected': {k: rel(f32[k].reshape(e[k].shape), e[k]) for k in f32 if k in e},
                          'bf16_vs_fp32': {k: rel(bf[k], f32[k]) for k in f32}}), flush=True)
