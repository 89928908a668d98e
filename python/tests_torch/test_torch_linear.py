"""mixq.torch.Linear: one checkpoint layer of every format as an nn.Module."""
import numpy as np
import pytest
import torch

import mixq
import mixq.torch


@pytest.fixture(scope="module")
def ckpt(mixed):
    return mixq.open(mixed[0])


def test_every_format_and_dtype(ckpt, mixed):
    """forward(x) is mixq.Linear.forward on the same values: f32 bit for bit,
    bf16/f16 inputs give that result rounded to the input's dtype, with any
    leading dimensions and strides."""
    _, layers = mixed
    gen = torch.Generator().manual_seed(1)
    seen = set()
    for prefix, (n, k, fmt, _) in layers.items():
        raw = ckpt.linear(prefix)
        module = mixq.torch.Linear(ckpt.linear(prefix), k, n)
        seen.add(module.format)
        assert module.format == fmt
        x = torch.randn(2, 3, k, generator=gen)
        ref = raw.forward(torch.nn.functional.pad(x, (0, raw.in_features - k)).reshape(6, -1).numpy())
        ref = torch.from_numpy(ref[:, :n]).reshape(2, 3, n)
        with torch.no_grad():
            y = module(x)
            assert y.dtype == torch.float32 and torch.equal(y, ref), prefix
            assert torch.equal(module(x.transpose(0, 1).contiguous().transpose(0, 1)), ref), prefix
            for dtype in (torch.bfloat16, torch.float16):
                xd = x.to(dtype)
                want = raw.forward(torch.nn.functional.pad(xd.float(), (0, raw.in_features - k)).reshape(6, -1).numpy())
                want = torch.from_numpy(want[:, :n]).reshape(2, 3, n).to(dtype)
                yd = module(xd)
                assert yd.dtype == dtype and torch.equal(yd, want), (prefix, dtype)
    assert seen == {"float8_e4m3fn", "float8_e5m2", "nvfp4", "mxfp8", "int8_tensorwise", "convrot_w4a4",
                    "asym_w4a8_int8", "awq_w4a16", "svdquant_w4a4", None}


