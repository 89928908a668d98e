"""A diffusers FluxTransformer2DModel (small config, random weights, no
download) end to end: saved with mixq.save_file, quantized by `mixq quantize`
with the two FLUX recipes of recipes/, loaded three ways and run:

  mixq      mixq.torch.load_quantized: every linear a mixq.torch.Linear;
  eager     mixq.comfy_kitchen.load_layouts: the checkpoint as ComfyUI loads
            it (comfy-kitchen QuantizedTensors), run on comfy-kitchen's eager
            backend: the peer's own arithmetic;
  ck+mixq   the same layouts through the `mixq` comfy-kitchen backend.

Every bound below is 3x the value measured when the test was written (seed
0; the measured value is in the comment next to it); CONFORMANCE.md has the
table. The measured numbers are printed (pytest -s). Everything runs under
torch.inference_mode(), as ComfyUI samples."""
import json
import pathlib
import subprocess

import pytest
import torch

import comfy_kitchen as ck
import mixq
import mixq.comfy_kitchen as mck
import mixq.torch

REPO = pathlib.Path(__file__).resolve().parents[2]
CONFIG = dict(patch_size=1, in_channels=64, num_layers=2, num_single_layers=2, attention_head_dim=128,
              num_attention_heads=2, joint_attention_dim=256, pooled_projection_dim=128,
              guidance_embeds=False, axes_dims_rope=(16, 56, 56))
RECIPES = {
    "nvfp4-int8": REPO / "recipes/flux-nvfp4-mlp-int8-convrot-attn.json",
    "w4a4-int8": REPO / "recipes/flux-convrot-w4a4-int8.json",
}
IMG, TXT = 64, 16  # 8x8 latent tokens, 16 text tokens


def new_model(device="meta"):
    from diffusers import FluxTransformer2DModel

    with torch.device(device):
        return FluxTransformer2DModel(**CONFIG).eval()


def inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(1)
    ys, xs = torch.meshgrid(torch.arange(8), torch.arange(8), indexing="ij")
    img_ids = torch.stack((torch.zeros(IMG), ys.flatten().float(), xs.flatten().float()), dim=-1)
    return dict(hidden_states=torch.randn(1, IMG, 64, generator=g).to(dtype),
                encoder_hidden_states=torch.randn(1, TXT, 256, generator=g).to(dtype),
                pooled_projections=torch.randn(1, 128, generator=g).to(dtype),
                timestep=torch.tensor([0.6], dtype=dtype), img_ids=img_ids, txt_ids=torch.zeros(TXT, 3),
                return_dict=False)


def forward(model, dtype=torch.float32):
    with torch.inference_mode():
        return model(**inputs(dtype))[0].float()


def rel(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def partial_recipe(path, keep_formats, out):
    """The recipe with only the rules of `keep_formats` (the rest of the
    model stays float): isolates one format group's error."""
    recipe = json.loads(path.read_text())
    recipe["rules"] = [r for r in recipe["rules"] if r["format"] in keep_formats]
    out.write_text(json.dumps(recipe))
    return out


@pytest.fixture(scope="module")
def flux(tmp_path_factory, mixq_cli):
    """(work dir, float model, float output)."""
    d = tmp_path_factory.mktemp("flux")
    torch.manual_seed(0)
    model = new_model("cpu")
    mixq.save_file(d / "flux-f32.safetensors", {k: v.contiguous() for k, v in model.state_dict().items()})
    return d, model, forward(model)


def quantize(cli, d, recipe, name):
    out = d / f"{name}.safetensors"
    subprocess.run([cli, "quantize", str(d / "flux-f32.safetensors"), "-o", str(out), "--recipe", str(recipe)],
                   check=True, capture_output=True, text=True)
    return out


def run_layouts(path, backend):
    model = new_model()
    mck.load_layouts(model, path, compute_dtype=torch.float32)
    with ck.use_backend(backend):
        return forward(model)


# recipe -> bounds, each 3x the value measured (seed 0), which is in the comment:
#   rel(mixq, eager), rel(ck+mixq, eager): one layer agrees to ~2e-7 (test_comfy_backend);
#     through the model a last-bit difference now and then moves an activation
#     across a quantizer's rounding boundary, a full code step, hence ~1e-3;
#   |err(mixq) / err(eager) - 1| for the errors against the float model;
#   |e_all² / (e_mlp² + e_attn²) - 1|: the error of both format groups is the
#     quadrature sum of each group's own error (independent rounding noise);
#   rel(bf16 compute, f32 compute) of the mixq model.
BOUNDS = {
    # measured 1.09e-3, 1.09e-3, 3.6e-3, 8.7e-3, 8.1e-3
    "nvfp4-int8": (3.3e-3, 3.3e-3, 1.1e-2, 2.6e-2, 2.4e-2),
    # measured 5.96e-4, 5.96e-4, 2.6e-5, 2.0e-3, 8.9e-3
    "w4a4-int8": (1.8e-3, 1.8e-3, 7.8e-5, 6.1e-3, 2.7e-2),
}


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_flux_forward(flux, mixq_cli, recipe):
    d, _, y_float = flux
    mck.register()
    try:
        path = quantize(mixq_cli, d, RECIPES[recipe], recipe)
        formats = {layer["format"] for layer in mixq.open(path).inspect()["layers"]} - {None}
        assert len(formats) == 2, formats  # two formats, and float layers between them

        model = new_model()
        assert mixq.torch.load_quantized(model, path) == ([], [])
        y_mixq = forward(model)
        y_eager = run_layouts(path, "eager")
        y_ckmixq = run_layouts(path, mck.BACKEND)

        # bf16 compute: the same model on bfloat16 activations (float params cast)
        model_bf16 = new_model()
        mixq.torch.load_quantized(model_bf16, path)
        model_bf16.to(torch.bfloat16)
        y_bf16 = forward(model_bf16, torch.bfloat16)

        # The formats' own error: each format group alone, then both.
        errors = {}
        for group in sorted(formats):
            part = quantize(mixq_cli, d, partial_recipe(RECIPES[recipe], {group}, d / f"{recipe}-{group}.json"),
                            f"{recipe}-{group}")
            m = new_model()
            mixq.torch.load_quantized(m, part)
            errors[group] = rel(forward(m), y_float)
    finally:
        mck.unregister()

    e_mixq, e_eager, e_ck = rel(y_mixq, y_float), rel(y_eager, y_float), rel(y_ckmixq, y_float)
    quadrature = e_mixq ** 2 / sum(e ** 2 for e in errors.values())
    numbers = dict(mixq_vs_eager=rel(y_mixq, y_eager), ckmixq_vs_eager=rel(y_ckmixq, y_eager),
                   ckmixq_vs_mixq=rel(y_ckmixq, y_mixq),
                   mixq_vs_float=e_mixq, eager_vs_float=e_eager, ckmixq_vs_float=e_ck,
                   per_group_vs_float=errors, quadrature=quadrature, bf16_vs_f32=rel(y_bf16, y_mixq))
    print(f"\n{recipe}: {numbers}")
    b_eager, b_ck, b_ratio, b_quad, b_bf16 = BOUNDS[recipe]
    assert numbers["mixq_vs_eager"] <= b_eager
    assert numbers["ckmixq_vs_eager"] <= b_ck
    # mixq's error against the float model is the peer's (the formats' arithmetic) ...
    assert abs(e_mixq / e_eager - 1) <= b_ratio and abs(e_ck / e_eager - 1) <= b_ratio
    # ... and the sum, in quadrature, of the errors each format group makes alone
    assert abs(quadrature - 1) <= b_quad
    assert numbers["bf16_vs_f32"] <= b_bf16
