# ComfyUI/custom_nodes/mixq_cpu/__init__.py: ComfyUI imports custom nodes at
# start-up; from then on its quantized linears run on mixq when on the CPU.
import mixq.comfy_kitchen

mixq.comfy_kitchen.register()
NODE_CLASS_MAPPINGS = {}
