# Quantize a float checkpoint into a mixed one, inspect it, and run a layer.
import numpy as np
import mixq

rng = np.random.default_rng(0)
tensors = {}
for block in range(2):
    for name, (n, k) in {"attn.qkv": (768, 256), "mlp.fc1": (512, 256)}.items():
        tensors[f"blocks.{block}.{name}.weight"] = rng.standard_normal((n, k), np.float32) * 0.05
        tensors[f"blocks.{block}.{name}.bias"] = np.zeros(n, np.float32)
mixq.save_file("float.safetensors", tensors)

# First matching rule wins: NVFP4 MLPs, INT8 + ConvRot attention.
mixq.quantize("float.safetensors", "mixed.safetensors",
              rules=["*.mlp.*=nvfp4", "*.attn.*=int8_tensorwise:convrot=true"])

ckpt = mixq.open("mixed.safetensors")             # reads headers only
print("formats:", sorted(ckpt.inspect()["formats"]))
print("comfyui accepts:", ckpt.plan(profile="comfyui")["accepted"])

fc1 = ckpt.linear("blocks.0.mlp.fc1")
x = rng.standard_normal((4, fc1.in_features), np.float32)
y = fc1.forward(x)                                 # NumPy or torch CPU tensors
w = fc1.dequantize()                               # float32 [out, in]
print(fc1.format, fc1.params, y.shape)
print("max |y - x·Wᵀ - b| =", float(np.abs(y - x @ w.T).max()))
