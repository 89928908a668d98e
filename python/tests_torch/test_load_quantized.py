"""mixq.torch.load_quantized: checkpoints into models, keys, bad input."""
import gc
import json
import pathlib

import pytest
import torch

import mixq
import mixq.torch


class Block(torch.nn.Module):
    def __init__(self, dim=128, hidden=256):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.fc1 = torch.nn.Linear(dim, hidden)
        self.fc2 = torch.nn.Linear(hidden, dim)
        self.register_buffer("gain", torch.ones(dim))

    def forward(self, x):
        return x + self.gain * self.fc2(torch.nn.functional.gelu(self.fc1(self.norm(x))))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(64, 128)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.out = torch.nn.Linear(128, 40)

    def forward(self, x):
        x = self.proj(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


RULES = ["blocks.0.fc1=nvfp4", "blocks.0.fc2=int8_tensorwise:convrot=true,convrot_groupsize=256",
         "blocks.1.fc1=mxfp8", "blocks.1.fc2=float8_e4m3fn", "out=awq_w4a16:group_size=64"]


def float_net(seed=0):
    torch.manual_seed(seed)
    net = Net()
    with torch.no_grad():
        for b in net.blocks:
            b.norm.weight.uniform_(0.5, 1.5)
            b.gain.uniform_(0.5, 1.5)
    return net.eval()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(float net, float checkpoint, quantized checkpoint with prefix "model.")"""
    d = tmp_path_factory.mktemp("load")
    net = float_net()
    source = d / "float.safetensors"
    mixq.save_file(source, {"model." + k: v for k, v in net.state_dict().items()} | {"vae.w": torch.ones(3)})
    out = d / "mixed.safetensors"
    mixq.quantize(source, out, rules=["model." + r for r in RULES])
    return net, source, out


def reference(net, path, x):
    """The same network evaluated layer by layer with mixq.Linear.forward on
    NumPy arrays and torch for the rest: what load_quantized must reproduce."""
    ckpt = mixq.open(path)

    def lin(name, h):
        y = ckpt.linear("model." + name).forward(h.reshape(-1, h.shape[-1]).numpy())
        return torch.from_numpy(y).reshape(*h.shape[:-1], -1)

    h = lin("proj", x)
    for i, b in enumerate(net.blocks):
        t = lin(f"blocks.{i}.fc1", b.norm(h))
        h = h + b.gain * lin(f"blocks.{i}.fc2", torch.nn.functional.gelu(t))
    return lin("out", h)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_loads_into_a_fresh_model(files, device):
    net, _, path = files
    with torch.device(device):
        model = Net()
    missing, unexpected = mixq.torch.load_quantized(model, path, prefix="model.")
    assert (missing, unexpected) == ([], [])
    assert all(isinstance(getattr(model, n) if "." not in n else model.get_submodule(n), mixq.torch.Linear)
               for n in ("proj", "out", "blocks.0.fc1", "blocks.1.fc2"))
    assert model.get_submodule("blocks.0.fc1").format == "nvfp4"
    assert model.get_submodule("proj").format is None  # unquantized layers run on mixq too
    # norms and buffers were copied (and materialized from meta)
    assert torch.equal(model.blocks[1].norm.weight, net.blocks[1].norm.weight)
    assert torch.equal(model.blocks[0].gain, net.blocks[0].gain)
    x = torch.randn(3, 5, 64, generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        y = model(x)
        ref = reference(net, path, x)
    assert torch.equal(y, ref)


def test_file_is_held_only_by_in_place_layers(files):
    """The Linears detach from the checkpoint. Those that read their weight in
    place (the INT8 and NVFP4 layers, on the AVX2 / AVX-512 kernels) keep the
    file mapped while they live; once the last of them is gone, so is the
    mapping."""
    _, _, path = files
    model = Net()
    mixq.torch.load_quantized(model, str(path), prefix="model.")
    gc.collect()

    def mapped():
        return str(path) in pathlib.Path("/proc/self/maps").read_text()

    int8, nvfp4 = model.blocks[0].fc2._linear, model.blocks[0].fc1._linear
    assert int8.in_place == (int8.kernel != "ref")
    assert nvfp4.in_place == (nvfp4.kernel != "ref")
    assert mapped() == (int8.in_place or nvfp4.in_place)
    with pytest.raises(mixq.Error, match="cannot dequantize"):
        nvfp4.dequantize()
    del model, int8
    gc.collect()
    assert mapped() == nvfp4.in_place  # the NVFP4 layer alone still holds it
    del nvfp4
    gc.collect()
    assert not mapped()


def test_strict_keys(files):
    _, _, path = files

    class Wider(Net):
        def __init__(self):
            super().__init__()
            self.extra = torch.nn.Linear(4, 4)

    with pytest.raises(mixq.Error, match=r"2 missing key\(s\): extra.bias, extra.weight"):
        mixq.torch.load_quantized(Wider(), path, prefix="model.")
    model = Wider()
    missing, unexpected = mixq.torch.load_quantized(model, path, prefix="model.", strict=False)
    assert missing == ["extra.bias", "extra.weight"] and unexpected == []
    # without the prefix nothing matches: every layer is unexpected, every key missing
    with pytest.raises(mixq.Error, match="unexpected key.*model.blocks.0.fc1.weight"):
        mixq.torch.load_quantized(Net(), path)


def state(model):
    return {k: (type(v), v.clone()) for k, v in model.state_dict().items()} | {
        n: type(m) for n, m in model.named_modules()}


def same_state(a, b):
    return a.keys() == b.keys() and all(
        (va == vb) if not isinstance(va, tuple) else (va[0] is vb[0] and torch.equal(va[1], vb[1]))
        for (ka, va), vb in zip(a.items(), b.values()))


def test_bad_input_leaves_the_model_unchanged(files, tmp_path):
    _, source, path = files
    bad = []

    class Narrow(Net):  # a linear shape that does not match
        def __init__(self):
            super().__init__()
            self.blocks[1].fc1 = torch.nn.Linear(128, 128)
    bad.append((Narrow(), path, r"'model.blocks.1.fc1' is \[256, 128\] \(mxfp8\).*'blocks.1.fc1' is "
                                r"Linear\(in_features=128, out_features=128\)"))

    class NormShape(Net):  # a non-linear tensor with the wrong shape
        def __init__(self):
            super().__init__()
            self.blocks[0].norm = torch.nn.LayerNorm(64)
    bad.append((NormShape(), path, r"'model.blocks.0.norm.(weight|bias)' has shape \[128\].*\[64\]"))

    class Conv(Net):  # a quantized layer whose module is not a Linear
        def __init__(self):
            super().__init__()
            self.blocks[0].fc1 = torch.nn.Conv1d(128, 256, 1)
    bad.append((Conv(), path, "'model.blocks.0.fc1' is nvfp4 but 'blocks.0.fc1' is Conv1d"))

    class Missing(Net):  # a checkpoint layer with no module
        def __init__(self):
            super().__init__()
            del self.blocks[1].fc2
    bad.append((Missing(), path, "unexpected key.*model.blocks.1.fc2.weight"))

    for model, ckpt, message in bad:
        before = state(model)
        with pytest.raises(mixq.Error, match=message):
            mixq.torch.load_quantized(model, ckpt, prefix="model.")
        assert same_state(before, state(model)), type(model).__name__

    with pytest.raises(mixq.Error, match="must be a torch.nn.Module"):
        mixq.torch.load_quantized("model", path)
    with pytest.raises(mixq.Error, match="checkpoint must be a path"):
        mixq.torch.load_quantized(Net(), 42)
    with pytest.raises(mixq.Error):
        mixq.torch.load_quantized(Net(), tmp_path / "absent.safetensors")


def test_sharded_checkpoint(files, tmp_path):
    """An index file and its shards load like the single file."""
    from safetensors.torch import load_file, save_file

    net, _, path = files
    tensors = load_file(str(path))
    names = sorted(tensors)
    shards = {"a.safetensors": names[: len(names) // 2], "b.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, str(tmp_path / shard))
        weight_map |= {k: shard for k in keys}
    index = tmp_path / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(4))
    results = []
    for source in (path, index):
        model = Net()
        mixq.torch.load_quantized(model, source, prefix="model.")
        with torch.no_grad():
            results.append(model(x))
    assert torch.equal(results[0], results[1])


def test_missing_bias_is_kept_and_reported(files, tmp_path):
    """A checkpoint layer without a bias whose module has one: non-strict keeps
    the module's bias (as load_state_dict would) and reports it missing."""
    net, _, _ = files
    sd = {"model." + k: v for k, v in net.state_dict().items() if k != "out.bias"}
    source, out = tmp_path / "f.safetensors", tmp_path / "q.safetensors"
    mixq.save_file(source, sd)
    mixq.quantize(source, out, rules=["model." + r for r in RULES])
    model = Net()
    bias = model.out.bias.detach().clone()
    missing, _ = mixq.torch.load_quantized(model, out, prefix="model.", strict=False)
    assert missing == ["out.bias"]
    x = torch.randn(2, 128, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        plain = mixq.torch.Linear(mixq.open(out).linear("model.out"))(x)
        assert torch.equal(model.out(x), plain + bias)


def test_make_module_hook(files):
    """make_module decides what replaces each nn.Linear (the hook tensor
    parallelism will use)."""
    _, _, path = files
    seen = []

    def make(name, linear, module):
        seen.append((name, linear.prefix, type(module).__name__))
        return mixq.torch.make_linear_module(name, linear, module)

    mixq.torch.load_quantized(Net(), path, prefix="model.", make_module=make)
    assert ("blocks.0.fc1", "model.blocks.0.fc1", "Linear") in seen and len(seen) == 6