def test_unquantized_layer_is_nn_linear(ckpt, mixed, workdir):
    """An unquantized layer matches torch's own F.linear over the stored float
    weight (float32 sums in another order: measured max |diff| 1.2e-7 for
    |y| ~ 0.5, bound 1e-6)."""
    from safetensors.torch import load_file

    tensors = load_file(str(mixed[0]))
    w, b = tensors["l.float.weight"], tensors["l.float.bias"]
    x = torch.randn(7, w.shape[1], generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        y = mixq.torch.Linear(ckpt.linear("l.float"))(x)
    assert (y - torch.nn.functional.linear(x, w.float(), b.float())).abs().max() < 1e-6


def test_repr_and_properties(ckpt):
    module = mixq.torch.Linear(ckpt.linear("l.int8_convrot"))
    text = repr(module)
    assert "format=int8_tensorwise" in text and "method=int8_convrot" in text
    assert f"kernel={module.kernel}" in text and module.kernel
    assert (module.in_features, module.out_features) == (256, 96)
    assert "format=unquantized" in repr(mixq.torch.Linear(ckpt.linear("l.float")))


def test_bad_input_is_a_clear_error(ckpt):
    module = mixq.torch.Linear(ckpt.linear("l.int8"))
    x = torch.randn(4, 192)
    with pytest.raises(mixq.Error, match="l.int8.*inference only"):
        module(x.requires_grad_())
    with torch.no_grad():  # no graph: the same input is fine
        assert module(x).shape == (4, 64)
    with pytest.raises(mixq.Error, match="l.int8.*on meta.*CPU"):
        module(torch.empty(4, 192, device="meta"))
    with pytest.raises(mixq.Error, match="l.int8.*dtype torch.int32"):
        module(torch.ones(4, 192, dtype=torch.int32))
    with pytest.raises(mixq.Error, match=r"l.int8.*\[4, 191\].*192"):
        module(torch.ones(4, 191))
    with pytest.raises(mixq.Error, match="needs a mixq.Linear"):
        mixq.torch.Linear(torch.nn.Linear(2, 2))
    with pytest.raises(mixq.Error, match="in_features 100 does not fit the stored 192"):
        mixq.torch.Linear(ckpt.linear("l.int8"), 100, 64)


def test_empty_batch(ckpt):
    module = mixq.torch.Linear(ckpt.linear("l.nvfp4"))
    with torch.no_grad():
        assert module(torch.empty(0, 256)).shape == (0, 128)


def test_threads_follow_torch_until_set(ckpt, monkeypatch):
    import mixq._threads

    monkeypatch.setattr(mixq._threads, "_set_by_user", False)
    monkeypatch.setattr(mixq._threads, "_followed", None)
    module = mixq.torch.Linear(ckpt.linear("l.int8"))
    before = torch.get_num_threads()
    try:
        with torch.no_grad():
            torch.set_num_threads(1)
            module(torch.randn(2, 192))
            assert mixq.num_threads() == 1
            mixq.set_num_threads(2)
            module(torch.randn(2, 192))
            assert mixq.num_threads() == 2  # the user's choice wins over torch's 1
    finally:
        torch.set_num_threads(before)
        mixq._mixq.set_num_threads(before)


def test_bfloat16_out_is_torch_rounding(workdir):
    """forward(x, out=bfloat16) rounds the float32 result as torch's
    Tensor.to(torch.bfloat16): through an identity layer y = x exactly, so
    every tie (low half 0x8000, odd and even), the carry into the exponent,
    the overflow to inf, subnormals and NaN reach the conversion; over 40
    rows of 4096 the conversion runs in several chunks on the pool."""
    n = 64
    path = workdir / "identity.safetensors"
    mixq.save_file(path, {"eye.weight": torch.eye(n)})
    layer = mixq.open(path).linear("eye")
    gen = torch.Generator().manual_seed(5)
    bits = torch.randint(0, 2**31, (4096 * 40,), generator=gen, dtype=torch.int64)
    bits[0::7] = (bits[0::7] & ~0xFFFF) | 0x8000  # ties
    bits[1::11] = 0x7F7FFFFF  # rounds up to inf
    bits[2::13] = 0x00008000 | (bits[2::13] & 0x7FFF0000)  # ties, many subnormal
    signs = torch.randint(0, 2, bits.shape, generator=gen, dtype=torch.int64) << 31
    x = (bits | signs) & 0xFFFFFFFF
    x = torch.from_numpy(x.numpy().astype(np.uint32).view(np.float32)).reshape(-1, n).clone()
    x[x == 0] = 1.0  # -0 comes back as +0 through the sum
    x[3, 5] = float("nan")  # a NaN row: every output of it NaN (NaN * 0)
    x[9, :] = float("inf")  # inf row: inf * 0 is NaN
    finite = torch.isfinite(x).all(dim=1)
    out = torch.empty(x.shape[0], n, dtype=torch.bfloat16)
    assert layer.forward(x.numpy(), out=out) is out
    y32 = torch.from_numpy(layer.forward(x.numpy()))
    assert torch.equal(y32[finite], x[finite])  # the identity is exact
    want = y32.to(torch.bfloat16)
    assert torch.equal(out.view(torch.int16), want.view(torch.int16)) or (
        torch.equal(out[finite].view(torch.int16), want[finite].view(torch.int16))
        and torch.equal(out.isnan(), want.isnan()))
    assert out[3].isnan().all() and out[9].isnan().all() and not out[finite].isnan().any()
    with pytest.raises(mixq.Error, match="out has dtype float16; expected float32 or bfloat16"):
        layer.forward(x.numpy(), out=torch.empty(x.shape[0], n, dtype=torch.float16))


def test_bfloat16_calls_reuse_buffers_safely(ckpt, mixed):
    """bfloat16 calls convert through per-thread buffers kept between calls:
    calls that grow and shrink them, and two threads calling at once, give
    the float32 path's result rounded, every time."""
    import threading

    _, layers = mixed
    prefixes = ["l.nvfp4_pad", "l.int8_convrot", "l.fp8_e4m3", "l.float"]
    gen = torch.Generator().manual_seed(6)
    cases = []
    for prefix in prefixes:
        n, k = layers[prefix][:2]
        module = mixq.torch.Linear(ckpt.linear(prefix), k, n)
        for rows in (3, 700, 1, 1500):
            x = torch.randn(rows, k, generator=gen).to(torch.bfloat16)
            with torch.no_grad():
                want = module(x.float()).to(torch.bfloat16)
            cases.append((module, x, want))
    with torch.no_grad():
        for module, x, want in cases:  # one thread: sizes up and down
            assert torch.equal(module(x), want)
    failures = []

    def run(order):
        with torch.no_grad():
            for _ in range(3):
                for module, x, want in order:
                    if not torch.equal(module(x), want):
                        failures.append(module.prefix)

    threads = [threading.Thread(target=run, args=(cases,)), threading.Thread(target=run, args=(cases[::-1],))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
