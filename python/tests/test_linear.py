"""Checkpoint.linear: properties, dequantize and forward against the CLI and
against the float weights, every input kind (NumPy, DLPack, f16, bf16,
strided), out=, and lifetime."""
import gc
import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import mixq
from conftest import FORMATS, LAYERS
from dlpack_producer import DLPackArray, bf16_round

PREFIXES = sorted(LAYERS)
# Bounds about 1.5x the error measured on the fixture's layers (seeded data,
# so the same on every machine up to float summation order), so that a coarser
# quantizer or a wrong decode fails. Measured values in the comments.
# ‖W_deq − W‖ / ‖W‖, the dequantized weight vs the float source:
WEIGHT_RTOL = {None: 0.0,
               "float8_e4m3fn": 0.04,     # measured 0.0261
               "mxfp8": 0.04,             # 0.0268
               "int8_tensorwise": 0.011,  # 0.00691 (ConvRot, per row)
               "nvfp4": 0.145,            # 0.0963
               "convrot_w4a4": 0.185,     # 0.123
               "asym_w4a8_int8": 0.11}    # 0.0719
# ‖y − (x·Wᵀ + b)‖ / ‖x·Wᵀ + b‖, forward vs the float linear over the source
# weight (weight and, except W4A8's int8 activations, activation rounding):
FORWARD_RTOL = {None: 4.5e-7,             # 1.56e-7 (float32 summation order)
                "float8_e4m3fn": 0.055,   # 0.0355
                "mxfp8": 0.058,           # 0.0382
                "int8_tensorwise": 0.014, # 0.00933
                "nvfp4": 0.21,            # 0.138
                "convrot_w4a4": 0.25,     # 0.168
                "asym_w4a8_int8": 0.115}  # 0.0769


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def activations(m, k, seed=1):
    return np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_properties(ckpt, prefix):
    layer = ckpt.linear(prefix)
    n, k, _, _ = LAYERS[prefix]
    assert (layer.out_features, layer.in_features) == (n, k)
    assert layer.prefix == prefix
    assert layer.format == FORMATS[prefix]
    assert isinstance(layer.params, dict)
    assert isinstance(layer.kernel, str) and layer.kernel
    assert isinstance(layer.method, str) and layer.method
    assert prefix in repr(layer)
    # INT8, ConvRot W4A4, NVFP4, FP8 and MXFP8 read their rows in place from
    # the mapped file on the fast kernels; every other format packs a copy.
    in_place_formats = ("int8_tensorwise", "convrot_w4a4", "nvfp4", "float8_e4m3fn", "float8_e5m2", "mxfp8")
    assert layer.in_place == (FORMATS[prefix] in in_place_formats and layer.kernel != "ref")
    assert layer.stored_bytes == header_bytes(ckpt.paths[0], prefix)


def header_bytes(path, prefix):
    """Bytes of the layer's tensors by the safetensors header (the marker aside)."""
    with open(path, "rb") as f:
        header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
    return sum(t["data_offsets"][1] - t["data_offsets"][0] for name, t in header.items()
               if name.startswith(prefix + ".") and not name.endswith(".comfy_quant"))


def test_params_have_defaults_applied(ckpt):
    assert ckpt.linear("blocks.0.attn.qkv").params["convrot"] is True
    assert ckpt.linear("blocks.0.attn.qkv").params["convrot_groupsize"] == 64
    w4a4 = ckpt.linear("blocks.0.attn.out").params
    assert w4a4["convrot_groupsize"] == 64 and w4a4["linear_dtype"] == "int4"
    assert ckpt.linear("blocks.1.mlp.fc2").params["group_size"] == 16
    # Every format's defaults, full_precision_matrix_mult included (issue 15).
    for prefix in PREFIXES:
        if FORMATS[prefix]:
            assert ckpt.linear(prefix).params["full_precision_matrix_mult"] is False, prefix


