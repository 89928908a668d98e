"""Bad input raises mixq.Error (a ValueError) with a useful message; nothing
crashes the interpreter."""
import json
import struct

import numpy as np
import pytest

import mixq
from dlpack_producer import DLPackArray


def raises(match, fn, *args, **kwargs):
    with pytest.raises(mixq.Error, match=match):
        fn(*args, **kwargs)


def test_error_is_a_value_error():
    assert issubclass(mixq.Error, ValueError)


def test_open_errors(tmp_path):
    raises("missing.safetensors", mixq.open, tmp_path / "missing.safetensors")
    raises("list of paths is empty", mixq.open, [])
    raises("expected a path", mixq.open, 42)
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\xff" * 64)
    raises("garbage.safetensors", mixq.open, garbage)
    truncated = tmp_path / "truncated.safetensors"
    header = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}).encode()
    truncated.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 10)
    raises("truncated.safetensors", mixq.open, truncated)


def test_open_refuses_a_nul_byte_in_the_path(tmp_path):
    # The C library would stop at the NUL and open "x" instead.
    (tmp_path / "x").write_bytes(b"")
    raises(r"x\\x00y: the path holds a NUL byte", mixq.open, str(tmp_path / "x\0y"))


def test_bad_marker_is_reported_when_layers_are_needed(tmp_path):
    path = tmp_path / "bad_marker.safetensors"
    mixq.save_file(path, {
        "layer.weight": np.zeros((4, 4), np.float32),
        "layer.comfy_quant": np.frombuffer(b"{not json", np.uint8),
    })
    ckpt = mixq.open(path)  # headers only: fine
    raises("layer", ckpt.prefixes)
    raises("layer", ckpt.linear, "layer")
    raises("layer", ckpt.inspect)


def test_linear_lookup_errors(ckpt):
    raises("no linear layer 'nope'.*blocks", ckpt.linear, "nope")
    raises("kernel must be", ckpt.linear, "blocks.0.mlp.fc1", kernel="fast")


def test_plan_argument_errors(ckpt):
    raises("profile", ckpt.plan, profile="vllm")
    raises("tp must be >= 1", ckpt.plan, tp=0)


def test_forward_errors(ckpt):
    layer = ckpt.linear("blocks.0.mlp.fc1")  # 64 -> 128
    k, n = layer.in_features, layer.out_features
    raises("in_features = 64", layer.forward, np.zeros((2, k + 1), np.float32))
    raises("scalar", layer.forward, np.float32(1.0).reshape(()))
    raises("dtype int32", layer.forward, np.zeros((2, k), np.int32))
    raises("dtype complex64", layer.forward, np.zeros((2, k), np.complex64))
    raises("must be a NumPy array", layer.forward, [[0.0] * k])
    raises("must be a NumPy array", layer.forward, None)
    x = np.zeros((2, k), np.float32)
    raises(r"out has shape \[2, 64\]; expected \[2, 128\]", layer.forward, x, out=np.zeros((2, k), np.float32))
    raises("out has dtype float64", layer.forward, x, out=np.zeros((2, n)))
    raises("C-contiguous", layer.forward, x, out=np.zeros((n, 2), np.float32).T)
    frozen = np.zeros((2, n), np.float32)
    frozen.setflags(write=False)
    raises("writable", layer.forward, x, out=frozen)
    # A DLPack tensor on another device.
    class OnGpu(DLPackArray):
        def __dlpack_device__(self):
            return (2, 0)
    gpu = OnGpu.view_of(x)
    gpu._managed.dl_tensor.device.device_type = 2
    raises("CPU memory", layer.forward, gpu)


def test_set_num_threads_refuses_a_negative_count():
    before = mixq.num_threads()
    raises("threads must be >= 0", mixq.set_num_threads, -1)
    assert mixq.num_threads() == before


def test_dequantize_errors(ckpt):
    raises("basis must be", ckpt.linear("blocks.0.mlp.fc1").dequantize, basis="rotated")


def test_quantize_errors(source, tmp_path):
    src = source[0]
    out = tmp_path / "q.safetensors"
    raises("exactly one of", mixq.quantize, src, out)
    raises("exactly one of", mixq.quantize, src, out, rules=["*=nvfp4"], recipe={"rules": []})
    raises("not one string", mixq.quantize, src, out, rules="*=nvfp4")
    raises("not_a_format", mixq.quantize, src, out, rules=["*=not_a_format"])
    raises("bogus", mixq.quantize, src, out, rules=["*=nvfp4:bogus=1"])
    raises("markers|tensor", mixq.quantize, src, out, rules=["*=nvfp4"], markers="sideways")
    raises("missing", mixq.quantize, tmp_path / "missing.safetensors", out, rules=["*=nvfp4"])
    assert not out.exists()


def test_save_file_errors(tmp_path):
    raises("dtype", mixq.save_file, tmp_path / "a.safetensors", {"a": np.zeros(3, np.complex64)})
    raises("not an array", mixq.save_file, tmp_path / "a.safetensors", {"a": [1, 2]})
    # A name mixq.open refuses (a NUL cuts it short for every C API).
    raises(r"tensor name 'a\\x00b' holds a NUL byte", mixq.save_file, tmp_path / "a.safetensors",
           {"a\0b": np.zeros(3, np.float32)})
    raises("paths must be text, got bytes", mixq.save_file, bytes(tmp_path / "a.safetensors"),
           {"a": np.zeros(3, np.float32)})
    assert not (tmp_path / "a.safetensors").exists()
