# The full-size half of the bf16 check (docs/bf16.md#accuracy): HF's side. Builds a Qwen3-VL-8B-shaped,
# a Gemma 4 E4B-shaped and a Qwen2.5-VL-7B-shaped vision tower with random weights (HF's own init, seed 0;
# Qwen2.5-VL's biases and norm weights drawn too), saved in bf16 as model folders tessera opens
# (config.json, preprocessor_config.json with the checkpoints' default budget, model.safetensors); runs
# HF's processor (PIL backend, as the suite's fixtures) on the suite's images (or images made from them,
# see IMAGES), then HF fp32 on the CPU (the reference) and HF bf16 on the CPU and on CUDA, eager attention,
# each dtype its own copy loaded from the checkpoint (verify/hf-bf16-error.py's load and runners).
# Writes, per tower, OUT/<tower>/model/, OUT/<tower>/<image>.safetensors (the tower's input and the
# fp32 stages) and OUT/<tower>/hf-bf16.json (HF bf16 against HF fp32 per image, stage and device);
# verify/bf16-check/compare.mjs then runs tessera on the same folders and inputs.
#   python3 verify/bf16-check/hf_towers.py --out DIR [--towers qwen3_vl,gemma4,qwen2_5_vl] [--images a.png,b.jpg]
#     [--gemma-soft-tokens N] [--build-only]      (Gemma 4's image budget; only make the model folders)
import argparse, importlib.util, json, os, time, traceback
import torch, transformers
from PIL import Image, ImageOps
from safetensors.torch import save_file
from transformers import AutoConfig, AutoImageProcessor, AutoModelForImageTextToText

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location('hf_bf16_error', os.path.join(here, '..', 'hf-bf16-error.py'))
hf = importlib.util.module_from_spec(spec); spec.loader.exec_module(hf)

# Qwen3-VL-8B-Instruct's vision_config (its text width is the merger's output); the hub's
# preprocessor_config.json of every Qwen3-VL checkpoint (src/image/config.ts QWEN_HUB_PREPROCESSOR_CONFIG).
QWEN = dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, patch_size=16, spatial_merge_size=2,
            temporal_patch_size=2, out_hidden_size=4096, num_position_embeddings=2304, deepstack_visual_indexes=[8, 16, 24],
            hidden_act='gelu_pytorch_tanh', in_channels=3, initializer_range=0.02)
QWEN_PRE = dict(size=dict(longest_edge=16777216, shortest_edge=65536), patch_size=16, temporal_patch_size=2, merge_size=2,
                image_mean=[0.5] * 3, image_std=[0.5] * 3, processor_class='Qwen3VLProcessor', image_processor_type='Qwen2VLImageProcessorFast')
# Gemma 4 E2B/E4B's vision_config (docs/models/gemma4-vision.md#config); E4B's text width 2560; the
# processor's default budget, 280 soft tokens.
GEMMA = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=16, num_attention_heads=12, num_key_value_heads=12,
             head_dim=64, position_embedding_size=10240, use_clipped_linears=True, standardize=False, patch_size=16, pooling_kernel_size=3)
GEMMA_TEXT_HIDDEN = 2560
# Qwen2.5-VL-7B-Instruct's vision_config (the tower of olmOCR, RolmOCR and Nanonets-OCR-s; src/families/qwen2/synthetic.ts
# QWEN2_5_VL_7B) and the preprocessor_config.json those checkpoints ship: the real budget, both spellings.
QWEN25 = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, out_hidden_size=3584, window_size=112,
              fullatt_block_indexes=[7, 15, 23, 31], patch_size=14, spatial_merge_size=2, temporal_patch_size=2,
              hidden_act='silu', in_channels=3, initializer_range=0.02)
QWEN25_PRE = dict(min_pixels=3136, max_pixels=12845056, size=dict(shortest_edge=3136, longest_edge=12845056), patch_size=14,
                  temporal_patch_size=2, merge_size=2, image_mean=[0.48145466, 0.4578275, 0.40821073],
                  image_std=[0.26862954, 0.26130258, 0.27577711], image_processor_type='Qwen2VLImageProcessor',
                  processor_class='Qwen2_5_VLProcessor')
