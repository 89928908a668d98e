"""Do comfy-kitchen's own layouts load `mixq shard`'s per-rank checkpoints?

    python conformance/shard_check.py SOURCE.safetensors DIR

DIR is what `mixq shard SOURCE --tp N -o DIR` wrote. Every rank file is read
with safetensors.torch (as ComfyUI reads checkpoints); every layer whose
format comfy-kitchen has a weight layout for (nvfp4, int8_tensorwise,
float8_e4m3fn / e5m2, mxfp8) becomes a comfy-kitchen QuantizedTensor built
from the rank's tensors and its comfy_quant marker, and is dequantized by
comfy-kitchen. The ranks' weights, put back in place as mixq-shard.json says
(column: rows of every fused part; row: K bands), must equal comfy-kitchen's
dequantization of the source layer bit for bit, and every rank's markers must
equal the source's. Needs torch, comfy-kitchen and safetensors (not mixq).
Exit status 1 on any difference.
"""
from __future__ import annotations

import json
import pathlib
import sys

import torch
from comfy_kitchen.tensor import QuantizedTensor
from comfy_kitchen.tensor.base import get_layout_class
from safetensors import safe_open
from safetensors.torch import load_file

LAYOUTS = {"nvfp4": "TensorCoreNVFP4Layout", "int8_tensorwise": "TensorWiseINT8Layout",
           "float8_e4m3fn": "TensorCoreFP8Layout", "float8_e5m2": "TensorCoreFP8Layout",
           "mxfp8": "TensorCoreMXFP8Layout"}


def markers(path: pathlib.Path, tensors: dict[str, torch.Tensor]) -> dict[str, dict]:
    """Tensor markers and header markers (_quantization_metadata), by prefix."""
    found = {name[: -len(".comfy_quant")]: json.loads(bytes(t.tolist()).decode())
             for name, t in tensors.items() if name.endswith(".comfy_quant")}
    with safe_open(str(path), "pt") as f:
        meta = (f.metadata() or {}).get("_quantization_metadata")
    if meta:
        found.update(json.loads(meta)["layers"])
    return found


def dequantize(tensors: dict[str, torch.Tensor], prefix: str, marker: dict, n: int, k: int) -> torch.Tensor:
    fmt = marker["format"]
    t = lambda role: tensors[f"{prefix}.{role}"]
    layout = get_layout_class(LAYOUTS[fmt])
    base = dict(orig_dtype=torch.float32, orig_shape=(n, k))
    if fmt == "nvfp4":
        params = layout.Params(scale=t("weight_scale_2").reshape(()), block_scale=t("weight_scale").view(torch.float8_e4m3fn),
                               **base)
    elif fmt == "int8_tensorwise":
        params = layout.Params(scale=t("weight_scale"), convrot=marker.get("convrot", False),
                               convrot_groupsize=marker.get("convrot_groupsize", 256), **base)
    elif fmt == "mxfp8":
        params = layout.Params(scale=t("weight_scale").view(torch.float8_e8m0fnu), **base)
    else:
        params = layout.Params(scale=t("weight_scale").reshape(()), **base)
    return QuantizedTensor(t("weight"), LAYOUTS[fmt], params).dequantize().float()


def main() -> int:
    source_path, folder = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    index = json.loads((folder / "mixq-shard.json").read_text())
    source = load_file(str(source_path))
    source_markers = markers(source_path, source)
    ranks = [(folder / r["file"], load_file(str(folder / r["file"]))) for r in index["ranks"]]
    d, failures, checked = index["degree"], 0, 0
    for path, tensors in ranks:
        if markers(path, tensors) != source_markers:
            print(f"{path.name}: markers differ from the source's")
            failures += 1
    for layer in index["layers"]:
        prefix, fmt = layer["prefix"], layer["format"]
        if fmt not in LAYOUTS:
            continue
        marker = source_markers[prefix]
        whole = dequantize(source, prefix, marker, layer["out_features"], layer["in_features"])
        parts = [dequantize(t, prefix, marker, layer["rank_out_features"], layer["rank_in_features"]) for _, t in ranks]
        if layer["parallel"] == "row":
            joined = torch.cat(parts, dim=1)
        elif layer["parallel"] == "column":
            p = layer["parts"]
            joined = torch.cat([chunk for part in range(p) for chunk in
                                (s.chunk(p, dim=0)[part] for s in parts)], dim=0)
        else:
            joined = parts[0]
        same = torch.equal(joined, whole)
        checked += 1
        failures += not same
        print(f"{prefix:40s} {fmt:16s} {layer['parallel']:10s} x{d}: "
              f"{'bit-identical' if same else 'DIFFERENT, max ' + str(float((joined - whole).abs().max()))}")
    print(f"{checked} layers checked with comfy-kitchen over {d} ranks, {failures} failed")
    return 1 if failures or not checked else 0


if __name__ == "__main__":
    sys.exit(main())
