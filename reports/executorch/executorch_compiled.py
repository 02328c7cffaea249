"""What the ExecuTorch reproducers beside this file can share: a torch module run as mluverify's
executorch:xnnpack runs it (``torch.export``, lowered with the XNNPACK partitioner, serialized and
run by ExecuTorch's runtime; what the partitioner leaves runs on ExecuTorch's own CPU kernels),
needing only torch and executorch."""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


def run(module: torch.nn.Module, *args: torch.Tensor) -> torch.Tensor:
    """The first output of ``module(*args)`` computed by ExecuTorch with the XNNPACK delegate."""
    program = to_edge_transform_and_lower(torch.export.export(module, args),
                                          partitioner=[XnnpackPartitioner()]).to_executorch()
    return Runtime.get().load_program(program.buffer).load_method("forward").execute(list(args))[0]
