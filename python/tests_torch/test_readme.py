"""The README's "Run a diffusers model with mixq" and "Use mixq under
ComfyUI" examples: the files are quoted verbatim in README.md, and they run."""
import pathlib
import subprocess
import sys

import torch

REPO = pathlib.Path(__file__).resolve().parents[2]


def quoted(path: pathlib.Path) -> str:
    text = path.read_text()
    assert f"```python\n{text}```" in (REPO / "README.md").read_text(), f"README.md must quote {path.name} verbatim"
    return text


def test_diffusers_example_runs(tmp_path):
    # Run a copy in a scratch folder (next to the original, `import mixq`
    # would find the source folder python/mixq before the installed package),
    # with the repository's recipes where the README's command finds them.
    example = tmp_path / "example.py"
    example.write_text(quoted(REPO / "python/README-diffusers-example.py"))
    (tmp_path / "recipes").symlink_to(REPO / "recipes")
    result = subprocess.run([sys.executable, str(example)], cwd=tmp_path, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("format=nvfp4" in line and "kernel=" in line for line in lines), result.stdout
    error = float(next(l for l in lines if l.startswith("relative error vs float:")).split(":")[1])
    # measured 0.0069 (the NVFP4 MLPs' error, cf. test_flux_end_to_end); bound 3x
    assert 0 < error < 0.021, result.stdout


def test_comfyui_node_registers_the_backend():
    """Executing the custom node's __init__.py registers `mixq`, and a
    comfy-kitchen quantized linear then runs on it."""
    import comfy_kitchen as ck
    import torch.nn.functional as F
    from comfy_kitchen.tensor import QuantizedTensor

    import mixq.comfy_kitchen as mck
    from mixq.comfy_kitchen import backend

    namespace = {}
    exec(compile(quoted(REPO / "python/README-comfyui-node.py"), "__init__.py", "exec"), namespace)
    try:
        assert namespace["NODE_CLASS_MAPPINGS"] == {}
        assert "int8_linear" in ck.list_backends()["mixq"]["capabilities"]
        w = QuantizedTensor.from_float(torch.randn(32, 64) * 0.05, "TensorWiseINT8Layout", is_weight=True)
        builds = backend.cache.builds
        F.linear(torch.randn(3, 64), w)
        assert backend.cache.builds == builds + 1
    finally:
        mck.unregister()
