"""One rank of test_tp_flux.py's tensor-parallel run, launched by
`torchrun --nproc-per-node 2` (gloo, CPU). For every checkpoint named on the
command line it builds the small diffusers FluxTransformer2DModel on the meta
device, loads it with mixq.torch.load_quantized(..., tp_group=WORLD), runs
the forward on the test's inputs and writes, per rank, the output and what
the rank holds: heap bytes taken by the load (glibc mallinfo2: every packed
weight, bias and copied tensor is a malloc'd block), the bytes of the
replicated (non-linear) tensors, RSS, and the module kinds.

Also imported by the test for CONFIG, inputs() and heap_bytes()."""
import ctypes
import faulthandler
import gc
import json
import sys
import time
import weakref

import torch
# Before init_process_group(), as a user's script imports it: diffusers
# imports torch._dynamo, which imports torch.distributed.nn.functional, whose
# defaults (group=group.WORLD) are evaluated then. Imported after, they held
# the default group past destroy_process_group(), and the gloo group, alive at
# interpreter exit, aborted about one launch in six there (docs/TP.md).
from diffusers import FluxTransformer2DModel

CONFIG = dict(patch_size=1, in_channels=64, num_layers=2, num_single_layers=2, attention_head_dim=128,
              num_attention_heads=4, joint_attention_dim=256, pooled_projection_dim=128,
              guidance_embeds=False, axes_dims_rope=(16, 56, 56))
IMG, TXT = 64, 16  # 8x8 latent tokens, 16 text tokens


def new_model(device="meta"):
    with torch.device(device):
        return FluxTransformer2DModel(**CONFIG).eval()


def inputs():
    g = torch.Generator().manual_seed(1)
    ys, xs = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    img_ids = torch.stack((torch.zeros(IMG), ys.flatten().float(), xs.flatten().float()), dim=-1)
    return dict(hidden_states=torch.randn(1, IMG, 64, generator=g),
                encoder_hidden_states=torch.randn(1, TXT, 256, generator=g),
                pooled_projections=torch.randn(1, 128, generator=g),
                timestep=torch.tensor([0.6]), img_ids=img_ids, txt_ids=torch.zeros(TXT, 3), return_dict=False)


def forward(model):
    with torch.inference_mode():
        return model(**inputs())[0].float()


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def heap_bytes() -> int:
    """Bytes in use in glibc's heap: arenas (uordblks) plus mmapped blocks (hblkhd)."""
    gc.collect()
    f = ctypes.CDLL(None).mallinfo2
    f.restype = _MallInfo2
    info = f()
    return int(info.uordblks + info.hblkhd)


def rss() -> dict:
    out = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def replicated_bytes(model) -> int:
    """Bytes of the tensors every rank holds whole: the model's own
    parameters and buffers (norms, ...); mixq's modules keep theirs in C++."""
    return sum(t.numel() * t.element_size() for t in model.state_dict().values() if not t.is_meta)


def in_place_bytes(model) -> int:
    """Stored bytes of the layers that read the checkpoint in place: held in
    the mapped file (page cache), not on the heap."""
    return sum(m._linear.stored_bytes for m in model.modules()
               if getattr(m, "_linear", None) is not None and m._linear.in_place)


def load(path, tp_group=None):
    """(model, stats) after load_quantized; the heap delta is taken around it."""
    import mixq.torch

    model = new_model()
    before, start = heap_bytes(), time.perf_counter()
    keys = mixq.torch.load_quantized(model, path, tp_group=tp_group)
    seconds = time.perf_counter() - start
    assert keys == ([], []), keys
    stats = dict(heap_bytes=heap_bytes() - before, replicated_bytes=replicated_bytes(model),
                 in_place_bytes=in_place_bytes(model), load_s=seconds)
    kinds = {}
    inner = {id(m.local) for m in model.modules() if hasattr(m, "local")}  # the wrappers' own Linear
    for module in model.modules():
        name = type(module).__name__
        if module.__module__.startswith("mixq") and id(module) not in inner:
            key = name + (f"(gather={module.gather_output})" if name == "ColumnParallelLinear" else
                          f"(input_is_parallel={module.input_is_parallel})" if name == "RowParallelLinear" else "")
            kinds[key] = kinds.get(key, 0) + 1
    stats["modules"] = kinds
    return model, stats


def stage(rank, what):
    """One line per step on stderr: a crashed launch shows how far each rank got."""
    print(f"tp_flux_worker rank {rank}: {what}", file=sys.stderr, flush=True)


def main(out_dir, paths):
    import torch.distributed as dist

    faulthandler.enable()  # a fatal signal prints every thread's Python stack
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    stage(rank, "process group ready")
    # Written before mixq runs: the test tells a launch that failed in
    # torch.distributed's start-up from one that failed in mixq.
    open(f"{out_dir}/ready-rank{rank}", "w").close()
    results = {}
    for name, path in paths:
        model, stats = load(path, dist.group.WORLD)
        stage(rank, f"loaded {name}")
        start = time.perf_counter()
        y = forward(model)
        stage(rank, f"ran {name}")
        stats["forward_s"] = time.perf_counter() - start
        stats.update(rss())
        results[name] = stats
        torch.save(y, f"{out_dir}/{name}-rank{rank}.pt")
        del model
    with open(f"{out_dir}/stats-rank{rank}.json", "w") as f:
        json.dump(results, f)
    world = weakref.ref(dist.group.WORLD)
    dist.destroy_process_group()
    gc.collect()
    # Nothing of mixq's or the model's keeps the group: a group alive into
    # interpreter shutdown can abort the rank there, after its work is done.
    if world() is not None:
        sys.exit(f"tp_flux_worker rank {rank}: the process group outlived destroy_process_group() "
                 f"({sys.getrefcount(world()) - 1} references)")
    stage(rank, "done")


if __name__ == "__main__":
    # worker.py OUT_DIR NAME=PATH ...
    main(sys.argv[1], [arg.split("=", 1) for arg in sys.argv[2:]])
