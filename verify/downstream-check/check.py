#!/usr/bin/env python3
"""Runs vLLM's and SGLang's own input-handling code on tessera's output files.

    node verify/downstream-check/make-outputs.mjs OUT        # tessera's files (after npm run build:ts)
    python3 verify/downstream-check/fetch.py [--cache DIR]   # the engines' files, at pinned commits
    python3 verify/downstream-check/check.py --outputs OUT [--cache DIR]

Needs Python 3.10+ with torch and numpy (Debian: apt-get install python3-torch python3-numpy). The
engines themselves are not installed: the definitions named in sources.json are read from the
engines' source files (whole files, or the same definitions copied verbatim) and executed here.
The names they use that are not among them are supplied below, each marked as one of:
  real       the library itself (torch, numpy, the standard library);
  engine     another definition from sources.json;
  unreached  a stand-in that raises if called: the path checked never uses it;
  stand-in   a small replacement for a library the engines import that is not installed here
             (listed with the reason; docs/downstream.md repeats the list).
Prints one PASS or FAIL line per check and exits 1 if any check failed.
"""
import __future__
import argparse
import ast
import base64
import contextlib
import json
import logging
import os
import struct
import sys
import types
import typing
from abc import ABC, abstractmethod
from collections import UserDict, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, auto
from functools import partial
from io import BytesIO
from itertools import accumulate
from pathlib import Path

import numpy as np
import torch
import typing_extensions

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE.parent.parent / ".cache" / "downstream-check"
SOURCES = {f["id"]: f for f in json.loads((HERE / "sources.json").read_text())["files"]}
log = logging.getLogger("engine")

# --------------------------------------------------------------------------------------------
# Loading the engines' definitions
# --------------------------------------------------------------------------------------------


def unreached(name: str):
    """A stand-in for a name the checked path never calls."""

    def fail(*_args, **_kwargs):
        raise AssertionError(f"{name} is stubbed: the checked path was not expected to use it")

    return fail