@pytest.mark.parametrize("prefix", PREFIXES)
def test_dequantize_matches_cli_and_source(ckpt, mixed, source, cli, tmp_path, prefix):
    layer = ckpt.linear(prefix)
    w = layer.dequantize()
    assert w.dtype == np.float32 and w.shape == (layer.out_features, layer.in_features)
    cli.run("dequantize", mixed[0], "--layer", prefix, "-o", tmp_path / "w.npy")
    np.testing.assert_array_equal(w, np.load(tmp_path / "w.npy"))
    assert rel(w, source[1][prefix + ".weight"]) <= WEIGHT_RTOL[FORMATS[prefix]]


def test_dequantize_basis(ckpt, mixed, cli, tmp_path):
    rotated = ckpt.linear("blocks.0.attn.qkv")
    stored = rotated.dequantize(basis="stored")
    cli.run("dequantize", mixed[0], "--layer", rotated.prefix, "--basis", "stored",
            "-o", tmp_path / "s.npy")
    np.testing.assert_array_equal(stored, np.load(tmp_path / "s.npy"))
    # ConvRot: the stored basis is the original one times H per 64-group
    # (measured 1.32 apart).
    assert rel(stored, rotated.dequantize()) > 0.5
    plain = ckpt.linear("blocks.0.mlp.fc1")
    np.testing.assert_array_equal(plain.dequantize("stored"), plain.dequantize("original"))


@pytest.mark.parametrize("prefix", PREFIXES)
def test_forward_matches_cli_linear(ckpt, mixed, cli, tmp_path, prefix):
    layer = ckpt.linear(prefix)
    x = activations(5, layer.in_features)
    np.save(tmp_path / "x.npy", x)
    cli.run("linear", mixed[0], "--layer", prefix, "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy")
    expected = np.load(tmp_path / "y.npy")
    y = layer.forward(x)
    assert y.dtype == np.float32 and y.shape == (5, layer.out_features)
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("prefix", PREFIXES)
def test_forward_approximates_float_linear(ckpt, source, prefix):
    layer = ckpt.linear(prefix)
    tensors = source[1]
    x = activations(8, layer.in_features, seed=2)
    reference = x @ tensors[prefix + ".weight"].T + tensors.get(prefix + ".bias", 0)
    assert rel(layer.forward(x), reference) <= FORWARD_RTOL[FORMATS[prefix]]


@pytest.mark.parametrize("prefix", ["blocks.0.attn.qkv", "blocks.0.mlp.fc1", "blocks.1.attn.out"])
def test_reference_kernel_agrees(ckpt, prefix):
    x = activations(7, LAYERS[prefix][1])
    fast, ref = ckpt.linear(prefix), ckpt.linear(prefix, kernel="ref")
    assert ref.kernel == "ref"
    y_fast, y_ref = fast.forward(x), ref.forward(x)
    if FORMATS[prefix] is not None:
        # INT8 and NVFP4: exact integer block dots, the same scaling in the
        # same order: bit for bit.
        np.testing.assert_array_equal(y_fast, y_ref)
    else:
        # float32 sums in another order: measured at most 8.1e-8 of Σ|x·w|.
        magnitude = np.abs(x) @ np.abs(ref.dequantize()).T
        assert np.all(np.abs(y_fast - y_ref) <= 2e-7 * magnitude)


