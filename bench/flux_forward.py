"""Whole-model benchmark: a diffusers FluxTransformer2DModel forward on the CPU.

The FLUX.1 transformer shape (hidden 3072 = 24 heads x 128, joint attention
4096, pooled 768) with --double / --single blocks and random weights, stored
as a bf16 checkpoint, quantized with recipes/flux-nvfp4-mlp-int8-convrot-attn.json
by `mixq quantize` (--recipe: another recipe, e.g. recipes/flux-fp8.json), then one forward (1024 image + 256 text tokens, batch 1)
timed for each of:

  mixq          mixq.torch.load_quantized, float32 activations
  mixq-bf16     the same with the model in bfloat16 (its unquantized parameters and the
                activations; the quantized layers compute from float32 and round back)
  ck-eager      the same checkpoint as stock ComfyUI runs it on a CPU: comfy-kitchen
                layouts (mixq.comfy_kitchen.load_layouts) on comfy-kitchen's eager
                backend, NVFP4 (and MXFP8, FP8) weights dequantized at every call
                as ComfyUI does for formats the device cannot compute natively
  ck-mixq       the same layouts through the `mixq` comfy-kitchen backend
  torch-f32     the float model (bf16 checkpoint cast to float32)
  torch-bf16    the float model in bfloat16

Each configuration runs in its own process (so peak RSS is its own) with
--threads threads for torch and mixq; `baseline` is a process that only
imports torch and diffusers and builds the model on the meta device. The
table gives the median forward time of --repeat runs after one warm-up, the
speed-ups, and RSS after loading (VmRSS) and its peak so far (VmHWM).

    build/venv/bin/python bench/flux_forward.py --double 2 --single 4
    build/venv/bin/python bench/flux_forward.py --configs mixq-bf16 --time-linears   # + time in mixq's linears
    make bench-model BENCH_MODEL_ARGS="--double 2 --single 4"
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/flux-nvfp4-mlp-int8-convrot-attn.json"  # the default --recipe
CONFIGS = ["baseline", "mixq", "mixq-bf16", "ck-eager", "ck-mixq", "torch-f32", "torch-bf16"]


def flux_config(args):
    return dict(patch_size=1, in_channels=64, num_layers=args.double, num_single_layers=args.single,
                attention_head_dim=128, num_attention_heads=args.hidden // 128, joint_attention_dim=4096,
                pooled_projection_dim=768, guidance_embeds=False, axes_dims_rope=(16, 56, 56))


def memory() -> dict:
    status = pathlib.Path("/proc/self/status").read_text().splitlines()
    values = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in status if line.startswith("Vm")}
    return {"rss": values["VmRSS"], "hwm": values["VmHWM"]}


def inputs(args, dtype):
    import torch

    g = torch.Generator().manual_seed(0)
    side = int(args.image_tokens ** 0.5)
    ys, xs = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    img_ids = torch.stack((torch.zeros(side * side), ys.flatten().float(), xs.flatten().float()), dim=-1)
    return dict(hidden_states=torch.randn(1, side * side, 64, generator=g).to(dtype),
                encoder_hidden_states=torch.randn(1, args.text_tokens, 4096, generator=g).to(dtype),
                pooled_projections=torch.randn(1, 768, generator=g).to(dtype),
                timestep=torch.tensor([0.6], dtype=dtype), img_ids=img_ids,
                txt_ids=torch.zeros(args.text_tokens, 3), return_dict=False)


def worker(args) -> dict:
    """One configuration in this process: load, then time forwards."""
    import torch

    torch.set_num_threads(args.threads)
    from diffusers import FluxTransformer2DModel

    import mixq
    import mixq.comfy_kitchen as mck
    import mixq.torch

    mixq.set_num_threads(args.threads)
    work = pathlib.Path(args.dir)
    with torch.device("meta"):
        model = FluxTransformer2DModel(**flux_config(args)).eval()
    start = time.perf_counter()
    dtype = torch.float32
    config = args.worker
    if config == "baseline":
        return {"config": config, **memory()}
    if config in ("mixq", "mixq-bf16"):
        if config == "mixq-bf16":
            dtype = torch.bfloat16
            model = model.to(dtype)  # on meta: load_quantized casts the other tensors to it
        mixq.torch.load_quantized(model, work / "flux-mixed.safetensors")
    elif config == "ck-eager":
        mck.load_layouts(model, work / "flux-mixed.safetensors", compute_dtype=torch.float32,
                         emulate=mck.COMFYUI_CPU_EMULATED)
    elif config == "ck-mixq":
        mck.load_layouts(model, work / "flux-mixed.safetensors", compute_dtype=torch.float32)
        mck.register()
    else:
        from safetensors.torch import load_file

        dtype = torch.float32 if config == "torch-f32" else torch.bfloat16
        state = {k: v.to(dtype) for k, v in load_file(str(work / "flux-bf16.safetensors")).items()}
        model.load_state_dict(state, assign=True)
        del state
    load_s = time.perf_counter() - start
    after_load = memory()
    x = inputs(args, dtype)
    # --time-linears: seconds inside mixq.torch.Linear modules, this forward, per format
    by_format = {}
    if args.time_linears:
        def pre(module, _):
            module._mixq_t0 = time.perf_counter()

        def post(module, _, __):
            key = module.format or "unquantized"
            by_format[key] = by_format.get(key, 0.0) + time.perf_counter() - module._mixq_t0

        for module in model.modules():
            if isinstance(module, mixq.torch.Linear):
                module.register_forward_pre_hook(pre)
                module.register_forward_hook(post)
    times, linears = [], []
    import comfy_kitchen as ck

    backend = "eager" if config == "ck-eager" else None
    runs = 1 if config == "ck-eager" else args.repeat + 1
    for i in range(runs):
        by_format.clear()
        with torch.inference_mode():
            t = time.perf_counter()
            if backend:
                with ck.use_backend(backend):
                    model(**x)
            else:
                model(**x)
            times.append(time.perf_counter() - t)
            linears.append(sum(by_format.values()))
    result = {"config": config, "load_s": load_s, "first_s": times[0],
              "forward_s": statistics.median(times[1:] if len(times) > 1 else times),
              "times": times, **after_load, "hwm_end": memory()["hwm"]}
    if args.time_linears:
        result["linears_s"] = linears
        result["linears_last_by_format_s"] = dict(by_format)  # the last forward's split
    return result


def prepare(args, work: pathlib.Path, cli: str):
    """The bf16 float checkpoint and its quantized version (kept between runs)."""
    import torch

    tag = f"h{args.hidden}-d{args.double}-s{args.single}"
    stamp = work / "config.json"
    recipe = pathlib.Path(args.recipe)
    if stamp.exists() and json.loads(stamp.read_text()) == {"tag": tag, "recipe": recipe.read_text()}:
        return
    from diffusers import FluxTransformer2DModel

    import mixq

    print(f"preparing {tag} in {work} ...", flush=True)
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)  # parameters made in bf16: no float32 copy of the model
    try:
        model = FluxTransformer2DModel(**flux_config(args))
    finally:
        torch.set_default_dtype(previous)
    mixq.save_file(work / "flux-bf16.safetensors", {k: v.contiguous() for k, v in model.state_dict().items()})
    del model
    subprocess.run([cli, "quantize", str(work / "flux-bf16.safetensors"), "-o", str(work / "flux-mixed.safetensors"),
                    "--recipe", str(recipe)], check=True)
    stamp.write_text(json.dumps({"tag": tag, "recipe": recipe.read_text()}))


def mib(n: float) -> str:
    return f"{n / 2**20:,.0f}"


def table(args, results: dict, work: pathlib.Path) -> str:
    qbytes = (work / "flux-mixed.safetensors").stat().st_size
    fbytes = (work / "flux-bf16.safetensors").stat().st_size
    base = results["baseline"]["rss"]
    eager = results["ck-eager"]["forward_s"]
    best_float = min(results["torch-f32"]["forward_s"], results["torch-bf16"]["forward_s"])
    lines = [f"FLUX transformer: hidden {args.hidden}, {args.double} double + {args.single} single blocks, "
             f"{args.image_tokens} image + {args.text_tokens} text tokens, {args.threads} threads, "
             f"median of {args.repeat} after 1 warm-up; bf16 checkpoint {mib(fbytes)} MiB, "
             f"quantized {mib(qbytes)} MiB; baseline RSS (torch + diffusers, meta model) {mib(base)} MiB",
             "",
             "| config | load s | first forward s | forward s | vs ck-eager | vs best float | RSS after load MiB | "
             "peak RSS MiB | (RSS - baseline) / quantized file |",
             "|---|---|---|---|---|---|---|---|---|"]
    for config in CONFIGS[1:]:
        r = results[config]
        lines.append(f"| {config} | {r['load_s']:.1f} | {r['first_s']:.2f} | {r['forward_s']:.2f} | "
                     f"{eager / r['forward_s']:.2f}x | {best_float / r['forward_s']:.2f}x | {mib(r['rss'])} | "
                     f"{mib(r['hwm_end'])} | {(r['rss'] - base) / qbytes:.2f} |")
    a, c = results["mixq"], results["ck-mixq"]
    lines += ["",
              f"targets: (a) mixq >= 3x ck-eager: {eager / a['forward_s']:.2f}x; (c) ck-mixq >= 3x ck-eager: "
              f"{eager / c['forward_s']:.2f}x; (a) >= 1.5x best float: {best_float / a['forward_s']:.2f}x; "
              f"(c) >= 1.5x best float: {best_float / c['forward_s']:.2f}x; (a) RSS after load <= 1.2 x file + "
              f"baseline: {(a['rss'] - base) / qbytes:.2f} x file (peak during load {(a['hwm_end'] - base) / qbytes:.2f})"]
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--double", type=int, default=2, help="double-stream (joint) blocks")
    p.add_argument("--single", type=int, default=4, help="single-stream blocks")
    p.add_argument("--hidden", type=int, default=3072)
    p.add_argument("--image-tokens", type=int, default=1024)
    p.add_argument("--text-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeat", type=int, default=2, help="timed forwards after one warm-up")
    p.add_argument("--recipe", default=str(RECIPE), help="quantization recipe (recipes/*.json)")
    p.add_argument("--dir", default=None, help="work folder (default build/bench-flux, or build/bench-flux-<recipe>)")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--mixq-cli", default=os.environ.get("MIXQ_CLI", str(ROOT / "build/release/bin/mixq")))
    p.add_argument("--json", help="also write the results here")
    p.add_argument("--time-linears", action="store_true",
                   help="also time every forward's mixq.torch.Linear calls (linears_s; mixq configs)")
    p.add_argument("--worker", choices=CONFIGS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print("RESULT " + json.dumps(worker(args)), flush=True)
        return 0
    if args.dir is None:
        stem = pathlib.Path(args.recipe).stem
        args.dir = str(ROOT / ("build/bench-flux" if pathlib.Path(args.recipe) == RECIPE else f"build/bench-flux-{stem}"))
    work = pathlib.Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    prepare(args, work, args.mixq_cli)
    results = {}
    passthrough = [f"--double={args.double}", f"--single={args.single}", f"--hidden={args.hidden}",
                   f"--image-tokens={args.image_tokens}", f"--text-tokens={args.text_tokens}",
                   f"--threads={args.threads}", f"--repeat={args.repeat}", f"--dir={work}"]
    if args.time_linears:
        passthrough.append("--time-linears")
    for config in args.configs.split(","):
        print(f"running {config} ...", flush=True)
        out = subprocess.run([sys.executable, __file__, "--worker", config, *passthrough], check=True,
                             capture_output=True, text=True)
        line = [l for l in out.stdout.splitlines() if l.startswith("RESULT ")][-1]
        results[config] = json.loads(line[len("RESULT "):])
        print(f"  {results[config]}", flush=True)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=1))
    if set(CONFIGS) <= set(results):
        print(f"\n# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus\n")
        print(table(args, results, work))
    return 0


if __name__ == "__main__":
    sys.exit(main())
