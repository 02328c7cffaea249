"""ExecuTorch 1.5.1 with the XNNPACK partitioner cannot lower an in-place ``index_add_`` whose
source is a clone of its whole destination, a ``relu``'s result: eager computes it;
``to_edge_transform_and_lower`` raises ``RuntimeError: Output node 'aten_relu_default' is already
in the inputs. This is likely due to pass through arguments, which are not supported in XNNPACK
Delegate.`` (the no-op clone is removed, so the delegated relu's output is passed through). A
source that is a clone of part of it (``v[:2].clone()``) lowers and runs right. The sixth fuzz
campaign's ``71493cff6c4e`` (docs/fuzzing.md).

Needs only torch and executorch. Upstream: the family of pytorch/executorch#15884 (merged: the
XNNPACK clone removal keeps clones that forward a partition's input to its output); this form
not found reported.
    .venv/bin/python reports/executorch/repro_index_add_clone_passthrough.py   # exits 1 while it fails
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class ReluIndexAdd(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = torch.relu(x)
        return v.index_add_(0, torch.tensor([0, 0, 0]), v.clone())


x = torch.tensor([1.0, -2.0, 3.0])
print(f"torch: {ReluIndexAdd()(x.clone()).tolist()}")
exported = torch.export.export(ReluIndexAdd(), (x.clone(),))
program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
print(f"executorch: {Runtime.get().load_program(program.buffer).load_method('forward').execute([x.clone()])[0].tolist()}")
