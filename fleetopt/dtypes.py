"""Number formats of weights and KV cache: the names instances, flags and the cost model share.

bf16; fp8 (E4M3, per-tensor or per-channel scales); int4 (AWQ/GPTQ weight-only, W4A16); fp4
(NVFP4: E2M1 values in blocks of 16 with an FP8 scale each, 4.5 bits a value; FP4 tensor cores
on Blackwell, weight-only elsewhere, as vLLM's Marlin kernels run it on Hopper and Ampere).
"""

DTYPES = ("bf16", "fp8", "int4", "fp4")
