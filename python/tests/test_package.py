"""The installed package: type stubs match the extension, the README example
runs."""
import ast
import os
import pathlib
import subprocess
import sys

import pytest

import mixq
import mixq._mixq as ext

PYTHON_DIR = pathlib.Path(__file__).resolve().parents[1]


def stub_tree():
    stub = pathlib.Path(ext.__file__).with_name("_mixq.pyi")
    assert stub.is_file(), "the stubs must be installed next to the extension"
    assert stub.with_name("py.typed").is_file()
    return ast.parse(stub.read_text())


def public(names):
    return {n for n in names if not n.startswith("_") or n in ("__call__",)}


def test_stubs_declare_exactly_the_module():
    tree = stub_tree()
    declared = {node.name for node in tree.body
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_")}
    assert declared == public(dir(ext)) - {"annotations"}
    assert set(mixq.__all__) == declared


def test_stub_classes_declare_exactly_their_members():
    for node in stub_tree().body:
        if not isinstance(node, ast.ClassDef) or node.name.startswith("_") or node.name == "Error":
            continue
        declared = {item.name for item in node.body if isinstance(item, ast.FunctionDef)}
        actual = {name for name in vars(getattr(ext, node.name)) if not name.startswith("__")}
        actual |= {"__call__"} if "__call__" in vars(getattr(ext, node.name)) else set()
        assert declared == actual, node.name


def test_module_has_the_nanobind_checks_the_runner_asked_for():
    """scripts/python_test.sh builds the module with nanobind's GIL and
    reference-count assertions (MIXQ_PYTHON_CHECKS=ON unless told OFF) and
    says so in MIXQ_EXPECT_CHECKS: the suite must run on that module."""
    expected = os.environ.get("MIXQ_EXPECT_CHECKS")
    if expected is None:
        pytest.skip("not run by scripts/python_test.sh")
    assert ext._checks is (expected == "ON")


def test_readme_example_runs(tmp_path):
    # Run a copy: next to the original, `import mixq` would find the source
    # folder python/mixq (no extension there) before the installed package.
    example = tmp_path / "example.py"
    example.write_text((PYTHON_DIR / "README-example.py").read_text())
    result = subprocess.run([sys.executable, str(example)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.startswith("formats:") and "nvfp4" in line and "int8_tensorwise" in line
               for line in lines), result.stdout
    assert "comfyui accepts: True" in lines, result.stdout
    # y against a float linear over the dequantized weight: NVFP4's activation
    # rounding alone, measured 0.331 (seeded data, K = 256, |y| up to ~3).
    error = [line for line in lines if line.startswith("max |y - x·Wᵀ - b|")]
    assert error and float(error[0].split("=")[1]) < 0.5, result.stdout
