# HF's own fp16 error against its fp32 on the suite's fixture towers and images, per stage, on a CUDA GPU
# (the budget tessera's precision 'f16' on Metal is held to: test/fixtures/*/hf-f16.json, docs/metal.md),
# and the largest magnitude each kind of activation reaches in the fp32 run (what may leave half's range:
# docs/metal.md#half-precision). Each dtype runs its own copy of the model, loaded from the checkpoint;
# eager attention. Needs torch and transformers 5.17 and a CUDA device.
#   python3 scripts/hf-f16-error.py [repo root]     -> one JSON line per fixture image
import importlib.util, json, os, re, sys
import torch
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

def main(root):
    dev = 'cuda'
    print(json.dumps({'torch': torch.__version__, 'gpu': torch.cuda.get_device_name(0)}), flush=True)
    for fx, run in (('qwen3_5-tiny', hf.qwen), ('qwen3_vl-tiny', hf.qwen), ('gemma4-tiny', hf.gemma)):
        d = os.path.join(root, 'test/fixtures', fx)
        m32 = hf.load(os.path.join(d, 'model'), torch.float32, dev)
        m16 = hf.load(os.path.join(d, 'model'), torch.float16, dev)
        for c in json.load(open(os.path.join(d, 'cases.json')))['cases']:
            e = load_file(os.path.join(d, 'expected', c['name'] + '.safetensors'))
            seen, hooks = ranges(m32)
            best, mm, orig = attn_scores(m32)
            torch.matmul = mm
            try:
                f32 = run(m32, torch.float32, e)
            finally:
                torch.matmul = orig
                for h in hooks: h.remove()
            h16 = run(m16, torch.float16, e)
            print(json.dumps({'fixture': fx, 'case': c['name'],
                              'fp32_vs_expected': {k: hf.rel(f32[k].reshape(e[k].shape), e[k]) for k in f32 if k in e},
                              'f16_vs_fp32': {k: hf.rel(h16[k], f32[k]) for k in f32},
                              'f16_nonfinite': {k: int((~torch.isfinite(h16[k])).sum()) for k in h16},
                              'fp32_max_abs': seen, 'fp32_max_score_unscaled': best['raw']}), flush=True)

if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else '.')
