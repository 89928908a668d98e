"""mixq.open, Checkpoint.inspect / plan / prefixes, mixq.quantize, mixq.save_file."""
import pathlib
import shutil

import numpy as np
import pytest

import mixq
from conftest import FORMATS, LAYERS


def test_quantize_report_lists_every_layer(mixed):
    path, report = mixed
    assert [pathlib.Path(f).resolve() for f in report["files"]] == [path.resolve()]
    formats = {layer["prefix"]: layer["format"] for layer in report["layers"]}
    assert formats == {p: (f or "keep") for p, f in FORMATS.items()}
    for layer in report["layers"]:
        n, k, _, _ = LAYERS[layer["prefix"]]
        assert (layer["out_features"], layer["in_features"]) == (n, k)
        if layer["format"] != "keep":
            assert layer["marker"]["format"] == layer["format"]
            assert 0 < layer["output_bytes"] < layer["source_bytes"]
    assert report["output_bytes"] < report["source_bytes"]


def test_open_accepts_str_path_list_and_folder(mixed, tmp_path):
    path = mixed[0]
    folder = tmp_path / "shards"
    folder.mkdir()
    shutil.copy(path, folder / "model.safetensors")
    for spelling in (str(path), path, [path], (str(path),), folder):
        ckpt = mixq.open(spelling)
        assert ckpt.prefixes() == sorted(LAYERS)
    assert mixq.open([path]).paths == [str(path)]
    assert "mixq.Checkpoint" in repr(mixq.open(path))


def test_inspect_is_the_cli_json(ckpt, mixed, cli):
    ours = ckpt.inspect()
    assert ours == cli.json("inspect", mixed[0], "--json")
    layers = {layer["prefix"]: layer for layer in ours["layers"]}
    assert set(layers) == set(LAYERS)
    for prefix, fmt in FORMATS.items():
        assert layers[prefix]["format"] == fmt
        assert layers[prefix]["out_features"] == LAYERS[prefix][0]
        assert layers[prefix]["in_features"] == LAYERS[prefix][1]
    assert layers["blocks.0.attn.qkv"]["params"]["convrot"] is True
    assert layers["blocks.0.attn.qkv"]["params"]["convrot_groupsize"] == 64
    assert [t["name"] for t in ours["other_tensors"]] == ["norm.weight"]


def test_plan_is_the_cli_json(ckpt, mixed, cli):
    plan = ckpt.plan()
    assert plan == cli.json("plan", mixed[0], "--json")
    assert plan["accepted"] is True and plan["error"] is None
    assert plan["profile"] == "comfyui" and plan["tp"] == 1
    assert {layer["prefix"] for layer in plan["layers"]} == set(LAYERS)


def test_rejected_plan_raises_the_cli_message(ckpt, mixed, cli):
    # SGLang's generic resolver has no MXFP8 / FP8+INT8 mixture like this one.
    result = cli.run("plan", mixed[0], "--profile", "sglang", check=False)
    assert result.returncode == 1
    with pytest.raises(mixq.Error) as error:
        ckpt.plan(profile="sglang")
    message = str(error.value)
    assert message and message in result.stderr


def test_plan_rejects_a_tp_degree_a_layer_cannot_split(ckpt, mixed, cli):
    # tp=7 divides no layer's N (96, 64, 128, 32, 48).
    result = cli.run("plan", mixed[0], "--tp", "7", check=False)
    assert result.returncode == 1
    with pytest.raises(mixq.Error) as error:
        ckpt.plan(tp=7)
    assert str(error.value) in result.stderr


def test_save_file_round_trips_through_open(tmp_path):
    path = tmp_path / "t.safetensors"
    tensors = {
        "a": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b": np.arange(6, dtype=np.float16).reshape(2, 3).T,  # not C-contiguous
        "c": np.array([1, -2, 3], np.int8),
        "d": np.zeros((0, 5), np.float64),
    }
    mixq.save_file(path, tensors, {"k": "v"})
    files = mixq.open(path).inspect()["files"]
    assert files[0]["tensors"] == 4
    other = {t["name"]: t for t in mixq.open(path).inspect()["other_tensors"]}
    assert other["a"]["dtype"] == "F32" and other["a"]["shape"] == [3, 4]
    assert other["b"]["dtype"] == "F16" and other["b"]["shape"] == [3, 2]
    assert other["c"]["dtype"] == "I8"
    # Bytes are written in C order: read them back raw.
    raw = path.read_bytes()
    header_len = int.from_bytes(raw[:8], "little")
    import json
    header = json.loads(raw[8:8 + header_len])
    assert header["__metadata__"] == {"k": "v"}
    begin, end = header["b"]["data_offsets"]
    data = np.frombuffer(raw[8 + header_len + begin:8 + header_len + end], np.float16)
    np.testing.assert_array_equal(data.reshape(3, 2), tensors["b"])
