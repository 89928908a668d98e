#!/usr/bin/env python3
"""No kernel file's object code uses an instruction beyond its instruction set.

`check_isa_objects.py OBJECT_DIR` disassembles (objdump -d) every *.<isa>.cpp.o
under OBJECT_DIR (a target's CMakeFiles/<target>.dir, whose tree mirrors the
source tree) and fails on an instruction that the run-time check before
its call does not cover (CMakeLists.txt, MIXQ_ISA_FLAGS_*):
  avx2        no AVX-VNNI (vpdpbusd/vpdpwssd), no AVX-512 (zmm, mask registers)
  avxvnni     no AVX-512
  avx512      no AVX-512 VBMI (vpermb, vpermi2b, vpermt2b, vpmultishiftqb)
  avx512vbmi  anything of its flags
A compiler may use any enabled instruction anywhere in a file: clang turns
vpmaddwd + vpaddd into vpdpwssd when AVX-VNNI is on, which faults on AVX2
CPUs without it. Exits 1 listing each object and the first offending line.
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


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    top = pathlib.Path(sys.argv[1])
    # A renamed source leaves its old object behind: judge only current ones.
    objects = [p for p in sorted(top.rglob("*.cpp.o"))
               if p.name.split(".")[-3] in FORBIDDEN
               and (ROOT / p.relative_to(top).with_suffix("")).exists()]
    if not objects:
        print(f"check_isa_objects: no *.<isa>.cpp.o under {sys.argv[1]}", file=sys.stderr)
        return 1
    bad = 0
    for obj in objects:
        isa = obj.name.split(".")[-3]
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(obj)],
                              check=True, capture_output=True, text=True).stdout
        for pattern in FORBIDDEN[isa]:
            hit = re.search(r"^.*(" + pattern + r").*$", text, re.M)
            if hit:
                print(f"{obj}: {isa} file uses {hit.group(1)!r}: {hit.group(0).strip()}")
                bad += 1
                break
    print(f"check_isa_objects: {len(objects)} objects, {bad} with instructions beyond their set")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