def test_input_layouts_give_the_same_rows(ckpt):
    layer = ckpt.linear("blocks.0.attn.qkv")
    k, n = layer.in_features, layer.out_features
    x = activations(6, k)
    y = layer.forward(x)
    # 1-D input -> 1-D output; 3-D input keeps the leading dims.
    np.testing.assert_array_equal(layer.forward(x[2]), y[2])
    np.testing.assert_array_equal(layer.forward(x.reshape(2, 3, k)), y.reshape(2, 3, n))
    # Strided rows (every other row, a Fortran-order copy) are converted.
    np.testing.assert_array_equal(layer.forward(x[::2]), y[::2])
    np.testing.assert_array_equal(layer.forward(np.asfortranarray(x)), y)
    # Read-only arrays are fine.
    frozen = x.copy()
    frozen.setflags(write=False)
    np.testing.assert_array_equal(layer.forward(frozen), y)
    # float64 and float16 are converted to float32 (exact for float16).
    np.testing.assert_array_equal(layer.forward(x.astype(np.float64)), y)
    half = x.astype(np.float16)
    np.testing.assert_array_equal(layer.forward(half), layer.forward(half.astype(np.float32)))
    # Zero rows.
    assert layer.forward(np.zeros((0, k), np.float32)).shape == (0, n)
    # __call__ is forward.
    np.testing.assert_array_equal(layer(x), y)


def test_dlpack_inputs(ckpt):
    layer = ckpt.linear("blocks.0.mlp.fc2")
    x = activations(4, layer.in_features)
    y = layer.forward(x)
    np.testing.assert_array_equal(layer.forward(DLPackArray.view_of(x)), y)
    np.testing.assert_array_equal(layer.forward(DLPackArray.view_of(np.asfortranarray(x))), y)
    # bfloat16: the same as float32 input holding the bf16-rounded values.
    bf16 = DLPackArray.bfloat16(x)
    np.testing.assert_array_equal(layer.forward(bf16), layer.forward(bf16_round(x)))
    # MXFP8 re-quantizes the bf16-rounded activations: measured 0.0249 apart.
    assert rel(layer.forward(bf16), y) < 0.0375


def test_out_parameter(ckpt):
    layer = ckpt.linear("blocks.1.mlp.fc1")  # 64 -> 64
    x = activations(3, 64)
    y = layer.forward(x)
    out = np.full((3, 64), np.nan, np.float32)
    assert layer.forward(x, out=out) is out
    np.testing.assert_array_equal(out, y)
    # out may alias x (in-place update) without corrupting the result.
    inplace = x.copy()
    layer.forward(inplace, out=inplace)
    np.testing.assert_array_equal(inplace, y)
    # out through DLPack only.
    target = np.zeros((3, 64), np.float32)
    layer.forward(x, out=DLPackArray.view_of(target))
    np.testing.assert_array_equal(target, y)


# Run by test_dlpack_capsule_that_owns_its_buffer in a child process.
OWNING_CAPSULE_SCRIPT = r"""
import sys
import numpy as np
import mixq
from dlpack_producer import OwningDLPack

layer = mixq.open(sys.argv[1]).linear("blocks.1.mlp.fc1")  # 64 -> 64
x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
y = layer.forward(x)
out = OwningDLPack(np.full((3, 64), np.nan, np.float32))
assert layer.forward(x, out=out) is out
assert out.deleted == 1, out.deleted
np.testing.assert_array_equal(out.released[0], y)  # written before it was freed
source = OwningDLPack(x)
np.testing.assert_array_equal(layer.forward(source), y)
assert source.deleted == 1
print("ok")
"""


def test_dlpack_capsule_that_owns_its_buffer(mixed):
    """out= (and x) from a producer whose DLPack deleter frees the buffer:
    forward must hold the managed tensor until it has written. In a child
    process, because a write after the deleter is a SIGSEGV there (see
    OwningDLPack), which this test reports instead of dying of it."""
    result = subprocess.run([sys.executable, "-c", OWNING_CAPSULE_SCRIPT, str(mixed[0])],
                            cwd=pathlib.Path(__file__).parent, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", (
        f"exit status {result.returncode} (-11: SIGSEGV, the buffer was used after its deleter "
        f"freed it)\n{result.stderr}")


def test_linear_keeps_the_checkpoint_alive(mixed):
    ckpt = mixq.open(mixed[0])
    layer = ckpt.linear("blocks.0.attn.out")  # ConvRot W4A4: read in place on AVX2 / AVX-512
    x = activations(2, layer.in_features)
    before = layer.forward(x)
    w = layer.dequantize()
    del ckpt
    gc.collect()
    np.testing.assert_array_equal(layer.forward(x), before)
    np.testing.assert_array_equal(layer.dequantize(), w)


