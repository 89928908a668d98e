"""mixq._mixq._linear_from_tensors (the comfy-kitchen backend's way in) and
Linear.detach(): Linears whose weights do not come from an open file."""
import json

import numpy as np
import pytest

import mixq
import mixq._mixq as ext


def int8_layer(n=48, k=64, seed=0):
    rng = np.random.default_rng(seed)
    return {"weight": rng.integers(-127, 128, size=(n, k)).astype(np.int8),
            "weight_scale": np.array(0.01, np.float32),
            "bias": (rng.standard_normal(n) * 0.1).astype(np.float32)}


def entries(tensors):
    names = {np.int8: "I8", np.float32: "F32", np.uint8: "U8"}
    return {role: (names[a.dtype.type], list(a.shape), np.ascontiguousarray(a).reshape(-1).view(np.uint8))
            for role, a in tensors.items()}


def test_same_linear_as_from_a_file(tmp_path):
    tensors = int8_layer()
    marker = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 64}
    path = tmp_path / "one.safetensors"
    stored = {f"l.{role}": a for role, a in tensors.items()}
    stored["l.comfy_quant"] = np.frombuffer(json.dumps(marker).encode(), np.uint8)
    mixq.save_file(path, stored)
    from_file = mixq.open(path).linear("l")
    from_memory = ext._linear_from_tensors("l", json.dumps(marker), entries(tensors))
    assert (from_memory.format, from_memory.method, from_memory.kernel) == \
        (from_file.format, from_file.method, from_file.kernel)
    assert from_memory.params == from_file.params
    x = np.random.default_rng(1).standard_normal((5, 64)).astype(np.float32)
    np.testing.assert_array_equal(from_memory.forward(x), from_file.forward(x))
    with pytest.raises(mixq.Error, match="cannot dequantize"):
        from_memory.dequantize()


def test_unquantized_from_memory():
    w = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32)
    lin = ext._linear_from_tensors("u", "null", entries({"weight": w}))
    assert lin.format is None
    x = np.random.default_rng(3).standard_normal((3, 16)).astype(np.float32)
    # float32 sums in another order: measured max |diff| 4.8e-7, bound 1.5e-6
    assert np.abs(lin.forward(x) - x @ w.T).max() < 1.5e-6


def test_bad_tensors_are_clear_errors():
    good = entries(int8_layer())
    marker = json.dumps({"format": "int8_tensorwise"})
    cases = [
        ("l", "{", good, "not JSON"),
        ("l", json.dumps({"format": "int9"}), good, "unknown quantization format 'int9'"),
        ("l", json.dumps([1]), good, "JSON object or null"),
        ("l", marker, good | {"weight_zeros": good["bias"]}, "no tensor role 'weight_zeros'"),
        ("l", marker, good | {"weight": ("I4", [48, 64], good["weight"][2])}, "unsupported dtype 'I4'"),
        ("l", marker, good | {"weight": ("I8", [48, 65], good["weight"][2])}, "l.weight"),
        ("l", marker, {k: v for k, v in good.items() if k != "weight_scale"}, "missing"),
        ("l", marker, good | {"weight": ("I8", [48, 64], good["weight"][2].astype(np.int16))}, "uint8"),
    ]
    for prefix, m, tensors, message in cases:
        with pytest.raises(mixq.Error, match=message):
            ext._linear_from_tensors(prefix, m, tensors)


def test_detach_releases_the_checkpoint(mixed):
    ckpt = mixq.open(mixed[0])
    layer = ckpt.linear("blocks.0.mlp.fc1")
    x = np.random.default_rng(4).standard_normal((2, layer.in_features)).astype(np.float32)
    before = layer.forward(x)
    assert layer.k_pad_unit == 16  # nvfp4: the stored K is padded to 16
    layer.detach()
    layer.detach()  # twice is fine
    np.testing.assert_array_equal(layer.forward(x), before)
    assert layer.format == "nvfp4" and layer.method
    with pytest.raises(mixq.Error, match="blocks.0.mlp.fc1.*cannot dequantize"):
        layer.dequantize()
