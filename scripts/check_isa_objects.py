#!/usr/bin/env python3
"""No kernel file's object code uses an instruction beyond its instruction set.

`check_isa_objects.py [--weak-functions] OBJECT_DIR` disassembles (objdump
-d) every *.<isa>.cpp.o under OBJECT_DIR (a target's CMakeFiles/<target>.dir, whose tree mirrors the
source tree) and fails on an instruction that the run-time check before
its call does not cover (CMakeLists.txt, MIXQ_ISA_FLAGS_*):
  avx2        no AVX-VNNI (vpdpbusd/vpdpwssd), no AVX-512 (zmm, mask registers)
  avxvnni     no AVX-512
  avx512      no AVX-512 VBMI (vpermb, vpermi2b, vpermt2b, vpmultishiftqb)
  avx512vbmi  anything of its flags
A compiler may use any enabled instruction anywhere in a file: clang turns
vpmaddwd + vpaddd into vpdpwssd when AVX-VNNI is on, which faults on AVX2
CPUs without it.

With --weak-functions (the optimised build: at -O0 / -O1 and under the
sanitizers nearly every inline function is compiled out of line, so the
rule would list the whole library) it also fails on a weak function (nm
type W: an inline function or template instance the file compiled out of
line) in such an object whose code holds a VEX or EVEX instruction. Every file that uses an inline function emits such
a copy, and the linker keeps one of them for every caller: a copy compiled
for AVX-512 then runs on AVX2 callers too (a vector<vector<int64_t>>::assign
from float_gemm.avx512.cpp stopped the AVX2 path with SIGILL), one compiled
for AVX2 on baseline callers. The fix is to keep such functions out of line
in a baseline file (as mixq::Error's constructor), or always inlined (as
mixq::fail).

Exits 1 listing each object and the first offending line.
"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent

VNNI = r"\bvpdp(bus|ws)ds?\b"
AVX512 = r"%zmm|%k[1-7]\b"
VBMI = r"\bvperm[it]?2?b\b|\bvpmultishiftqb\b"
FORBIDDEN = {
    "avx2": [VNNI, AVX512],
    "avxvnni": [AVX512],
    "avx512": [VBMI],
    "avx512vbmi": [],
}


# Legacy prefixes that may precede a VEX (c4, c5) or EVEX (62) byte.
LEGACY_PREFIXES = {"66", "f2", "f3", "2e", "3e", "26", "64", "65", "36", "f0"}


def vector_encoded_weak_function(obj: pathlib.Path, text: str) -> str | None:
    """The first weak function of obj (disassembled in `text`, raw bytes
    shown) holding a VEX / EVEX instruction, with that instruction, or None."""
    nm = subprocess.run(["nm", "--defined-only", str(obj)], check=True, capture_output=True, text=True).stdout
    weak = {line.split()[-1] for line in nm.splitlines() if len(line.split()) == 3 and line.split()[1] == "W"}
    if not weak:
        return None
    current = None
    for line in text.splitlines():
        head = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if head:
            current = head.group(1)
            continue
        fields = line.split("\t")
        if current not in weak or len(fields) < 3:  # not an instruction's first line
            continue
        code = fields[1].split()
        while code and code[0] in LEGACY_PREFIXES:
            code = code[1:]
        if code and code[0] in ("c4", "c5", "62"):
            demangled = subprocess.run(["c++filt", current], capture_output=True, text=True).stdout.strip()
            return f"{demangled}: {fields[2].strip()}"
    return None


def main() -> int:
    args = sys.argv[1:]
    weak_functions = "--weak-functions" in args
    args = [a for a in args if a != "--weak-functions"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    top = pathlib.Path(args[0])
    # A renamed source leaves its old object behind: judge only current ones.
    objects = [p for p in sorted(top.rglob("*.cpp.o"))
               if p.name.split(".")[-3] in FORBIDDEN
               and (ROOT / p.relative_to(top).with_suffix("")).exists()]
    if not objects:
        print(f"check_isa_objects: no *.<isa>.cpp.o under {args[0]}", file=sys.stderr)
        return 1
    bad = 0
    for obj in objects:
        isa = obj.name.split(".")[-3]
        # Raw bytes shown (the weak-function rule reads the encoding); the
        # patterns below match mnemonics and registers only.
        text = subprocess.run(["objdump", "-d", str(obj)], check=True, capture_output=True, text=True).stdout
        for pattern in FORBIDDEN[isa]:
            hit = re.search(r"^.*(" + pattern + r").*$", text, re.M)
            if hit:
                print(f"{obj}: {isa} file uses {hit.group(1)!r}: {hit.group(0).strip()}")
                bad += 1
                break
        weak = vector_encoded_weak_function(obj, text) if weak_functions else None
        if weak:
            print(f"{obj}: a weak function with {isa} code, which the linker may keep for other callers: {weak}")
            bad += 1
    print(f"check_isa_objects: {len(objects)} objects, {bad} with instructions beyond their set or in a weak function")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