# the images each tower runs unless --images says otherwise; NAME@F is the suite's image NAME scaled by F and
# written as PNG (hf_towers.py's OUT/images): a real file both sides decode, sized to a few thousand patches
IMAGES = {'qwen3_vl': 'coffee.png,chelsea_exif6.jpg,rocket_thin.png,tiny.png,astronaut.jpg',
          'gemma4': 'coffee.png,chelsea_exif6.jpg,rocket_thin.png,tiny.png,astronaut.jpg',
          'qwen2_5_vl': 'astronaut_big.jpg@0.45,chelsea_exif6.jpg,rocket_thin.png'}
GEMMA_PRE = dict(patch_size=16, max_soft_tokens=280, pooling_kernel_size=3, do_resize=True, resample=3, do_rescale=True,
                 rescale_factor=1 / 255, do_normalize=False, image_mean=[0.0] * 3, image_std=[1.0] * 3, do_convert_rgb=True,
                 image_processor_type='Gemma4ImageProcessor', processor_class='Gemma4Processor')

def build(fixtures, tower, out, soft_tokens=None):
    """The model folder: the fixture tower's config (made by transformers 5.17) at full size, random weights;
    soft_tokens: Gemma 4's image budget in place of the processor's default (fewer patches per image)."""
    model = os.path.join(out, 'model')
    if os.path.exists(os.path.join(model, 'model.safetensors')): return model
    os.makedirs(model, exist_ok=True)
    cfg = json.load(open(os.path.join(fixtures, f'{tower}-tiny', 'model', 'config.json')))
    if tower == 'qwen3_vl':
        cfg['vision_config'].update(QWEN)
        cfg['text_config']['hidden_size'] = QWEN['out_hidden_size']
        pre = QWEN_PRE
    elif tower == 'qwen2_5_vl':
        cfg['vision_config'].update(QWEN25)
        cfg['text_config']['hidden_size'] = QWEN25['out_hidden_size']
        pre = QWEN25_PRE
    else:
        cfg['vision_config'].update(GEMMA)
        cfg['text_config']['hidden_size'] = GEMMA_TEXT_HIDDEN
        pre = {**GEMMA_PRE, 'max_soft_tokens': soft_tokens} if soft_tokens else GEMMA_PRE
    cfg.pop('torch_dtype', None)
    json.dump(cfg, open(os.path.join(model, 'config.json'), 'w'), indent=1)
    torch.manual_seed(0)
    m = AutoModelForImageTextToText.from_config(AutoConfig.from_pretrained(model))
    if tower == 'qwen2_5_vl':
        # HF's init leaves every bias 0 and every RMSNorm weight 1; drawn here, so that no term of the tower is idle
        with torch.no_grad():
            for name, p in m.model.visual.named_parameters():
                if name.endswith('.bias'): p.normal_(0.0, 0.02)
                elif p.dim() == 1: p.normal_(1.0, 0.1)
    m.to(torch.bfloat16).save_pretrained(model)  # bf16, as the real checkpoints
    json.dump(pre, open(os.path.join(model, 'preprocessor_config.json'), 'w'), indent=1)
    return model

def processor(model):
    try: return AutoImageProcessor.from_pretrained(model, backend='pil')
    except Exception:
        # AutoImageProcessor wants torchvision even for the PIL backend; the PIL classes themselves need none
        if json.load(open(os.path.join(model, 'config.json')))['model_type'] == 'gemma4':
            from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil
            return Gemma4ImageProcessorPil.from_pretrained(model)
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
        return Qwen2VLImageProcessorPil.from_pretrained(model)

def cpu_name():
    with open('/proc/cpuinfo') as f:
        return next((l.split(':', 1)[1].strip() for l in f if l.startswith('model name')), 'unknown CPU')

def image_file(fixtures, out, name):
    """The file an image name stands for: the suite's image, or NAME@F made from it (see IMAGES)."""
    if '@' not in name: return os.path.join(fixtures, 'images', name)
    base, f = name.split('@')
    path = os.path.join(out, 'images', f'{os.path.splitext(base)[0]}-{f}.png')
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        img = ImageOps.exif_transpose(Image.open(os.path.join(fixtures, 'images', base))).convert('RGB')
        img.resize((round(img.width * float(f)), round(img.height * float(f))), Image.LANCZOS).save(path)
    return path

