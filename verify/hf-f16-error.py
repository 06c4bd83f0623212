# HF's own fp16 error against its fp32 on the suite's fixture towers and images, per stage, on a CUDA GPU
# (the budget tessera's precision 'f16' on Metal is held to: test/fixtures/*/hf-f16.json, docs/metal.md),
# and the largest magnitude each kind of activation reaches in the fp32 run (what may leave half's range:
# docs/metal.md#half-precision). Each dtype runs its own copy of the model, loaded from the checkpoint;
# eager attention. Needs torch and transformers 5.17 and a CUDA device.
#   python3 verify/hf-f16-error.py [repo root] [--fixtures qwen2_vl-tiny,...] [--write DIR]
#     -> one JSON line per fixture image; with --write, DIR/<fixture>/hf-f16.json as the tests read it
import importlib.util, json, os, re, sys
import torch, transformers
from safetensors.torch import load_file

spec = importlib.util.spec_from_file_location('hfbf16', os.path.join(os.path.dirname(os.path.abspath(__file__)), 'hf-bf16-error.py'))
hf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hf)

def ranges(model):
    # max |output| of every leaf module and of each block's output, grouped by the module's name with the
    # block index removed (blocks.3.mlp.linear_fc1 -> blocks.mlp.linear_fc1)
    seen, hooks = {}, []
    def keep(name):
        def f(mod, inp, out):
            t = out[0] if isinstance(out, tuple) else out
            if torch.is_tensor(t) and t.is_floating_point():
                key = re.sub(r'\.\d+(\.|$)', r'\1', name)
                seen[key] = max(seen.get(key, 0.0), float(t.detach().abs().max()))
        return f
    for name, mod in model.named_modules():
        if 'visual' in name or 'vision_tower' in name or 'embed_vision' in name:
            hooks.append(mod.register_forward_hook(keep(name)))
    return seen, hooks

def attn_scores(model):
    # the largest |q·kᵀ| before scaling and after, per fixture (eager attention: the scores HF forms in fp16)
    best = {'raw': 0.0}
    orig = torch.matmul
    def mm(a, b, *args, **kw):
        r = orig(a, b, *args, **kw)
        if a.dim() == 4 and b.dim() == 4 and b.shape[-2] == a.shape[-1] and a.shape[-2] == b.shape[-1]:
            best['raw'] = max(best['raw'], float(r.detach().abs().max()))
        return r
    return best, mm, orig

def measured_fp32(model, run, e):
    """run(model, torch.float32, e) with every module's largest |output| and the largest raw attention matmul recorded."""
    seen, hooks = ranges(model)
    best, mm, orig = attn_scores(model)
    torch.matmul = mm
    try:
        out = run(model, torch.float32, e)
    finally:
        torch.matmul = orig
        for h in hooks: h.remove()
    return out, seen, best

def main(argv):
    root, names, write = hf.args(argv)
    dev = 'cuda'
    gpu = torch.cuda.get_device_name(0)
    print(json.dumps({'torch': torch.__version__, 'gpu': gpu}), flush=True)
    for fx in names:
        run, d = hf.FIXTURES[fx], os.path.join(root, 'test/fixtures', fx)
        m32 = hf.load(os.path.join(d, 'model'), torch.float32, dev)
        m16 = hf.load(os.path.join(d, 'model'), torch.float16, dev)
        doc = {'cases': {}, 'fp32_vs_expected': {}, 'fp32_max_abs': {}, 'fp32_max_attention_matmul': {}, 'f16_nonfinite': {}}
        for c in json.load(open(os.path.join(d, 'cases.json')))['cases']:
            e = load_file(os.path.join(d, 'expected', c['name'] + '.safetensors'))
            f32, seen, best = measured_fp32(m32, run, e)
            h16 = run(m16, torch.float16, e)
            line = {'fixture': fx, 'case': c['name'],
                    'fp32_vs_expected': {k: hf.rel(f32[k].reshape(e[k].shape), e[k]) for k in f32 if k in e},
                    'f16_vs_fp32': {k: hf.rel(h16[k], f32[k]) for k in f32},
                    'f16_nonfinite': {k: int((~torch.isfinite(h16[k])).sum()) for k in h16},
                    'fp32_max_abs': seen, 'fp32_max_score_unscaled': best['raw']}
            print(json.dumps(line), flush=True)
            n = c['name']
            doc['cases'][n] = {k: hf.sig(v) for k, v in line['f16_vs_fp32'].items()}
            doc['fp32_vs_expected'][n] = {k: hf.sig(v) for k, v in line['fp32_vs_expected'].items()}
            doc['fp32_max_abs'][n] = {k: float(f'{v:.3g}') for k, v in seen.items()}
            doc['fp32_max_attention_matmul'][n] = float(f"{best['raw']:.3g}")
            doc['f16_nonfinite'][n] = sum(line['f16_nonfinite'].values())
        if write:
            os.makedirs(os.path.join(write, fx), exist_ok=True)
            json.dump({'what': "HF's own fp16 error against its fp32 on this fixture: max |fp16 - fp32| / max |fp32| per stage and image, each dtype its own copy of the model loaded from the checkpoint, fp16 pixel_values, eager attention, on a CUDA GPU (the budget of tessera's precision 'f16' on Metal: test/metal-half.test.ts, docs/metal.md#half-precision)",
                       'measured': f"verify/hf-f16-error.py: torch {torch.__version__}, transformers {transformers.__version__}, on an {gpu}, with the fixture's own pixel_values; stages as HF's forward hooks give them (no embed)",
                       'cases': doc['cases'], 'fp32_vs_expected': doc['fp32_vs_expected'],
                       'fp32_vs_expected_note': "HF's fp32 on that GPU against expected/ (HF fp32 on a CPU): cuDNN's TF32 convolutions move the patch embedding by ~1e-4 in the Qwen towers. tessera is measured against expected/, so its bound at each stage is cases + fp32_vs_expected (the triangle inequality: HF fp16's own distance from expected/ is at most that).",
                       'fp32_max_abs': doc['fp32_max_abs'],
                       'fp32_max_abs_note': "the largest |output| of every module of the vision tower in the fp32 run (block index removed from the name), and of every 4-D torch.matmul (the attention's scores before scaling, and P·V): what could leave half's range",
                       'fp32_max_attention_matmul': doc['fp32_max_attention_matmul'], 'f16_nonfinite': doc['f16_nonfinite']},
                      open(os.path.join(write, fx, 'hf-f16.json'), 'w'), indent=1)

if __name__ == '__main__':
    main(sys.argv[1:])