def test_thread_count_does_not_change_results(ckpt):
    layer = ckpt.linear("blocks.0.attn.qkv")
    x = activations(33, layer.in_features)
    previous = mixq.num_threads()
    try:
        mixq.set_num_threads(1)
        one = layer.forward(x)
        mixq.set_num_threads(2)
        two = layer.forward(x)
    finally:
        mixq.set_num_threads(previous)
    np.testing.assert_array_equal(one, two)


def test_resizing_the_pool_during_forward_changes_no_result(ckpt):
    """set_num_threads on one thread while forward runs on another (issue 15:
    the split was computed outside the pool's lock, so chunks were skipped
    and rows left uninitialised): every result equals the 1-thread one."""
    import threading

    layer = ckpt.linear("blocks.0.attn.qkv")
    x = activations(257, layer.in_features)
    previous = mixq.num_threads()
    stop = threading.Event()

    def resize():
        n = 0
        while not stop.is_set():
            mixq.set_num_threads(1 + n % 3)
            n += 1

    try:
        mixq.set_num_threads(1)
        expected = layer.forward(x)
        worker = threading.Thread(target=resize)
        worker.start()
        try:
            for _ in range(300):
                np.testing.assert_array_equal(layer.forward(x), expected)
        finally:
            stop.set()
            worker.join()
    finally:
        mixq.set_num_threads(previous)


def test_forward_releases_the_gil(ckpt):
    """The main thread runs while a worker thread is inside one long forward
    call. The switch interval is huge, so the interpreter never forces a GIL
    hand-over: the main thread can only run meanwhile if forward releases the
    GIL itself (otherwise it sees `done` on its first step and counts 0)."""
    import sys
    import threading
    import time

    layer = ckpt.linear("blocks.0.attn.qkv")
    x = activations(65536, layer.in_features)
    started, done = threading.Event(), threading.Event()

    def work():
        started.set()
        layer.forward(x)
        done.set()

    previous_interval, previous_threads = sys.getswitchinterval(), mixq.num_threads()
    sys.setswitchinterval(1000.0)
    mixq.set_num_threads(1)  # leave the other core to this thread
    try:
        worker = threading.Thread(target=work)
        worker.start()
        while not started.is_set():
            time.sleep(0)
        progress = 0
        while not done.is_set():
            progress += 1
            time.sleep(0)  # lets the worker take the GIL back when forward returns
        worker.join()
    finally:
        sys.setswitchinterval(previous_interval)
        mixq.set_num_threads(previous_threads)
    assert progress > 0


def test_torch_tensors_use_a_numpy_view(ckpt, monkeypatch):
    """CPU torch.Tensor inputs go through Tensor.numpy() (a view, cheaper than
    __dlpack__); what .numpy() refuses (bfloat16, requires_grad) goes through
    __dlpack__. A stand-in `torch` module checks both paths without PyTorch."""
    import types

    class Tensor(DLPackArray):
        numpy_calls = 0

        def numpy(self):
            type(self).numpy_calls += 1
            if self._storage.dtype == np.uint16:
                raise TypeError("Got unsupported ScalarType BFloat16")
            return self._storage

    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(Tensor=Tensor))
    layer = ckpt.linear("blocks.0.mlp.fc1")
    x = activations(3, layer.in_features)
    y = layer.forward(x)
    np.testing.assert_array_equal(layer.forward(Tensor.view_of(x)), y)
    assert Tensor.numpy_calls == 1
    bf16 = Tensor.bfloat16(x)  # .numpy() raises: DLPack path
    np.testing.assert_array_equal(layer.forward(bf16), layer.forward(bf16_round(x)))
    assert Tensor.numpy_calls == 2
