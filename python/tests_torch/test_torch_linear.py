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
