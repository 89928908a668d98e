#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: `make_corpus.py OUT [MIXQ]`
fills OUT/checkpoint (fuzz_checkpoint), OUT/marker (fuzz_marker), OUT/npy
(fuzz_npy), OUT/quantize (fuzz_quantize: float sources) and, given the path
of a `mixq` binary, OUT/layers (fuzz_layers).
`make fuzz` runs it into build/asan/fuzz-seeds; nothing is committed.

Checkpoints: valid float and quantized layers in both marker dialects, nested
params, legacy scaled_fp8, SGLang's global MXFP8 (header quant_format), and
the hostile inputs of issue 15 (nesting bombs, duplicate keys, NUL and
control characters in names, gaps between tensors, trailing bytes), plus a
few invalid images (one rule broken each). Markers: one byte for the dialect
(even: tensor, odd: header) then the marker text. .npy: valid v1/v2 files and
one broken rule each. Layers: one checkpoint per format that quantizes,
written by `mixq quantize` from a small float source (shapes that reach the
kernels' in-place and panel paths, and a row count that is not a multiple of
16), and an SVDQuant layer built here (it has no quantizer). Standard library
only.
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "F8_E4M3": 1, "F8_E5M2": 1,
         "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
         "F8_E8M0": 1}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def image(tensors, metadata=None, trailing=b""):
    """tensors: list of (name, dtype, shape, bytes or None for a pattern)."""
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        size = numel(shape) * SIZES[dtype]
        if raw is None:
            raw = bytes((i * 37 + 11) & 0x7F for i in range(size))
        assert len(raw) == size, name
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + size]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data + trailing


def raw_image(header_text, data=b"", length=None):
    text = header_text.encode()
    return struct.pack("<Q", len(text) if length is None else length) + text + data


def marker(prefix, obj):
    raw = json.dumps(obj).encode()
    return (prefix + ".comfy_quant", "U8", [len(raw)], raw)


F32_ONE = struct.pack("<f", 1.0)
F32_HALF = struct.pack("<f", 0.5)


def layers_quantized():
    return [
        ("blocks.0.attn.qkv_proj.weight", "U8", [16, 8], None),
        ("blocks.0.attn.qkv_proj.weight_scale", "F8_E4M3", [128, 4], None),
        ("blocks.0.attn.qkv_proj.weight_scale_2", "F32", [], F32_HALF),
        ("blocks.0.attn.qkv_proj.bias", "F32", [16], None),
        ("blocks.0.mlp.fc1.weight", "I8", [8, 16], None),
        ("blocks.0.mlp.fc1.weight_scale", "F32", [], F32_HALF),
        ("blocks.1.mlp.fc2.weight", "F8_E4M3", [8, 16], None),
        ("blocks.1.mlp.fc2.weight_scale", "F32", [], F32_HALF),
        ("blocks.1.mlp.fc2.input_scale", "F32", [1], F32_ONE),
        ("blocks.0.norm1.weight", "F32", [16], None),
    ]


MARKERS = {
    "blocks.0.attn.qkv_proj": {"format": "nvfp4"},
    "blocks.0.mlp.fc1": {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 16},
    "blocks.1.mlp.fc2": {"format": "float8_e4m3fn"},
}


