"""Fixtures for the PyTorch tests (python/tests_torch, `make test-torch`):
a mixed checkpoint holding every format mixq runs, made by mixq.quantize from
random float weights (SVDQuant, which needs calibration, is written by hand),
and the `mixq` CLI ($MIXQ_CLI)."""
import json
import os
import pathlib

import numpy as np
import pytest
import torch

import mixq

# prefix -> (out_features, in_features, rule after "=" or None for hand-made, bias)
LAYERS = {
    "l.fp8_e4m3": (96, 160, "float8_e4m3fn", True),
    "l.fp8_e5m2": (64, 96, "float8_e5m2", False),
    "l.nvfp4": (128, 256, "nvfp4", True),
    "l.nvfp4_pad": (72, 80, "nvfp4", True),
    "l.mxfp8": (64, 256, "mxfp8", True),
    "l.int8": (64, 192, "int8_tensorwise", True),
    "l.int8_convrot": (96, 256, "int8_tensorwise:convrot=true,convrot_groupsize=64", True),
    "l.w4a4": (64, 256, "convrot_w4a4:convrot_groupsize=64", False),
    "l.w4a8": (48, 256, "asym_w4a8_int8:group_size=16,convrot_groupsize=64", True),
    "l.awq": (64, 128, "awq_w4a16:group_size=64", True),
    "l.svdquant": (64, 128, None, True),
    "l.float": (48, 64, "keep", True),
}


def svdquant_tensors(prefix, n, k, rank=8, seed=5):
    """A natural-layout svdquant_w4a4 layer (spec: signed int4 codes in
    [-7, 7], low nibble = even k; scales [K/64, N]; proj_down [K, R];
    proj_up [N, R]; smooth [K])."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(-7, 8, size=(n, k)).astype(np.int8)
    lo, hi = codes[:, 0::2] & 0x0F, codes[:, 1::2] & 0x0F
    packed = (lo | (hi << 4)).astype(np.uint8).view(np.int8)
    bf16 = lambda a: torch.from_numpy(a.astype(np.float32)).to(torch.bfloat16)
    return {
        f"{prefix}.weight": torch.from_numpy(packed),
        f"{prefix}.weight_scale": bf16(rng.uniform(0.002, 0.01, size=(k // 64, n))),
        f"{prefix}.weight_proj_down": bf16(rng.standard_normal((k, rank)) * 0.05),
        f"{prefix}.weight_proj_up": bf16(rng.standard_normal((n, rank)) * 0.05),
        f"{prefix}.weight_smooth_factor": bf16(rng.uniform(0.5, 2.0, size=k)),
        f"{prefix}.comfy_quant": torch.tensor(list(json.dumps({"format": "svdquant_w4a4"}).encode()), dtype=torch.uint8),
    }


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("mixq-torch")


@pytest.fixture(scope="session")
def mixed(workdir):
    """(path of the mixed checkpoint, {prefix: (n, k, format or None, bias)})."""
    gen = torch.Generator().manual_seed(0)
    floats = {}
    for prefix, (n, k, rule, bias) in LAYERS.items():
        if rule is None:
            continue
        floats[f"{prefix}.weight"] = torch.randn(n, k, generator=gen) * 0.05
        if bias:
            floats[f"{prefix}.bias"] = torch.randn(n, generator=gen) * 0.1
    source = workdir / "float.safetensors"
    mixq.save_file(source, floats)
    quantized = workdir / "quantized.safetensors"
    rules = [f"{p}={r}" for p, (_, _, r, _) in LAYERS.items() if r is not None]
    mixq.quantize(source, quantized, rules=rules)
    # Append the hand-made SVDQuant layer: copy every tensor into one new file.
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(quantized))
    n, k, _, _ = LAYERS["l.svdquant"]
    tensors |= svdquant_tensors("l.svdquant", n, k)
    tensors["l.svdquant.bias"] = torch.randn(n, generator=gen) * 0.1
    path = workdir / "mixed.safetensors"
    save_file({name: t.contiguous() for name, t in tensors.items()}, str(path))
    formats = {p: (n, k, None if r in (None, "keep") else r.split(":")[0], b) for p, (n, k, r, b) in LAYERS.items()}
    formats["l.svdquant"] = (n, k, "svdquant_w4a4", True)
    return path, formats


@pytest.fixture(scope="session")
def mixq_cli():
    cli = os.environ.get("MIXQ_CLI", str(pathlib.Path(__file__).resolve().parents[2] / "build/release/bin/mixq"))
    assert pathlib.Path(cli).is_file(), f"no mixq binary at {cli} (set MIXQ_CLI)"
    return cli
