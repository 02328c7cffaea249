"""ExecuTorch 1.5.1 + XNNPACK: in float16, relu, hardtanh and clamp of NaN give a bound (0, -1,
-2) where torch gives NaN; in float32 the same delegated program keeps the NaN. XNNPACK's float16
clamp kernels drop it (a max/min of NaN and the bound gives the bound).

Needs only torch and executorch. Exits non-zero while the deviation holds. Found by
`make verify-real REAL_TARGETS=executorch:xnnpack` (test_unary's float16 relu: a drawn example
held a NaN); OpenVINO, IREE and TVM clamp NaN so in float32 too (their repro_clamp_nan.py).
Upstream: not found reported against ExecuTorch or XNNPACK.
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class Clamps(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x), torch.nn.functional.hardtanh(x), torch.clamp(x, -2.0, 2.0)


differ = []
for dtype in (torch.float32, torch.float16):
    x = torch.tensor([float("nan"), -1.5, 0.5, 3.0], dtype=dtype)
    program = to_edge_transform_and_lower(torch.export.export(Clamps(), (x,)),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    got = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])
    for name, value, expected in zip(("relu", "hardtanh", "clamp"), got, Clamps()(x)):
        print(f"{dtype} {name}: executorch+xnnpack {value.tolist()}, torch {expected.tolist()}")
        if not torch.equal(value.isnan(), expected.isnan()):
            differ.append(f"{name} ({dtype})")
if differ:
    raise SystemExit("NaN not propagated by " + ", ".join(differ))