def checkpoint_seeds():
    deep = "[" * 200 + "]" * 200
    return {
        "valid_float": image([
            ("blocks.0.attn.qkv_proj.weight", "BF16", [8, 16], None),
            ("blocks.0.attn.qkv_proj.bias", "BF16", [8], None),
            ("blocks.0.norm.weight", "F32", [16], None),
        ], {"format": "pt"}),
        "markers_tensor": image(layers_quantized() + [marker(p, m) for p, m in MARKERS.items()]),
        "markers_header": image(layers_quantized(), {"_quantization_metadata": json.dumps(
            {"format_version": "1.0", "layers": {
                "blocks.0.attn.qkv_proj": {"format": "nvfp4"},
                "blocks.0.mlp.fc1": {"format": "int8_tensorwise", "params": {"convrot": True, "convrot_groupsize": 16}},
                "blocks.1.mlp.fc2": {"format": "float8_e4m3fn", "full_precision_matrix_mult": True}}})}),
        "markers_conflict": image(layers_quantized() + [marker("blocks.0.mlp.fc1", {"format": "int8_tensorwise"})],
                                  {"_quantization_metadata": json.dumps({"layers": {
                                      "blocks.0.mlp.fc1": {"format": "int8_tensorwise", "convrot": True}}})}),
        "legacy_scaled_fp8": image([
            ("scaled_fp8", "F8_E4M3", [2], None),
            ("model.diffusion_model.blocks.0.proj.weight", "F8_E4M3", [8, 16], None),
            ("model.diffusion_model.blocks.0.proj.scale_weight", "F32", [], F32_HALF),
            ("model.diffusion_model.blocks.0.proj.scale_input", "F32", [], F32_ONE),
        ]),
        "unmarked_int8": image([("blocks.2.fc.weight", "I8", [4, 8], None)]),
        "bad_marker_json": image([("blocks.0.fc.weight", "F32", [2, 2], None),
                                  ("blocks.0.fc.comfy_quant", "U8", [3], b"[1]")]),
        "trailing_bytes": image([("w", "F16", [3], None)], trailing=b"\0" * 5),
        "invalid_overlap": raw_image(json.dumps({
            "a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
            "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}), b"\0" * 8),
        "invalid_dtype": raw_image(json.dumps({"a": {"dtype": "F4", "shape": [2], "data_offsets": [0, 1]}}), b"\0"),
        "invalid_length": raw_image("{}", b"", length=1 << 40),
        "invalid_metadata": raw_image(json.dumps({"__metadata__": {"a": 1}})),
        # Issue 15: hostile inputs (nesting kept small: 200 levels is past the cap of 64).
        "deep_tensor_marker": image([("x.weight", "F32", [2, 2], None),
                                     ("x.comfy_quant", "U8", [len(deep)], deep.encode())]),
        "deep_params": image([("x.weight", "F32", [2, 2], None),
                              marker_raw("x", '{"format": "float8_e4m3fn", "params": ' + deep + '}')]),
        "deep_metadata": image([("x.weight", "F32", [2, 2], None)],
                               {"_quantization_metadata": '{"layers": {"x": ' + deep + '}}'}),
        "duplicate_marker_key": image([("x.weight", "F8_E4M3", [2, 32], None), ("x.weight_scale", "F32", [], F32_HALF),
                                       marker_raw("x", '{"format": "float8_e4m3fn", "format": "nvfp4"}')]),
        "nul_name": raw_image('{"a\\u0000b": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}', b"\0"),
        "control_names": image([("red\x1b[31m.weight", "F32", [2, 2], None), ("bell\x07\n.weight", "F32", [2, 2], None)]),
        "gap": raw_image(json.dumps({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                     "b": {"dtype": "U8", "shape": [4], "data_offsets": [8, 12]}}), b"\0" * 12),
        "empty_inside": raw_image(json.dumps({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                              "e": {"dtype": "U8", "shape": [0], "data_offsets": [2, 2]}}), b"\0" * 4),
        "global_mxfp8": image([("blocks.0.attn.out_proj.weight", "F8_E4M3", [32, 64], None),
                               ("blocks.0.attn.out_proj.weight_scale", "U8", [32, 2], bytes([120] * 64)),
                               ("refiner.weight", "BF16", [8, 16], None)], {"quant_format": "MXFP8"}),
        "global_mxfp8_bad": image(layers_quantized() + [marker(p, m) for p, m in MARKERS.items()],
                                  {"quant_format": "mxfp8"}),
        "conflict_key": image(layers_quantized() + [marker("blocks.1.mlp.fc2", {"format": "float8_e4m3fn",
                                                                               "full_precision_matrix_mult": False})],
                              {"_quantization_metadata": json.dumps({"layers": {"blocks.1.mlp.fc2": {
                                  "format": "float8_e4m3fn", "full_precision_matrix_mult": True}}})}),
        "scale_layout_forged": image([("x.weight", "F8_E4M3", [32, 64], None), ("x.weight_scale", "U8", [128, 4], None),
                                      marker("x", {"format": "mxfp8", "_scale_layout": "linear"})]),
    }


def marker_raw(prefix, text):
    raw = text.encode()
    return (prefix + ".comfy_quant", "U8", [len(raw)], raw)


def marker_seeds():
    """Dialect byte (even: tensor marker, odd: header entry) + marker text."""
    texts = {
        "fp8": '{"format": "float8_e4m3fn"}',
        "fp8_full": '{"format": "float8_e4m3fn", "full_precision_matrix_mult": true}',
        "int8_convrot": '{"format": "int8_tensorwise", "convrot": true, "convrot_groupsize": 16}',
        "int8_nested": '{"format": "int8_tensorwise", "params": {"convrot": true, "convrot_groupsize": 256}}',
        "nvfp4": '{"format": "nvfp4"}',
        "mxfp8": '{"format": "mxfp8", "_scale_layout": "linear"}',
        "w4a4": '{"format": "convrot_w4a4", "convrot_groupsize": 64, "linear_dtype": "int8"}',
        "w4a8": '{"format": "asym_w4a8_int8", "group_size": 16, "convrot": true}',
        "awq": '{"format": "awq_w4a16", "group_size": 64}',
        "svdquant": '{"format": "svdquant_w4a4", "act_unsigned": false, "layout": "tile"}',
        "unknown": '{"format": "fp4_magic"}',
        "no_format": '{"convrot": true}',
        "not_object": "[1, 2]",
        "duplicate": '{"format": "nvfp4", "format": "nvfp4"}',
        "deep": '{"format": "nvfp4", "params": ' + "[" * 100 + "]" * 100 + "}",
        "bad_utf8": '{"format": "\xff\xfe"}',
        "control": '{"format": "float8_e4m3fn", "x\u001b[2J": "\u0007"}',
        "numbers": '{"format": "int8_tensorwise", "convrot": 1, "convrot_groupsize": 1e400}',
    }
    seeds = {}
    for name, text in texts.items():
        raw = text.encode("latin-1") if "\xff" in text else text.encode()
        seeds["tensor_" + name] = b"\x00" + raw
        seeds["header_" + name] = b"\x01" + raw
    return seeds


def npy(header, data=b"", version=1, length=None):
    text = header.encode("latin-1")
    pre = 10 if version == 1 else 12
    pad = -(pre + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    n = len(text) if length is None else length
    size = struct.pack("<H", n) if version == 1 else struct.pack("<I", n)
    return b"\x93NUMPY" + bytes([version, 0]) + size + text + data


def npy_seeds():
    f4 = struct.pack("<6f", *range(6))
    return {
        "valid_f4": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f4),
        "valid_f2_v2": npy("{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }", b"\0\x3c" * 3, version=2),
        "scalar": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", f4[:4]),
        "empty": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }"),
        "duplicate_key": npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f4[:4]),
        "missing_key": npy("{'descr': '<f4', 'shape': (1,), }", f4[:4]),
        "fortran": npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f4),
        "big_endian": npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", f4[:4]),
        "truncated": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }", f4),
        "trailing": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f4),
        "overflow": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }"),
        "negative": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }"),
        "control_header": npy("{'descr': '<f4\x1b[2J\n', 'fortran_order': False, 'shape': (1,), }", f4[:4]),
        "long_header": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': '" + "a" * 300 + "'}"),
        "bad_length": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f4[:4], length=65535),
        "version3": npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", f4[:4], version=3),
    }


