"""ExecuTorch 1.5.1 + XNNPACK: floor / ceil of a subnormal float32 flush it to zero first.

Needs only torch and executorch. Exits non-zero (AssertionError) while the deviation holds:
floor(-1e-40) is -0.0 under XNNPACK where eager PyTorch (and IEEE 754) give -1.0, and
ceil(1e-40) is 0.0 instead of 1.0: the delegate computes with denormals treated as zero.
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class Rounded(torch.nn.Module):
    def forward(self, x):
        return torch.floor(x), torch.ceil(x)


x = torch.tensor([-1e-40, 1e-40, -0.5, 0.5])
program = to_edge_transform_and_lower(torch.export.export(Rounded(), (x,)),
                                      partitioner=[XnnpackPartitioner()]).to_executorch()
floor, ceil = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])
print("input:", x.tolist())
print("floor executorch+xnnpack:", floor.tolist(), "eager:", torch.floor(x).tolist())
print("ceil  executorch+xnnpack:", ceil.tolist(), "eager:", torch.ceil(x).tolist())
torch.testing.assert_close(floor, torch.floor(x))
torch.testing.assert_close(ceil, torch.ceil(x))
