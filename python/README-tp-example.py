# Tensor parallelism over 2 processes (gloo on CPU): every rank holds half of
# each layer of a mixed FLUX checkpoint and the ranks all-reduce / all-gather
# their activations. Launch: torchrun --standalone --nproc-per-node 2 this file.
import torch
import torch.distributed as dist
from diffusers import FluxTransformer2DModel

import mixq
import mixq.torch

dist.init_process_group("gloo")
rank = dist.get_rank()
config = dict(num_layers=1, num_single_layers=1, num_attention_heads=4, attention_head_dim=128,
              joint_attention_dim=256, pooled_projection_dim=128, axes_dims_rope=(16, 56, 56))
if rank == 0:                                      # one process writes the checkpoint
    torch.manual_seed(0)
    mixq.save_file("flux-tp.safetensors", FluxTransformer2DModel(**config).state_dict())
    mixq.quantize("flux-tp.safetensors", "flux-tp-mixed.safetensors",
                  recipe="recipes/flux-nvfp4-mlp-int8-convrot-attn.json")
dist.barrier()

with torch.device("meta"):
    model = FluxTransformer2DModel(**config).eval()
mixq.torch.load_quantized(model, "flux-tp-mixed.safetensors", tp_group=dist.group.WORLD)

g = torch.Generator().manual_seed(0)                # the same inputs on every rank
inputs = dict(hidden_states=torch.randn(1, 64, 64, generator=g),
              encoder_hidden_states=torch.randn(1, 16, 256, generator=g),
              pooled_projections=torch.randn(1, 128, generator=g), timestep=torch.tensor([0.5]),
              img_ids=torch.zeros(64, 3), txt_ids=torch.zeros(16, 3), return_dict=False)
with torch.inference_mode():
    out = model(**inputs)[0]

if rank == 0:                                      # the same checkpoint in one process
    print(model.transformer_blocks[0].ff.net[2])   # RowParallelLinear(... tp=rank 0 of 2 ...)
    with torch.device("meta"):
        single = FluxTransformer2DModel(**config).eval()
    mixq.torch.load_quantized(single, "flux-tp-mixed.safetensors")
    with torch.inference_mode():
        ref = single(**inputs)[0]
    print("relative difference, 2 ranks vs 1:", float((out - ref).norm() / ref.norm()))
dist.destroy_process_group()
