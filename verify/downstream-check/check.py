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

    "Class.method" entries build a class that has only the listed methods, so that a check can call
    them without constructing the engine's whole object; its bases are none, or those sources.json
    names under "bases" (taken from `names`) where a method calls super().
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
        bases = [ast.Name(id=b, ctx=ast.Load()) for b in src.get("bases", {}).get(cls, [])]
        body.append(ast.ClassDef(name=cls, bases=bases, keywords=[], body=[found[m] for m in methods], decorator_list=[], **kwargs))
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


@dataclass
class PromptReplacement:
    """vllm.multimodal.processing.PromptReplacement: the record of a prompt update (what to replace, and a
    callable giving each item's replacement tokens). The check calls the replacement; applying it to a
    tokenized prompt is the engine's generic code, not run here."""

    modality: str
    target: object
    replacement: object


# torch.sparse.check_sparse_tensor_invariants (torch >= 2.0) wraps vLLM's torch.load: it checks sparse tensors
# only, and the tensors here are dense; with an older torch the check runs with a no-op in its place.
if not hasattr(torch.sparse, "check_sparse_tensor_invariants"):
    torch.sparse.check_sparse_tensor_invariants = contextlib.nullcontext  # adapted for torch < 2.0 (see above)


def safetensors_load_file(filename: str, device: str = "cpu") -> dict:
    """safetensors.torch.load_file when the safetensors package is installed; else a reader of the same
    format (8-byte little-endian header length, JSON header, little-endian data) for F32, BF16, F16 and
    I64 tensors."""
    try:
        import safetensors.torch  # noqa: F401

        return safetensors.torch.load_file(filename, device=device)
    except ImportError:
        pass
    raw = Path(filename).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    data = raw[8 + n :]
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64}
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        start, end = t["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[start:end]), dtype=dtypes[t["dtype"]]).reshape(t["shape"]).to(device)
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
    schema = load("vllm-tensor-schema", cache, REAL)
    qwen_names = (
        REAL
        | pick(e.inputs, "MultiModalFieldConfig")
        | pick(schema, "TensorSchema", "TensorShape")
        | dict(PromptReplacement=PromptReplacement, run_dp_sharded_mrope_vision_model=unreached("run_dp_sharded_mrope_vision_model"))
    )
    e.qwen2_vl = load("vllm-qwen2-vl", cache, qwen_names | dict(Qwen2VLImagePixelInputs=unreached("Qwen2VLImagePixelInputs")))
    e.qwen2_5_vl = load(
        "vllm-qwen2-5-vl",
        cache,
        qwen_names
        | pick(e.qwen2_vl, "Qwen2VLMultiModalProcessor")
        | dict(
            Qwen2_5_VLImagePixelInputs=unreached("Qwen2_5_VLImagePixelInputs"),
            compute_retained_tokens_count=unreached("compute_retained_tokens_count"),
            set_forward_context=unreached("set_forward_context"),
        ),
    )

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


ROOT = HERE.parent.parent
FIXTURES = ROOT / "test" / "fixtures"
NARROW = {"bf16": torch.bfloat16, "f16": torch.float16}


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same dtype, shape and bits (stricter than torch.equal: -0.0 is not 0.0)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    as_int = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    return torch.equal(a.contiguous().view(as_int), b.contiguous().view(as_int))


class VllmQwen:
    """What vLLM runs of one Qwen family for image embeddings (sources.json): its multimodal processor
    (field config, prompt updates), its image-embedding schema and, for Qwen2-VL and Qwen2.5-VL, the
    model's own input parsing and per-image split. Qwen3-VL and Qwen3.5 take their field config from
    Qwen2VLMultiModalProcessor and their schema is Qwen2_5_VLImageEmbeddingInputs; their model classes
    are not executed. Sizes and token ids come from the fixture tower's config.json and
    preprocessor_config.json (test/fixtures/<family>-tiny/model); what else the processor and the model
    read of their context (self.info, self.visual) is set here from those values, nothing more."""

    def __init__(self, e, family: str):
        model_dir = FIXTURES / f"{family}-tiny" / "model"
        self.config = json.loads((model_dir / "config.json").read_text())
        self.merge_size = self.config["vision_config"]["spatial_merge_size"]
        self.image_merge_size = json.loads((model_dir / "preprocessor_config.json").read_text()).get("merge_size", self.merge_size)
        self.text_hidden = self.config["text_config"]["hidden_size"]
        if family == "qwen2_vl":
            self.processor_cls, self.schema, self.model_cls = e.qwen2_vl.Qwen2VLMultiModalProcessor, e.qwen2_vl.Qwen2VLImageEmbeddingInputs, e.qwen2_vl.Qwen2VLForConditionalGeneration
        elif family == "qwen2_5_vl":
            self.processor_cls, self.schema, self.model_cls = e.qwen2_5_vl.Qwen2_5_VLMultiModalProcessor, e.qwen2_5_vl.Qwen2_5_VLImageEmbeddingInputs, e.qwen2_5_vl.Qwen2_5_VLForConditionalGeneration
        else:
            self.processor_cls, self.schema, self.model_cls = e.qwen2_vl.Qwen2VLMultiModalProcessor, e.qwen2_5_vl.Qwen2_5_VLImageEmbeddingInputs, None

    def processor(self, embeds_size: int):
        proc = self.processor_cls()
        hf_config = types.SimpleNamespace(vision_config=types.SimpleNamespace(spatial_merge_size=self.merge_size))
        vocab = {"<|image_pad|>": self.config["image_token_id"], "<|video_pad|>": self.config["video_token_id"]}
        proc.info = types.SimpleNamespace(
            get_hf_config=lambda: hf_config,
            get_hf_processor=lambda **_: types.SimpleNamespace(image_token="<|image_pad|>", video_token="<|video_pad|>"),
            get_image_processor=lambda **_: types.SimpleNamespace(merge_size=self.image_merge_size),
            get_tokenizer=lambda: types.SimpleNamespace(get_vocab=lambda: vocab),
            ctx=types.SimpleNamespace(
                model_config=types.SimpleNamespace(get_inputs_embeds_size=lambda: embeds_size),
                get_mm_config=lambda: types.SimpleNamespace(video_pruning_rate=None),
            ),
        )
        return proc

    def model(self, dtype: torch.dtype):
        """The model object as its image-input methods see it: `visual` (the tower) only lends its merge
        size and its dtype (the checkpoint's, e.g. bf16)."""
        m = self.model_cls()
        m.visual = types.SimpleNamespace(spatial_merge_size=self.merge_size, dtype=dtype)
        m.use_data_parallel = False
        return m

    def hf_config(self):
        vision = types.SimpleNamespace(spatial_merge_size=self.merge_size)
        if "tokens_per_second" in self.config["vision_config"]:
            vision.tokens_per_second = self.config["vision_config"]["tokens_per_second"]
        c = self.config
        return types.SimpleNamespace(image_token_id=c["image_token_id"], video_token_id=c["video_token_id"], vision_start_token_id=c["vision_start_token_id"], vision_config=vision)


def vllm_pipeline(e, parts: list[dict], loader, vq: VllmQwen, model_dtype: torch.dtype = torch.float32) -> dict:
    """A request's image_embeds parts through vLLM: the media loader on each base64 tensor, the chat
    merge of the parts, the family's field config splitting the merged data into items, the items
    batched for the model, and the model's input schema; for the Qwen2 families then the model's
    _parse_and_validate_image_input and _process_image_input (the rows each image's placeholders get)
    and the processor's prompt updates. Returns the tensors at each step."""
    loaded = [{k: loader.load_base64("", v) for k, v in p["image_embeds"].items()} for p in parts]
    proc = vq.processor(vq.text_hidden if vq.model_cls else loaded[0]["image_embeds"].shape[-1])
    merged = e.chat._get_embeds_data("image", loaded, proc)
    config = proc._get_mm_fields_config(TRANSFORMERS.BatchFeature(merged), {})
    items = e.inputs.MultiModalKwargsItems.from_hf_inputs(TRANSFORMERS.BatchFeature(merged), config)
    batch = items.require_data().get_data()
    vq.schema(type="image_embeds", image_embeds=batch["image_embeds"], image_grid_thw=batch["image_grid_thw"])
    r = {"loaded": loaded, "batch": batch, "items": items}
    if vq.model_cls is not None:
        model = vq.model(model_dtype)
        r["per_image"] = model._process_image_input(model._parse_and_validate_image_input(**batch))
        r["prompt_updates"] = proc._get_prompt_updates(None, {}, items)
        r["model"] = model
    return r


def check_vllm(e, out: Path, family: str) -> None:
    npy_dir, torch_dir = out / family / "vllm", out / family / "vllm-torch"
    npy_parts = [json.loads(output_path(npy_dir, m).read_text()) for m in manifest(npy_dir)]
    torch_parts = [json.loads(output_path(torch_dir, m).read_text()) for m in manifest(torch_dir)]
    new, old = e.image_io.ImageEmbeddingMediaIO(), e.image_io_old.ImageEmbeddingMediaIO()
    vq = VllmQwen(e, family)
    schema = vq.schema.__name__

    def loader_reads(parts, loader):
        def run():
            shapes = []
            for p in parts:
                t = {k: loader.load_base64("", v) for k, v in p["image_embeds"].items()}
                assert t["image_embeds"].dtype == torch.float32 and t["image_embeds"].ndim == 2, t["image_embeds"].shape
                assert t["image_grid_thw"].dtype == torch.int64 and tuple(t["image_grid_thw"].shape) == (3,), t["image_grid_thw"].shape
                assert t["image_embeds"].shape[0] == int(t["image_grid_thw"].prod()) // vq.merge_size**2
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
            r = vllm_pipeline(e, parts, new, vq)
            b, loaded = r["batch"], r["loaded"]
            assert tuple(b["image_grid_thw"].shape) == (len(parts), 3), b["image_grid_thw"].shape
            assert torch.equal(b["image_embeds"], torch.cat([t["image_embeds"] for t in loaded])), "rows differ from the parts'"
            items = r["items"]["image"]
            for i, item in enumerate(items):
                assert torch.equal(item["image_embeds"].data, loaded[i]["image_embeds"]), f"item {i} rows"
            return f"{len(parts)} parts -> image_embeds {tuple(b['image_embeds'].shape)}, image_grid_thw {b['image_grid_thw'].tolist()}, {schema} valid; each item's rows are its part's"

        report(f"vllm {family} {label}: chat merge + {vq.processor_cls.__name__} field config + batching + {schema}, pages of different sizes", pipeline)

        def same_size(parts=parts):
            r = vllm_pipeline(e, [parts[0], parts[0]], new, vq)
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
            return expect_raises(lambda: vllm_pipeline(e, [as_1x3(p) for p in npy_parts], new, vq))
        finally:
            logging.disable(logging.NOTSET)

    report(f"vllm {family}: a [1, 3] grid per part (tessera's earlier layout) fails, as expected", old_grid_layout)


def check_encoder_cache(e, out: Path, family: str, dtype_name: str = "f32") -> None:
    """vLLM's encoder-cache connector on tessera's folder; with a narrower output dtype, the tensor it
    loads must be torch's .to(dtype) of the f32 rows, bit for bit."""
    dir_ = out / family / "vllm-encoder-cache" if dtype_name == "f32" else out / family / dtype_name / "vllm-encoder-cache"
    dtype = NARROW.get(dtype_name, torch.float32)
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
            assert bits_equal(t, ref.to(dtype)), f"{r['input']}: ec_cache differs from the vllm part's rows"
            shapes.append(f"{r['identifier'][:12]}… {tuple(t.shape)} {str(t.dtype).replace('torch.', '')}")
        same = "equal to the image_embeds rows" if dtype_name == "f32" else f"bit for bit torch's .to({str(dtype).replace('torch.', '')}) of the f32 image_embeds rows"
        return "ECExampleConnector finds and loads each image by its SHA-256: " + "; ".join(shapes) + f" ({same})"

    label = "" if dtype_name == "f32" else f" {dtype_name}"
    report(f"vllm-encoder-cache {family}{label}: the connector's own lookup and load", run)


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


def check_vllm_model(e, out: Path, family: str) -> None:
    """Qwen2-VL and Qwen2.5-VL: what the model's own code does with the batched image_embeds."""
    vq = VllmQwen(e, family)
    new = e.image_io.ImageEmbeddingMediaIO()
    dir_ = out / family / "vllm"
    ms = manifest(dir_)
    parts = [json.loads(output_path(dir_, m).read_text()) for m in ms]
    names = [Path(m["input"]).name for m in ms]
    cls = vq.model_cls.__name__

    def split():
        r = vllm_pipeline(e, parts, new, vq)
        per = r["per_image"]
        assert len(per) == len(parts), f"{len(per)} images from {len(parts)} parts"
        for i, rows in enumerate(per):
            assert bits_equal(rows, r["loaded"][i]["image_embeds"]), f"image {i}: rows differ from its part's"
        width = per[0].shape[-1]
        assert width == vq.text_hidden, f"rows of {width} values, the language model's hidden_size is {vq.text_hidden}"
        return f"{len(parts)} parts -> {[tuple(t.shape) for t in per]}, each image's rows exactly its part's, {width} values a row = the language model's hidden_size"

    report(f"vllm {family}: the batch through {cls}._parse_and_validate_image_input and _process_image_input", split)

    def hf_reference():
        r = vllm_pipeline(e, parts, new, vq)
        cases = {c["image"]: c for c in json.loads((FIXTURES / f"{family}-tiny" / "cases.json").read_text())["cases"]}
        details = []
        for name, rows, grid in zip(names, r["per_image"], r["batch"]["image_grid_thw"]):
            case = cases[name]
            ref = safetensors_load_file(str(FIXTURES / f"{family}-tiny" / "expected" / f"{case['name']}.safetensors"))
            assert grid.tolist() == ref["image_grid_thw"].reshape(-1).tolist() == case["grid_thw"], f"{name}: grid {grid.tolist()} vs HF's {case['grid_thw']}"
            assert rows.shape == ref["merged"].shape, f"{name}: {tuple(rows.shape)} vs HF's {tuple(ref['merged'].shape)}"
            diff = (rows - ref["merged"]).abs().max().item()
            assert diff <= 1e-4, f"{name}: max |diff| {diff} from HF's merger output"
            details.append(f"{name} grid {grid.tolist()} {tuple(rows.shape)} max |diff| {diff:.1e}")
        return "; ".join(details)

    report(f"vllm {family}: each image's rows as {cls} splits them are HF transformers' merger output for that image (within 1e-4, test/fixtures/{family}-tiny/expected)", hf_reference)

    def placeholders():
        r = vllm_pipeline(e, parts, new, vq)
        update = next(u for u in r["prompt_updates"] if u.modality == "image")
        counts = []
        for i, rows in enumerate(r["per_image"]):
            tokens = update.replacement(i)
            assert tokens == [vq.config["image_token_id"]] * rows.shape[0], f"image {i}: {len(tokens)} placeholders for {rows.shape[0]} rows"
            counts.append(len(tokens))
        return f"each <|image_pad|> becomes {counts} placeholder tokens: one per row of its image"

    report(f"vllm {family}: {vq.processor_cls.__name__}._get_prompt_updates gives each image as many placeholders as rows", placeholders)

    def mrope():
        r = vllm_pipeline(e, parts, new, vq)
        update = next(u for u in r["prompt_updates"] if u.modality == "image")
        c = vq.config
        tokens, spans = [1], []
        for i in range(len(parts)):
            tokens.append(c["vision_start_token_id"])
            start = len(tokens)
            tokens += update.replacement(i)
            spans.append((start, len(tokens)))
            tokens += [c["vision_end_token_id"], 2]
        grids = r["batch"]["image_grid_thw"].tolist()
        pos, _ = r["model"].get_mrope_input_positions(tokens, vq.hf_config(), image_grid_thw=grids, video_grid_thw=[], second_per_grid_ts=[])
        assert tuple(pos.shape) == (3, len(tokens)), tuple(pos.shape)
        for (a, b), (t, h, w) in zip(spans, grids):
            cols = w // vq.merge_size
            row = torch.arange(b - a)
            assert torch.equal(pos[1, a:b] - pos[1, a], row // cols) and torch.equal(pos[2, a:b] - pos[2, a], row % cols), "rows not in raster order"
            assert (pos[:, b] == pos[:, a:b].max() + 1).all(), "the text after the image does not resume after its rows"
        return "row r of an image with merged grid (h', w') sits at (r div w', r mod w'), the merger's raster order; the text resumes after the last row"

    report(f"vllm {family}: {cls}.get_mrope_input_positions places the rows on the image's merged grid", mrope)


def check_out_dtypes(e, out: Path, family: str) -> None:
    """--out-dtype bf16 and f16: each engine reads the narrowed files and gets exactly the f32 rows
    rounded as torch's .to(dtype) rounds them (round to nearest, ties to even)."""
    new, old = e.image_io.ImageEmbeddingMediaIO(), e.image_io_old.ImageEmbeddingMediaIO()
    has_vllm = (out / family / "vllm").exists()
    vq = VllmQwen(e, family) if has_vllm else None
    if has_vllm:
        ref_dir = out / family / "vllm"
        ref_parts = {Path(m["input"]).name: json.loads(output_path(ref_dir, m).read_text()) for m in manifest(ref_dir)}
        ref_rows = {k: new.load_base64("", p["image_embeds"]["image_embeds"]) for k, p in ref_parts.items()}
    sg_dir = out / family / "sglang"
    sg_ref = {Path(m["input"]).name: torch.tensor(json.loads(output_path(sg_dir, m).read_text())["feature"], dtype=torch.float32) for m in manifest(sg_dir)}

    for dtype_name, dtype in NARROW.items():
        tname = str(dtype).replace("torch.", "")
        base = out / family / dtype_name
        if has_vllm:
            for fmt, loaders in (("vllm", (("vLLM >= 0.19", new),)), ("vllm-torch", (("vLLM >= 0.19", new), ("before 0.19", old)))):
                d = base / fmt
                if not d.exists():
                    continue  # bf16 in .npy: numpy has no bfloat16, tessera refuses that pair
                ms = manifest(d)
                parts = [json.loads(output_path(d, m).read_text()) for m in ms]
                names = [Path(m["input"]).name for m in ms]
                for label, loader in loaders:

                    def reads(parts=parts, names=names, loader=loader):
                        shapes = []
                        for p, name in zip(parts, names):
                            t = loader.load_base64("", p["image_embeds"]["image_embeds"])
                            assert bits_equal(t, ref_rows[name].to(dtype)), f"{name}: {t.dtype} {tuple(t.shape)} is not .to({tname}) of the f32 rows"
                            g = loader.load_base64("", p["image_embeds"]["image_grid_thw"])
                            assert g.dtype == torch.int64 and tuple(g.shape) == (3,), g
                            shapes.append(str(tuple(t.shape)))
                        return f"{tname} {', '.join(shapes)}: bit for bit torch's .to({tname}) of the f32 rows"

                    report(f"vllm {family} {dtype_name} {fmt}: ImageEmbeddingMediaIO ({label}) reads each part", reads)

                def pipeline(parts=parts, names=names):
                    r = vllm_pipeline(e, parts, new, vq, model_dtype=dtype)
                    assert r["batch"]["image_embeds"].dtype == dtype, r["batch"]["image_embeds"].dtype
                    detail = f"image_embeds {tuple(r['batch']['image_embeds'].shape)} {tname}, {vq.schema.__name__} valid"
                    if vq.model_cls is not None:
                        # The same request with the f32 files, to a model whose checkpoint dtype is `dtype`.
                        f32 = vllm_pipeline(e, [ref_parts[n] for n in names], new, vq, model_dtype=dtype)
                        for i, (a, b) in enumerate(zip(r["per_image"], f32["per_image"])):
                            assert bits_equal(a, r["loaded"][i]["image_embeds"]), f"image {i}: the model changed the {tname} rows"
                            if b.dtype == dtype:
                                assert bits_equal(a, b), f"image {i}: the model's own cast of the f32 rows differs from the {tname} file"
                        if f32["per_image"][0].dtype == dtype:
                            detail += f"; {vq.model_cls.__name__} casts f32 rows to the checkpoint's {tname} itself, and gets exactly this file's rows"
                        else:
                            detail += f"; {vq.model_cls.__name__} hands the {tname} rows on unchanged (the language model casts to its dtype later)"
                    return detail

                report(f"vllm {family} {dtype_name} {fmt}: chat merge + field config + batching + schema" + (" + the model's image input" if vq.model_cls else ""), pipeline)
            check_encoder_cache(e, out, family, dtype_name)

        def sglang(base=base, dtype=dtype, tname=tname, dtype_name=dtype_name):
            d = base / "sglang"
            P, M = e.sglang.BaseMultimodalProcessor, e.Modality
            details = []
            for m in manifest(d):
                text = output_path(d, m).read_text()
                item = json.loads(text)
                P.validate_mm_data(image_data=[item])
                assert P._load_single_item(item, M.IMAGE) is item
                rows = torch.tensor(item["feature"], dtype=torch.float32)
                ref = sg_ref[Path(m["input"]).name]
                assert bits_equal(rows, ref.to(dtype).to(torch.float32)), "the JSON values are not the f32 rows rounded to " + tname
                assert bits_equal(rows.to(dtype), ref.to(dtype)), f"cast to {tname} they differ from torch's .to({tname}) of the f32 rows"
                details.append(f"{tuple(rows.shape)}, {len(text.encode()) / rows.numel():.2f} bytes a value")
            return f"accepted as precomputed_embedding; read as float32 the values are exactly .to({tname}) of the f32 rows, and cast to {tname} they are its bits: " + "; ".join(details)

        report(f"sglang {family} {dtype_name}: the base processor's precomputed path, values exact", sglang)


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
        f"vllm.platforms.current_platform -> CPU; vllm.multimodal.processing.PromptReplacement -> a dataclass of its three fields; "
        f"SGLang Modality, MultimodalInputFormat -> enums of the same members; {reader}; {sparse}"
    )
    vllm_families = ("qwen3_vl", "qwen3_5", "qwen2_vl", "qwen2_5_vl")
    for family in vllm_families:
        check_vllm(e, args.outputs, family)
        if family in ("qwen2_vl", "qwen2_5_vl"):
            check_vllm_model(e, args.outputs, family)
        check_encoder_cache(e, args.outputs, family)
    for family in vllm_families + ("gemma4",):
        check_sglang(e, args.outputs, family)
    for family in vllm_families + ("gemma4",):
        check_out_dtypes(e, args.outputs, family)
    print(f"{len(FAILED)} failed" if FAILED else "all checks passed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
