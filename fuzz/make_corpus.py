#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_checkpoint into fuzz/corpus/ (committed).

Tiny safetensors images: valid float and quantized layers in both marker
dialects, nested params, legacy scaled_fp8, trailing bytes, and a few invalid
ones (one rule broken each). Standard library only; rerun to regenerate.
"""
import json
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
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


def main():
    os.makedirs(HERE, exist_ok=True)
    seeds = {
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
    }
    for name, blob in seeds.items():
        with open(os.path.join(HERE, name + ".safetensors"), "wb") as f:
            f.write(blob)


if __name__ == "__main__":
    main()
