# HF's own bf16 error against its fp32 on the suite's fixture towers and images, per stage: max |bf16 -
# fp32| / max |fp32| (the bound tessera's precision 'bf16' is held to: test/fixtures/*/hf-bf16.json,
# docs/bf16.md). Each dtype runs its own copy of the model, loaded from the checkpoint (a tower cast to
# bf16 and back would run its fp32 pass on bf16-rounded weights). Needs torch and transformers 5.17.
#   python3 verify/hf-bf16-error.py [repo root]     -> one JSON line per fixture image
# verify/bf16-check/hf_towers.py imports load, qwen, gemma and rel from here for the full-size towers.
import json, os, sys
import torch
from safetensors.torch import load_file
from transformers import AutoModelForImageTextToText

def rel(a, b):
    a, b = a.float(), b.float()
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))

def load(model_dir, dtype, device='cpu'):
    m = AutoModelForImageTextToText.from_pretrained(model_dir, dtype=torch.float32, attn_implementation='eager')
    return m.to(device=device, dtype=dtype).eval()

def hooked(layers, outs):
    def keep(i):
        return lambda mod, inp, out: outs.__setitem__(f'block.{i}', (out[0] if isinstance(out, tuple) else out).detach().float().cpu().clone())
    return [b.register_forward_hook(keep(i)) for i, b in enumerate(layers)]

def qwen(m, dtype, e):
    vis, outs, dev = m.model.visual, {}, next(m.parameters()).device
    hs = hooked(vis.blocks, outs)
    with torch.no_grad():
        r = vis(e['pixel_values'].to(dev, dtype), grid_thw=e['image_grid_thw'].to(dev))
    for h in hs: h.remove()
    outs['merged'] = r.pooler_output.float().cpu()
    for k, t in enumerate(getattr(r, 'deepstack_features', None) or []): outs[f'deepstack.{k}'] = t.float().cpu()
    return outs

def gemma(m, dtype, e):
    vt, outs, dev = m.model.vision_tower, {}, next(m.parameters()).device
    hs = hooked(getattr(getattr(vt, 'encoder', vt), 'layers', []), outs)
    with torch.no_grad():
        r = m.model.get_image_features(pixel_values=e['pixel_values'][None].to(dev, dtype), image_position_ids=e['positions'][None].to(dev))
    for h in hs: h.remove()
    p = r.pooler_output
    p = torch.cat([t.reshape(-1, t.shape[-1]) for t in p]) if isinstance(p, (tuple, list)) else p  # one tensor per image
    outs['projected'] = p.float().cpu().reshape(-1, p.shape[-1])
    return outs

def main(root):
    for fx, run in (('qwen3_5-tiny', qwen), ('qwen3_vl-tiny', qwen), ('gemma4-tiny', gemma)):
        d = os.path.join(root, 'test/fixtures', fx)
        m32, m16 = load(os.path.join(d, 'model'), torch.float32), load(os.path.join(d, 'model'), torch.bfloat16)
        for c in json.load(open(os.path.join(d, 'cases.json')))['cases']:
            e = load_file(os.path.join(d, 'expected', c['name'] + '.safetensors'))
            f32, bf = run(m32, torch.float32, e), run(m16, torch.bfloat16, e)
            print(json.dumps({'fixture': fx, 'case': c['name'],
                              'fp32_vs_expected': {k: rel(f32[k].reshape(e[k].shape), e[k]) for k in f32 if k in e},
                              'bf16_vs_fp32': {k: rel(bf[k], f32[k]) for k in f32}}), flush=True)

if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else '.')
