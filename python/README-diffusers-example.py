# A diffusers FLUX transformer on mixq: save its weights, quantize them with a
# mixed recipe (NVFP4 MLPs, INT8 ConvRot attention), load the result into a
# fresh model and run it next to the float one.
import torch
from diffusers import FluxTransformer2DModel

import mixq
import mixq.torch

config = dict(num_layers=1, num_single_layers=1, num_attention_heads=2, attention_head_dim=128,
              joint_attention_dim=256, pooled_projection_dim=128, axes_dims_rope=(16, 56, 56))
torch.manual_seed(0)
model = FluxTransformer2DModel(**config).eval()   # or FluxTransformer2DModel.from_pretrained(...)
mixq.save_file("flux.safetensors", model.state_dict())
mixq.quantize("flux.safetensors", "flux-mixed.safetensors",
              recipe="recipes/flux-nvfp4-mlp-int8-convrot-attn.json")

with torch.device("meta"):                         # no float weights are allocated
    quantized = FluxTransformer2DModel(**config).eval()
missing, unexpected = mixq.torch.load_quantized(quantized, "flux-mixed.safetensors")
print(quantized.transformer_blocks[0].ff.net[2])   # Linear(..., format=nvfp4, method=..., kernel=...)

inputs = dict(hidden_states=torch.randn(1, 64, 64), encoder_hidden_states=torch.randn(1, 16, 256),
              pooled_projections=torch.randn(1, 128), timestep=torch.tensor([0.5]),
              img_ids=torch.zeros(64, 3), txt_ids=torch.zeros(16, 3), return_dict=False)
with torch.inference_mode():
    ours, ref = quantized(**inputs)[0], model(**inputs)[0]
print("relative error vs float:", float((ours - ref).norm() / ref.norm()))
