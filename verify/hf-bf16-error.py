# HF's own bf16 error against its fp32 on the suite's fixture towers and images, per stage: max |bf16 -
# fp32| / max |fp32| (the bound tessera's precision 'bf16' is held to: test/fixtures/*/hf-bf16.json,
# docs/bf16.md). Each dtype runs its own copy of the model, loaded from the checkpoint (a tower cast to
# bf16 and back would run its fp32 pass on bf16-rounded weights). Needs torch and transformers 5.17.
#   python3 verify/hf-bf16-error.py [repo root] [--fixtures qwen2_vl-tiny,...] [--write DIR]
#     -> one JSON line per fixture image; with --write, DIR/<fixture>/hf-bf16.json as the tests read it
# verify/bf16-check/hf_towers.py imports load, qwen, gemma and rel from here for the full-size towers.
import json, os, sys
import torch, transformers
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
    # Qwen2.5-VL runs its blocks with the rows permuted into windows (groups of merge-unit rows) and puts them
    # back after the merger; the stages are reported in the processor's row order, as tessera gives them
    permute, order = getattr(vis, 'permute_input_for_window_attn', None), []
    if permute is not None:
        vis.permute_input_for_window_attn = lambda t, index, seq_len: (order.append(index), permute(t, index, seq_len=seq_len))[1]
    try:
        with torch.no_grad():
            r = vis(e['pixel_values'].to(dev, dtype), grid_thw=e['image_grid_thw'].to(dev))
    finally:
        for h in hs: h.remove()
        if permute is not None: del vis.permute_input_for_window_attn
    if order:
        back, unit = torch.argsort(order[0].cpu()), vis.spatial_merge_unit
        for k in [k for k in outs if k.startswith('block.')]:
            outs[k] = outs[k].reshape(-1, unit, outs[k].shape[-1])[back].reshape(outs[k].shape)
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

# every fixture tower and the runner its stages come from
FIXTURES = {'qwen3_5-tiny': qwen, 'qwen3_vl-tiny': qwen, 'qwen2_vl-tiny': qwen, 'qwen2_5_vl-tiny': qwen, 'gemma4-tiny': gemma}

def sig(x):
    # four significant digits, as the hf-*.json files keep them
    return float(f'{x:.4g}')

def args(argv):
    """[repo root] [--fixtures a,b] [--write DIR]: DIR/<fixture>/hf-*.json in the layout the tests read."""
    opt = lambda k: argv[argv.index(k) + 1] if k in argv else None
    rest = [a for i, a in enumerate(argv) if not a.startswith('--') and (i == 0 or not argv[i - 1].startswith('--'))]
    names = (opt('--fixtures') or ','.join(FIXTURES)).split(',')
    return (rest[0] if rest else '.'), names, opt('--write')

def main(argv):
    root, names, write = args(argv)
    for fx in names:
        run, d = FIXTURES[fx], os.path.join(root, 'test/fixtures', fx)
        m32, m16 = load(os.path.join(d, 'model'), torch.float32), load(os.path.join(d, 'model'), torch.bfloat16)
        cases, fp32 = {}, {}
        for c in json.load(open(os.path.join(d, 'cases.json')))['cases']:
            e = load_file(os.path.join(d, 'expected', c['name'] + '.safetensors'))
            f32, bf = run(m32, torch.float32, e), run(m16, torch.bfloat16, e)
            fp32[c['name']] = {k: rel(f32[k].reshape(e[k].shape), e[k]) for k in f32 if k in e}
            cases[c['name']] = {k: sig(rel(bf[k], f32[k])) for k in f32}
            print(json.dumps({'fixture': fx, 'case': c['name'], 'fp32_vs_expected': fp32[c['name']], 'bf16_vs_fp32': cases[c['name']]}), flush=True)
        if write:
            worst = max(v for c in fp32.values() for v in c.values())
            os.makedirs(os.path.join(write, fx), exist_ok=True)
            json.dump({'what': "HF's own bf16 error against its fp32 on this fixture: max |bf16 - fp32| / max |fp32| per image and stage, the tower loaded in bfloat16 (weights and activations) with bf16 pixel_values against the tower loaded in fp32 (eager attention)" + ("; block outputs put back into the processor's row order from HF's window order" if fx == 'qwen2_5_vl-tiny' else ''),
                       'measured': f'verify/hf-bf16-error.py: torch {torch.__version__}, transformers {transformers.__version__}, on the CPU of {cpu_name()}, with the fixture\'s own pixel_values; its fp32 run matched expected/ within {worst:.1e}; stages as HF\'s forward hooks give them (no embed)',
                       'cases': cases}, open(os.path.join(write, fx, 'hf-bf16.json'), 'w'), indent=1)

def cpu_name():
    with open('/proc/cpuinfo') as f:
        name = next((l.split(':', 1)[1].strip() for l in f if l.startswith('model name')), 'unknown CPU')
    return f'{name} ({os.cpu_count()} cores)'

if __name__ == '__main__':
    main(sys.argv[1:])
