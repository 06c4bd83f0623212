# HF's own fp16 error on a CUDA GPU for the full-size towers of hf_towers.py (Qwen3-VL-8B-, Gemma 4 E4B- and
# Qwen2.5-VL-7B-shaped, random weights, the same model folders), at the checkpoints' default budget: the budget
# tessera's precision 'f16' on Metal is held to at full size (docs/metal.md), and the largest magnitude each kind
# of activation reaches there (what may leave half's range). The reference is HF fp32 on the same GPU with TF32
# off (matmuls and convolutions in full fp32); each dtype its own copy loaded from the checkpoint; eager attention;
# the stages and the ranges as verify/hf-f16-error.py takes them on the fixture towers.
# Without CUDA it measures the fp32 ranges alone, on the CPU (HF's fp16 error is defined on the GPU).
# Writes OUT/<tower>/hf-f16.json (after each image: a cut-short run keeps what it measured).
#   python3 verify/bf16-check/hf_f16_towers.py --out DIR [--towers qwen3_vl,gemma4] [--images a.png,b.jpg]
import argparse, importlib.util, json, os, time, traceback
import torch, transformers

here = os.path.dirname(os.path.abspath(__file__))
def module(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
    return m
towers = module('hf_towers', os.path.join(here, 'hf_towers.py'))
f16 = module('hf_f16_error', os.path.join(here, '..', 'hf-f16-error.py'))
hf = towers.hf

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', required=True)
    ap.add_argument('--fixtures', default='test/fixtures')
    ap.add_argument('--towers', default='qwen3_vl,gemma4')
    ap.add_argument('--images', default=None, help="comma-separated; default: hf_towers.py's IMAGES of each tower")
    a = ap.parse_args()
    torch.set_num_threads(os.cpu_count())
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for tower in a.towers.split(','):
        try: run_tower(a, tower)
        except Exception: traceback.print_exc()

def run_tower(a, tower):
    out = os.path.join(a.out, tower)
    t0 = time.time()
    model = towers.build(a.fixtures, tower, out)
    print(f'{tower}: model folder in {time.time() - t0:.0f} s', flush=True)
    proc = towers.processor(model)
    run = hf.gemma if tower == 'gemma4' else hf.qwen
    cuda = torch.cuda.is_available()
    dev = 'cuda' if cuda else 'cpu'
    m32 = hf.load(model, torch.float32, dev)
    m16 = hf.load(model, torch.float16, dev) if cuda else None
    report = {'what': "HF fp16 against HF fp32 on one CUDA GPU (TF32 off), max |fp16 - fp32| / max |fp32| per image and stage; eager attention; HF processor (PIL backend) at the default budget; fp32_max_abs: the largest |output| of every module of the vision tower in the fp32 run (block index removed from the name); fp32_max_attention_matmul: of every 4-D torch.matmul (scores before scaling, and P·V)",
              'torch': torch.__version__, 'transformers': transformers.__version__, 'gpu': torch.cuda.get_device_name(0) if cuda else None,
              'cpu': None if cuda else towers.cpu_name(), 'images': {}}
    for name in (a.images or towers.IMAGES[tower]).split(','):
        path = towers.image_file(a.fixtures, out, name)
        e = towers.inputs(tower, proc, path)
        f32, seen, best = f16.measured_fp32(m32, run, e)
        h16 = run(m16, torch.float16, e) if cuda else None
        stem = os.path.splitext(os.path.basename(path))[0]
        entry = {'image': name, 'patches': e['pixel_values'].shape[0],
                 'f16_vs_fp32': {k: hf.sig(hf.rel(h16[k], f32[k])) for k in f32} if cuda else None,
                 'f16_nonfinite': sum(int((~torch.isfinite(t)).sum()) for t in h16.values()) if cuda else None,
                 'fp32_max_abs': {k: float(f'{v:.3g}') for k, v in seen.items()},
                 'fp32_max_attention_matmul': float(f"{best['raw']:.3g}")}
        report['images'][stem] = entry
        print(json.dumps({'tower': tower, **{k: v for k, v in entry.items() if k != 'fp32_max_abs'}}), flush=True)
        json.dump(report, open(os.path.join(out, 'hf-f16.json'), 'w'), indent=1)
    del m32, m16
    if cuda: torch.cuda.empty_cache()

if __name__ == '__main__':
    main()