def floats(dtype, values):
    """values as little-endian F32, F16 or BF16 (the top half of the F32)."""
    if dtype == "BF16":
        return b"".join(struct.pack("<f", v)[2:] for v in values)
    return b"".join(struct.pack("<f" if dtype == "F32" else "<e", v) for v in values)


# Float layers of the layer seeds: [out, in]. K = 256 holds every format's
# groups (ConvRot 256, SVDQuant 64, NVFP4 16); 20 rows leave a partial panel.
LAYER_SHAPES = {"blocks.0.attn.qkv": (32, 256), "blocks.0.mlp.fc2": (20, 64)}
QUANTIZE_RULES = ["float8_e4m3fn", "float8_e5m2", "nvfp4", "mxfp8", "int8_tensorwise",
                  "int8_tensorwise:convrot=true", "convrot_w4a4", "asym_w4a8_int8", "awq_w4a16"]


def float_source(rng, dtype, biases):
    """The LAYER_SHAPES layers as Gaussian weights (std 0.05) of dtype, F32 biases if asked."""
    tensors = []
    for prefix, (n, k) in LAYER_SHAPES.items():
        tensors.append((prefix + ".weight", dtype, [n, k], floats(dtype, [rng.gauss(0, 0.05) for _ in range(n * k)])))
        if biases:
            tensors.append((prefix + ".bias", "F32", [n], floats("F32", [rng.gauss(0, 0.05) for _ in range(n)])))
    return tensors


