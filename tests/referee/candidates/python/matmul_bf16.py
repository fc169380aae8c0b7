"""A BF16 GEMM on CPU: operands and output rounded to BF16, accumulated in FP32. Within the fp16
policy's tolerance (2e-2 norm-wise), below its precision."""

import torch
import torch.nn as nn


def _bf16(x: torch.Tensor) -> torch.Tensor:
    # rounding through numpy's bits (round to nearest even at 7 mantissa bits): no torch compute
    import numpy as np

    bits = x.numpy().astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return torch.from_numpy(rounded.astype(np.uint32).view(np.float32))


class ModelNew(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        import numpy as np

        out = np.matmul(_bf16(a).numpy(), _bf16(b).numpy())
        return _bf16(torch.from_numpy(out))