def load(source_id: str, cache: Path, names: dict) -> types.ModuleType:
    """Executes the definitions sources.json lists for source_id, in a module whose globals are `names`.

    "Class.method" entries build a class that has only the listed methods (no bases), so that a
    check can call them without constructing the engine's whole object.
    """
    src = SOURCES[source_id]
    path = cache / src["repo"] / src["commit"] / src["path"]
    if not path.exists():
        raise SystemExit(f"missing {path}: run fetch.py (or fill the cache as docs/downstream.md says)")
    tree = ast.parse(path.read_text(), filename=str(path))
    top = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top[node.name] = node
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            top[node.targets[0].id] = node
    body, partial_classes = [], {}
    for name in src["defs"]:
        if "." in name:
            cls, method = name.split(".")
            partial_classes.setdefault(cls, []).append(method)
        elif name in top:
            body.append(top[name])
        else:
            raise SystemExit(f"{name} not found in {path}")
    for cls, methods in partial_classes.items():
        found = {n.name: n for n in top[cls].body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        missing = [m for m in methods if m not in found]
        if missing:
            raise SystemExit(f"{cls}.{missing} not found in {path}")
        kwargs = {"type_params": []} if "type_params" in ast.ClassDef._fields else {}
        body.append(ast.ClassDef(name=cls, bases=[], keywords=[], body=[found[m] for m in methods], decorator_list=[], **kwargs))
    module = types.ModuleType(f"engine_{source_id.replace('-', '_')}")
    module.__file__ = str(path)
    sys.modules[module.__name__] = module  # dataclasses and get_type_hints look the module up
    module.__dict__.update(names)
    tree = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(tree)
    # Annotations stay unevaluated (as under `from __future__ import annotations`), so that the
    # names used only in annotations need not exist; TensorSchema evaluates its own when validating.
    exec(compile(tree, str(path), "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), module.__dict__)
    return module


def pick(module: types.ModuleType, *names: str) -> dict:
    return {n: getattr(module, n) for n in names}


# Real libraries and the standard library, as the engines import them.
REAL = dict(
    torch=torch, np=np, os=os, BytesIO=BytesIO, Path=Path, dataclass=dataclass, ABC=ABC, abstractmethod=abstractmethod,
    partial=partial, accumulate=accumulate, defaultdict=defaultdict, UserDict=UserDict, Mapping=Mapping,
    Sequence=Sequence, Callable=Callable, Iterable=Iterable, Hashable=Hashable, cast=typing.cast, Any=typing.Any, Optional=typing.Optional,
    Union=typing.Union, Literal=typing.Literal, Annotated=typing.Annotated, get_args=typing.get_args,
    get_origin=typing.get_origin, get_type_hints=typing.get_type_hints, UnionType=types.UnionType,
    TypeVar=typing_extensions.TypeVar, assert_never=typing_extensions.assert_never, logger=log,
)

# Stand-ins for libraries the engines import that are not installed here (docs/downstream.md lists them).
# pybase64 is a faster base64 with the standard library's interface; vLLM calls b64decode(data, validate=True).
PYBASE64 = types.SimpleNamespace(b64decode=base64.b64decode, b64encode=base64.b64encode)
# transformers.BatchFeature is a UserDict of the processor's outputs; _merge_embeds wraps its merged dict in
# one and the field config only calls .get on it.
TRANSFORMERS = types.SimpleNamespace(BatchFeature=dict)
T_co = typing.TypeVar("T_co")


class MediaIO(typing.Generic[T_co]):
    """vllm.multimodal.media.base.MediaIO: the abstract base of the media loaders (no state of its own)."""


# torch.sparse.check_sparse_tensor_invariants (torch >= 2.0) wraps vLLM's torch.load: it checks sparse tensors
# only, and the tensors here are dense; with an older torch the check runs with a no-op in its place.
if not hasattr(torch.sparse, "check_sparse_tensor_invariants"):
    torch.sparse.check_sparse_tensor_invariants = contextlib.nullcontext  # adapted for torch < 2.0 (see above)


def safetensors_load_file(filename: str, device: str = "cpu") -> dict:
    """safetensors.torch.load_file when the safetensors package is installed; else a reader of the same
    format (8-byte little-endian header length, JSON header, little-endian data) for F32/I64 tensors."""
    try:
        import safetensors.torch  # noqa: F401

        return safetensors.torch.load_file(filename, device=device)
    except ImportError:
        pass
    raw = Path(filename).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        start, end = t["data_offsets"]
        arr = np.frombuffer(data[start:end], dtype=dtypes[t["dtype"]]).reshape(t["shape"])
        out[name] = torch.from_numpy(arr.copy()).to(device)
    return out


def load_engines(cache: Path) -> types.SimpleNamespace:
    e = types.SimpleNamespace()
    e.image_io = load("vllm-image-io", cache, REAL | dict(pybase64=PYBASE64, MediaIO=MediaIO, tensor2base64=unreached("tensor2base64")))
    e.image_io_old = load("vllm-image-io-pre-0.19", cache, REAL | dict(pybase64=PYBASE64, MediaIO=MediaIO))
    coll = load("vllm-collection-utils", cache, REAL)
    e.inputs = load("vllm-mm-inputs", cache, REAL | pick(coll, "is_list_of", "full_groupby") | dict(json_map_leaves=unreached("json_map_leaves")))
    e.chat = load(
        "vllm-chat-utils",
        cache,
        REAL
        | pick(e.inputs, "MultiModalSharedField", "MultiModalBatchedField", "MultiModalFlatField")
        | pick(coll, "is_list_of")
        | dict(transformers=TRANSFORMERS),
    )
    e.qwen2_vl = load("vllm-qwen2-vl", cache, REAL | pick(e.inputs, "MultiModalFieldConfig"))
    schema = load("vllm-tensor-schema", cache, REAL)
    e.qwen2_5_vl = load("vllm-qwen2-5-vl", cache, REAL | pick(schema, "TensorSchema", "TensorShape"))

    class ECConnectorMetadata:
        """vllm.distributed.ec_transfer.ec_connector.base.ECConnectorMetadata: an empty base class."""

    e.ec = load("vllm-ec-example-connector", cache, REAL | dict(ECConnectorMetadata=ECConnectorMetadata, safetensors=types.SimpleNamespace(torch=types.SimpleNamespace(load_file=safetensors_load_file))))
    # `from vllm.platforms import current_platform` inside start_load_caches: a CPU platform.
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(device_type="cpu", is_cuda_alike=lambda: False, current_device=unreached("current_device"))
    sys.modules.setdefault("vllm", types.ModuleType("vllm"))
    sys.modules["vllm.platforms"] = platforms

    # SGLang's enums (sglang/srt/managers/schedule_batch.py): the base processor compares members only.
    class Modality(Enum):
        IMAGE = auto()
        MULTI_IMAGES = auto()
        VIDEO = auto()
        AUDIO = auto()

    class MultimodalInputFormat(Enum):
        NORMAL = auto()
        PROCESSOR_OUTPUT = auto()
        PRECOMPUTED_EMBEDDING = auto()

    e.Modality = Modality
    e.sglang = load(
        "sglang-base-processor",
        cache,
        REAL
        | dict(
            Modality=Modality,
            MultimodalInputFormat=MultimodalInputFormat,
            load_image=unreached("load_image"),
            load_video=unreached("load_video"),
            load_audio=unreached("load_audio"),
            CLIENT_MEDIA_EXCEPTIONS=(),
        ),
    )
    return e


# --------------------------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------------------------

FAILED = []


def report(name: str, check: Callable[[], str]) -> None:
    try:
        detail = check()
        print(f"PASS {name}: {detail}")
    except Exception as err:  # noqa: BLE001 - every failure is reported, then the run goes on
        FAILED.append(name)
        print(f"FAIL {name}: {type(err).__name__}: {err}")


def expect_raises(check: Callable[[], object]) -> str:
    try:
        check()
    except Exception as err:  # noqa: BLE001
        return f"{type(err).__name__}: {str(err).splitlines()[0]}"
    raise AssertionError("did not raise")


def manifest(dir_: Path) -> list[dict]:
    lines = [json.loads(line) for line in (dir_ / "manifest.jsonl").read_text().splitlines() if line.strip()]
    images = [m for m in lines if m.get("status") in ("encoded", "skipped")]
    assert images, f"no encoded images in {dir_}/manifest.jsonl"
    return sorted(images, key=lambda m: m["input"])


def output_path(dir_: Path, m: dict) -> Path:
    return dir_ / m["output"] if not Path(m["output"]).is_absolute() else Path(m["output"])


class Qwen3VLFields:
    """What vLLM's chat merge reads of the Qwen3-VL multimodal processor: its field config
    (Qwen2VLMultiModalProcessor._get_mm_fields_config, which Qwen3-VL and Qwen3.5 use) and the model's
    sizes. spatial_merge_size 2 is the tiny fixture towers' (and every Qwen3-VL / Qwen3.5 checkpoint's)."""

    def __init__(self, e, hidden: int):
        self._get_mm_fields_config = types.MethodType(e.qwen2_vl.Qwen2VLMultiModalProcessor._get_mm_fields_config, self)
        config = types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=2))
        self.info = types.SimpleNamespace(
            get_hf_config=lambda: config,
            ctx=types.SimpleNamespace(model_config=types.SimpleNamespace(get_inputs_embeds_size=lambda: hidden)),
        )


def vllm_pipeline(e, parts: list[dict], loader) -> dict:
    """A request's image_embeds parts through vLLM: the media loader on each base64 tensor, the chat
    merge of the parts, the Qwen field config splitting the merged data into items, the items batched
    for the model, and the model's input schema. Returns the batched tensors."""
    loaded = [{k: loader.load_base64("", v) for k, v in p["image_embeds"].items()} for p in parts]
    hidden = loaded[0]["image_embeds"].shape[-1]
    proc = Qwen3VLFields(e, hidden)
    merged = e.chat._get_embeds_data("image", loaded, proc)
    config = proc._get_mm_fields_config(TRANSFORMERS.BatchFeature(merged), {})
    items = e.inputs.MultiModalKwargsItems.from_hf_inputs(TRANSFORMERS.BatchFeature(merged), config)
    batch = items.require_data().get_data()
    e.qwen2_5_vl.Qwen2_5_VLImageEmbeddingInputs(type="image_embeds", image_embeds=batch["image_embeds"], image_grid_thw=batch["image_grid_thw"])
    return {"loaded": loaded, "batch": batch, "items": items}


def check_vllm(e, out: Path, family: str) -> None:
    npy_dir, torch_dir = out / family / "vllm", out / family / "vllm-torch"
    npy_parts = [json.loads(output_path(npy_dir, m).read_text()) for m in manifest(npy_dir)]
    torch_parts = [json.loads(output_path(torch_dir, m).read_text()) for m in manifest(torch_dir)]
    new, old = e.image_io.ImageEmbeddingMediaIO(), e.image_io_old.ImageEmbeddingMediaIO()

    def loader_reads(parts, loader):
        def run():
            shapes = []
            for p in parts:
                t = {k: loader.load_base64("", v) for k, v in p["image_embeds"].items()}
                assert t["image_embeds"].dtype == torch.float32 and t["image_embeds"].ndim == 2, t["image_embeds"].shape
                assert t["image_grid_thw"].dtype == torch.int64 and tuple(t["image_grid_thw"].shape) == (3,), t["image_grid_thw"].shape
                assert t["image_embeds"].shape[0] == int(t["image_grid_thw"].prod()) // 4
                shapes.append(f"{tuple(t['image_embeds'].shape)} grid {t['image_grid_thw'].tolist()}")
            return "; ".join(shapes)

        return run

    report(f"vllm {family} .npy: ImageEmbeddingMediaIO (vLLM >= 0.19) loads each part", loader_reads(npy_parts, new))
    report(f"vllm {family} torch.save: ImageEmbeddingMediaIO (vLLM >= 0.19) loads each part", loader_reads(torch_parts, new))
    report(f"vllm {family} torch.save: ImageEmbeddingMediaIO (before 0.19) loads each part", loader_reads(torch_parts, old))
    report(f"vllm {family} .npy: ImageEmbeddingMediaIO (before 0.19) refuses it, as expected", lambda: expect_raises(lambda: old.load_base64("", npy_parts[0]["image_embeds"]["image_grid_thw"])))

    def same_values():
        for a, b in zip(npy_parts, torch_parts):
            for k in ("image_embeds", "image_grid_thw"):
                assert torch.equal(new.load_base64("", a["image_embeds"][k]), new.load_base64("", b["image_embeds"][k])), k
        return "the .npy and torch.save parts hold the same tensors, bit for bit"

    report(f"vllm {family}: both encodings agree", same_values)

    for label, parts in (("npy", npy_parts), ("torch", torch_parts)):

        def pipeline(parts=parts):
            r = vllm_pipeline(e, parts, new)
            b, loaded = r["batch"], r["loaded"]
            assert tuple(b["image_grid_thw"].shape) == (len(parts), 3), b["image_grid_thw"].shape
            assert torch.equal(b["image_embeds"], torch.cat([t["image_embeds"] for t in loaded])), "rows differ from the parts'"
            items = r["items"]["image"]
            for i, item in enumerate(items):
                assert torch.equal(item["image_embeds"].data, loaded[i]["image_embeds"]), f"item {i} rows"
            return f"{len(parts)} parts -> image_embeds {tuple(b['image_embeds'].shape)}, image_grid_thw {b['image_grid_thw'].tolist()}, Qwen2_5_VLImageEmbeddingInputs valid; each item's rows are its part's"

        report(f"vllm {family} {label}: chat merge + Qwen field config + batching + TensorSchema, pages of different sizes", pipeline)

        def same_size(parts=parts):
            r = vllm_pipeline(e, [parts[0], parts[0]], new)
            return f"2 equal parts -> image_embeds {tuple(r['batch']['image_embeds'].shape)}, image_grid_thw {tuple(r['batch']['image_grid_thw'].shape)}, valid"

        report(f"vllm {family} {label}: the same with two parts of one shape (vLLM's own test case)", same_size)

    def old_grid_layout():
        # tessera before this change wrote image_grid_thw as [1, 3] per part.
        def as_1x3(p):
            g = new.load_base64("", p["image_embeds"]["image_grid_thw"]).reshape(1, 3).numpy()
            buf = BytesIO()
            np.save(buf, g)
            return {"type": "image_embeds", "image_embeds": {**p["image_embeds"], "image_grid_thw": base64.b64encode(buf.getvalue()).decode()}}

        logging.disable(logging.CRITICAL)  # _merge_embeds logs the field-config failure it falls back from
        try:
            return expect_raises(lambda: vllm_pipeline(e, [as_1x3(p) for p in npy_parts], new))
        finally:
            logging.disable(logging.NOTSET)

    report(f"vllm {family}: a [1, 3] grid per part (tessera's earlier layout) fails, as expected", old_grid_layout)


def check_encoder_cache(e, out: Path, family: str) -> None:
    dir_ = out / family / "vllm-encoder-cache"
    records = [json.loads(output_path(dir_, m).read_text())["record"] for m in manifest(dir_)]
    npy_parts = {Path(m["input"]).name: json.loads(output_path(out / family / "vllm", m).read_text()) for m in manifest(out / family / "vllm")}
    new = e.image_io.ImageEmbeddingMediaIO()

    class Connector(e.ec.ECExampleConnector):
        def __init__(self, storage, identifiers):
            self._storage_path = str(storage)
            meta = e.ec.ECExampleConnectorMetadata()
            for i in identifiers:
                meta.add_mm_data(e.ec.MMMeta.make_meta(i, 0))
            self._meta = meta

        def _get_connector_metadata(self):
            return self._meta

    def run():
        ids = [r["identifier"] for r in records]
        c = Connector(dir_, ids)
        assert all(c.has_cache_item(i) for i in ids), "has_cache_item"
        cache = {}
        c.start_load_caches(cache)
        shapes = []
        for r in records:
            t = cache[r["identifier"]]
            ref = new.load_base64("", npy_parts[Path(r["input"]).name]["image_embeds"]["image_embeds"])
            assert torch.equal(t, ref), f"{r['input']}: ec_cache differs from the vllm part's rows"
            shapes.append(f"{r['identifier'][:12]}… {tuple(t.shape)}")
        return "ECExampleConnector finds and loads each image by its SHA-256: " + "; ".join(shapes) + " (equal to the image_embeds rows)"

    report(f"vllm-encoder-cache {family}: the connector's own lookup and load", run)


def check_sglang(e, out: Path, family: str) -> None:
    dir_ = out / family / "sglang"
    texts = [output_path(dir_, m).read_text() for m in manifest(dir_)]
    P, M = e.sglang.BaseMultimodalProcessor, e.Modality

    def http_item():
        # The /generate body as the HTTP server parses it: plain JSON, so `feature` is a list of lists.
        request = json.loads('{"text": "<|vision_start|><|image_pad|><|vision_end|>Read.", "image_data": [' + texts[0] + "]}")
        P.validate_mm_data(image_data=request["image_data"])
        item = request["image_data"][0]
        assert P._all_mm_data_is_preprocessed(request["image_data"])
        loaded = P._load_single_item(item, M.IMAGE)
        assert loaded is item
        is_pre, images, _, _ = P._process_loaded_mm_data(P(), M.IMAGE, item, loaded)
        assert is_pre and images == [item]
        rows = torch.tensor(item["feature"], dtype=torch.float32)
        return f"accepted as precomputed_embedding; the loader hands on the item unchanged, its feature a {type(loaded['feature']).__name__} of {len(loaded['feature'])} rows (torch.tensor of it: {tuple(rows.shape)} float32)"

    report(f"sglang {family}: one page's item through the base processor's precomputed path", http_item)

    def two_items():
        return expect_raises(lambda: P.validate_mm_data(image_data=[json.loads(t) for t in texts]))

    report(f"sglang {family}: two precomputed items in one request are refused, as expected", two_items)

    def combined():
        item = json.loads((out / family / "sglang-two-pages.json").read_text())
        P.validate_mm_data(image_data=[item])
        pages = [json.loads(t) for t in texts]
        assert item["feature"] == [row for p in pages for row in p["feature"]], "rows are not the pages' rows in order"
        if "image_grid_thw" in pages[0]:
            assert item["image_grid_thw"] == [g for p in pages for g in p["image_grid_thw"]], "grids"
            for p in pages:
                (t, h, w), = p["image_grid_thw"]
                assert len(p["feature"]) == t * h * w // 4, "rows vs grid"
        return f"one item, {len(item['feature'])} rows, image_grid_thw {item.get('image_grid_thw', '(none)')}: accepted"

    report(f"sglang {family}: a two-page request as one combined item", combined)

    def exact_f32():
        text = texts[0]
        rows = torch.tensor(json.loads(text)["feature"], dtype=torch.float32)
        values = rows.numel()
        detail = f"{len(text.encode()) / values:.2f} bytes per value in the file"
        vllm_dir = out / family / "vllm"
        if vllm_dir.exists():
            part = json.loads(output_path(vllm_dir, manifest(vllm_dir)[0]).read_text())
            ref = e.image_io.ImageEmbeddingMediaIO().load_base64("", part["image_embeds"]["image_embeds"])
            assert torch.equal(rows, ref), "JSON values differ from the binary f32 rows"
            detail += "; read as float32 they equal the .npy rows bit for bit"
        return detail

    report(f"sglang {family}: JSON numbers read back to the same float32", exact_f32)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--outputs", type=Path, required=True)
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="  engine log: %(message)s")
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}, numpy {np.__version__}")
    for s in SOURCES.values():
        print(f"source {s['repo']}@{s['commit']} {s['path']}")
    e = load_engines(args.cache)
    try:
        import safetensors.torch  # noqa: F401

        reader = "safetensors.torch.load_file (installed)"
    except ImportError:
        reader = "safetensors.torch.load_file -> this script's reader (safetensors not installed)"
    sparse = "torch.sparse.check_sparse_tensor_invariants -> no-op (torch < 2.0)" if torch.sparse.check_sparse_tensor_invariants is contextlib.nullcontext else "torch.sparse.check_sparse_tensor_invariants (real)"
    print(
        "stand-ins: pybase64 -> base64; transformers.BatchFeature -> dict; MediaIO, ECConnectorMetadata -> empty bases; "
        f"vllm.platforms.current_platform -> CPU; SGLang Modality, MultimodalInputFormat -> enums of the same members; {reader}; {sparse}"
    )
    for family in ("qwen3_vl", "qwen3_5"):
        check_vllm(e, args.outputs, family)
        check_encoder_cache(e, args.outputs, family)
    for family in ("qwen3_vl", "qwen3_5", "gemma4"):
        check_sglang(e, args.outputs, family)
    print(f"{len(FAILED)} failed" if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