def inputs(tower, proc, path):
    """The tower's input for one image, as tessera's encodePixels takes it (Gemma: unpadded rows)."""
    img = ImageOps.exif_transpose(Image.open(path)).convert('RGB')
    b = proc(images=[img], return_tensors='pt')
    if tower != 'gemma4':
        return {'pixel_values': b['pixel_values'].float().contiguous(), 'image_grid_thw': b['image_grid_thw'].long().contiguous()}
    pos_key = next(k for k in b.keys() if 'position' in k)
    px, pos = b['pixel_values'][0].float(), b[pos_key][0].long()
    real = (pos >= 0).all(-1)
    return {'pixel_values': px[real].contiguous(), 'positions': pos[real].contiguous()}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', required=True)
    ap.add_argument('--fixtures', default='test/fixtures')
    ap.add_argument('--towers', default='qwen3_vl,gemma4')
    ap.add_argument('--images', default=None, help='comma-separated; default: IMAGES of each tower')
    ap.add_argument('--build-only', action='store_true', help='make the model folders, run nothing')
    ap.add_argument('--gemma-soft-tokens', type=int, default=None, help="Gemma 4's image budget (default: the processor's, 280)")
    a = ap.parse_args()
    if a.build_only:
        for tower in a.towers.split(','): build(a.fixtures, tower, os.path.join(a.out, tower), a.gemma_soft_tokens)
        return
    torch.set_num_threads(os.cpu_count())
    cuda = torch.cuda.is_available()
    for tower in a.towers.split(','):
        try: run_tower(a, tower, cuda)
        except Exception: traceback.print_exc()

def run_tower(a, tower, cuda):
    out = os.path.join(a.out, tower)
    t0 = time.time()
    model = build(a.fixtures, tower, out, a.gemma_soft_tokens)
    print(f'{tower}: model folder in {time.time() - t0:.0f} s', flush=True)
    proc = processor(model)
    run = hf.gemma if tower == 'gemma4' else hf.qwen
    runs = [('cpu', torch.bfloat16)] + ([('cuda', torch.bfloat16)] if cuda else [])
    m32 = hf.load(model, torch.float32)
    ms = {dev: hf.load(model, dt, dev) for dev, dt in runs}
    report = {'what': 'HF bf16 against HF fp32 (CPU), max |bf16 - fp32| / max |fp32| per image, stage and device; eager attention; HF processor (PIL backend) at the default budget',
              'torch': torch.__version__, 'transformers': transformers.__version__, 'cpu': cpu_name(), 'threads': torch.get_num_threads(),
              'gpu': torch.cuda.get_device_name(0) if cuda else None, 'processor_backend': getattr(proc, 'backend', type(proc).__name__),
              'images': {}}
    for name in (a.images or IMAGES[tower]).split(','):
        path = image_file(a.fixtures, a.out, name)
        e = inputs(tower, proc, path)
        t1 = time.time()
        f32 = run(m32, torch.float32, e)
        t32 = time.time() - t1
        stem = os.path.splitext(os.path.basename(path))[0]
        save_file({**e, **{k: v.contiguous() for k, v in f32.items()}}, os.path.join(out, stem + '.safetensors'))
        entry = {'image': name, 'path': os.path.abspath(path), 'patches': e['pixel_values'].shape[0], 'fp32_cpu_s': round(t32, 2)}
        for dev, dt in runs:
            bf = run(ms[dev], dt, e)
            entry[dev] = {k: hf.rel(bf[k], f32[k]) for k in f32}
        report['images'][stem] = entry
        print(json.dumps({'tower': tower, **entry}), flush=True)
        json.dump(report, open(os.path.join(out, 'hf-bf16.json'), 'w'), indent=1)  # after each image: a cut-short run keeps what it measured
    del m32, ms
    if cuda: torch.cuda.empty_cache()

if __name__ == '__main__':
    main()
