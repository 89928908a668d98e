"""Fixtures for the mixq Python tests: a small mixed checkpoint quantized by
mixq.quantize from random float weights, and the `mixq` CLI ($MIXQ_CLI) to
compare against."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import mixq

# prefix -> (out_features, in_features, rule after "=", has bias)
LAYERS = {
    "blocks.0.attn.qkv": (96, 256, "int8_tensorwise:convrot=true,convrot_groupsize=64", True),
    "blocks.0.attn.out": (64, 256, "convrot_w4a4:convrot_groupsize=64", False),
    "blocks.0.mlp.fc1": (128, 64, "nvfp4", True),
    "blocks.0.mlp.fc2": (64, 128, "mxfp8", True),
    "blocks.1.mlp.fc1": (64, 64, "float8_e4m3fn", True),
    "blocks.1.mlp.fc2": (32, 128, "asym_w4a8_int8:group_size=16,convrot_groupsize=64", True),
    "blocks.1.attn.out": (48, 64, "keep", True),
}
# The format each rule gives (None: left unquantized).
FORMATS = {p: (None if r == "keep" else r.split(":")[0]) for p, (_, _, r, _) in LAYERS.items()}


def float_tensors(seed=0):
    rng = np.random.default_rng(seed)
    tensors = {}
    for prefix, (n, k, _, bias) in LAYERS.items():
        tensors[prefix + ".weight"] = (rng.standard_normal((n, k)) * 0.05).astype(np.float32)
        if bias:
            tensors[prefix + ".bias"] = (rng.standard_normal(n) * 0.1).astype(np.float32)
    tensors["norm.weight"] = np.ones(64, np.float32)
    return tensors


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("mixq")


@pytest.fixture(scope="session")
def source(workdir):
    """(path, tensors) of the float checkpoint."""
    tensors = float_tensors()
    path = workdir / "float.safetensors"
    mixq.save_file(path, tensors, {"origin": "python tests"})
    return path, tensors


@pytest.fixture(scope="session")
def mixed(workdir, source):
    """(path, quantize report) of the mixed checkpoint."""
    path = workdir / "mixed.safetensors"
    rules = [f"{prefix}={rule}" for prefix, (_, _, rule, _) in LAYERS.items()]
    report = mixq.quantize(source[0], path, rules=rules)
    return path, report


@pytest.fixture(scope="session")
def ckpt(mixed):
    return mixq.open(mixed[0])


class Cli:
    """Runs the `mixq` binary named by $MIXQ_CLI."""

    def __init__(self, path):
        self.path = path

    def run(self, *args, check=True):
        result = subprocess.run([self.path, *map(str, args)], capture_output=True, text=True)
        if check and result.returncode != 0:
            raise AssertionError(f"mixq {' '.join(map(str, args))} failed ({result.returncode}): "
                                 f"{result.stderr}")
        return result

    def json(self, *args):
        return json.loads(self.run(*args).stdout)


@pytest.fixture(scope="session")
def cli():
    path = os.environ.get("MIXQ_CLI")
    if not path or not pathlib.Path(path).is_file():
        pytest.fail("set MIXQ_CLI to the mixq binary (scripts/python_test.sh does)")
    return Cli(path)