def svdquant_seed(rng):
    n, k, rank = 32, 256, 4
    half = lambda count: floats("F16", [rng.uniform(0.5, 1.5) for _ in range(count)])
    return image([
        ("blocks.0.attn.qkv.weight", "I8", [n, k // 2], bytes(rng.randrange(256) for _ in range(n * k // 2))),
        ("blocks.0.attn.qkv.weight_scale", "F16", [k // 64, n], half(k // 64 * n)),
        ("blocks.0.attn.qkv.weight_proj_down", "F16", [k, rank], half(k * rank)),
        ("blocks.0.attn.qkv.weight_proj_up", "F16", [n, rank], half(n * rank)),
        ("blocks.0.attn.qkv.weight_smooth_factor", "F16", [k], half(k)),
        ("blocks.0.attn.qkv.bias", "F32", [n], floats("F32", [0.25] * n)),
        marker("blocks.0.attn.qkv", {"format": "svdquant_w4a4"}),
    ])


def layer_seeds(mixq):
    rng = random.Random(7)
    # The float layers as F16 (half the bytes of F32), SVDQuant, and one
    # quantized checkpoint per rule.
    seeds = {"unquantized": image(float_source(rng, "F16", True)), "svdquant_w4a4": svdquant_seed(rng)}
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "source.safetensors")
        with open(src, "wb") as f:
            f.write(image(float_source(rng, "F32", True)))
        for rule in QUANTIZE_RULES:
            out = os.path.join(tmp, "out.safetensors")
            keep = ("," if ":" in rule else ":") + "fallback=keep"
            subprocess.run([mixq, "quantize", src, "-o", out, "--rule", "*=" + rule + keep, "--quiet"], check=True)
            with open(out, "rb") as f:
                seeds[rule.replace(":", "_").replace("=", "_")] = f.read()
    return seeds


def quantize_seeds():
    """Float sources (fuzz_quantize): the layer seeds' shapes in F32, F16 and BF16."""
    rng = random.Random(11)
    return {"source_" + d.lower(): image(float_source(rng, d, False)) for d in ("F32", "F16", "BF16")}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join("build", "fuzz", "seeds")
    corpora = [("checkpoint", checkpoint_seeds()), ("marker", marker_seeds()), ("npy", npy_seeds())]
    if len(sys.argv) > 2:
        corpora.append(("layers", layer_seeds(sys.argv[2])))
    corpora.append(("quantize", quantize_seeds()))
    for target, seeds in corpora:
        folder = os.path.join(out, target)
        os.makedirs(folder, exist_ok=True)
        for name, blob in seeds.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(blob)


if __name__ == "__main__":
    main()
