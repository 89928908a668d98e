#!/usr/bin/env python3
"""The layering of src/ holds: no file includes a header of a higher layer.

Layers, lowest first (README's source map lists the same):
  util      thread pool, parallel_for
  numeric   scalar codecs, Hadamard, swizzle, reference quantizers
  io        safetensors reader/writer, shard index, .npy
  kernels   ref/ and SIMD kernels (a sibling of io: sees util and numeric only)
  formats   the format table: bytes on disk
  plan      markers, layers, profiles, TP admission
  linear    the runtime table: Linear objects over the kernels
  quantize, verify   writing and checking checkpoints
  cli       the `mixq` command (public headers, plus documented internals)
Public headers (include/mixq/*.hpp) belong to the layer that implements them.
Exits 1 listing every violation.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
BASE = {"util"}
ALLOWED = {
    "util": BASE,
    "numeric": BASE | {"numeric"},
    "io": BASE | {"numeric", "io"},
    "kernels": BASE | {"numeric", "kernels"},
    "formats": BASE | {"numeric", "io", "formats"},
    "plan": BASE | {"numeric", "io", "formats", "plan"},
    "linear": BASE | {"numeric", "io", "formats", "plan", "kernels", "linear"},
    "quantize": BASE | {"numeric", "io", "formats", "plan", "quantize"},
    "verify": BASE | {"numeric", "io", "formats", "plan", "linear", "verify"},
    # The CLI uses the public API, plus two documented internals: util (the
    # pool) and linear/synthetic_layer.hpp (random layers for `mixq bench`).
    "cli": BASE | {"numeric", "io", "formats", "plan", "linear", "quantize", "verify", "cli"},
}
# Which layer each public header belongs to.
PUBLIC = {
    "error": "util", "escape": "util", "dtype": "util", "tensor": "util", "threads": "util", "version": "util",
    "numeric": "numeric", "block_quant": "numeric",
    "checkpoint": "io", "safetensors_writer": "io", "npy": "io",
    "format": "formats", "layer": "formats", "marker": "formats",
    "plan": "plan", "inspect": "plan", "shard": "plan",
    "linear": "linear", "machine": "kernels",
    "quantize": "quantize", "recipe": "quantize", "tp_shards": "quantize", "verify": "verify",
}
CLI_INTERNALS = {"linear/synthetic_layer.hpp", "util/parallel.hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of_include(path):
    if path.startswith("mixq/"):
        return PUBLIC.get(path[5:].removesuffix(".hpp"), "?")
    return path.split("/", 1)[0]


def main():
    problems = []
    for name in sorted(PUBLIC):
        header = ROOT / "include" / "mixq" / f"{name}.hpp"
        if not header.exists():
            continue
        for inc in INCLUDE.findall(header.read_text()):
            if not inc.startswith("mixq/"):
                problems.append(f"include/mixq/{name}.hpp exposes the internal header {inc}")
            elif layer_of_include(inc) not in ALLOWED[PUBLIC[name]]:
                problems.append(f"include/mixq/{name}.hpp ({PUBLIC[name]}) includes {inc} ({layer_of_include(inc)})")
    for header in sorted((ROOT / "include" / "mixq").glob("*.hpp")):
        if header.stem not in PUBLIC:
            problems.append(f"{header.relative_to(ROOT)} has no layer in scripts/check_layers.py")
    for source in sorted((ROOT / "src").rglob("*.[ch]pp")):
        layer = source.relative_to(ROOT / "src").parts[0]
        if layer not in ALLOWED:
            problems.append(f"{source.relative_to(ROOT)}: folder src/{layer} has no layer")
            continue
        for inc in INCLUDE.findall(source.read_text()):
            target = layer_of_include(inc)
            if layer == "cli" and (inc.startswith("mixq/") or inc in CLI_INTERNALS):
                continue  # the CLI may use the whole public API
            if target == "?":
                problems.append(f"{source.relative_to(ROOT)} includes unknown header {inc}")
            elif target not in ALLOWED[layer]:
                problems.append(f"{source.relative_to(ROOT)} ({layer}) includes {inc} ({target})")
    for p in problems:
        print(p)
    print(f"layering: {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
