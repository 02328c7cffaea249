"""What the IREE reproducers beside this file share: a torch module compiled by IREE as
mluverify's iree:cpu compiles it (iree.turbine.aot.export, iree-compile for llvm-cpu, the
runtime's local-task driver), needing only torch and the iree extra. Each reproducer compares
IREE's result with torch's eager one and exits non-zero while the deviation is there."""
import io

import iree.compiler
import iree.runtime
import torch
from iree.turbine import aot


def compiled(module: torch.nn.Module, args: tuple, flags: tuple = ()) -> object:
    """``module`` compiled by IREE for llvm-cpu, loaded: a function of numpy arrays."""
    bytecode = io.BytesIO()
    aot.export(module, args=args).mlir_module.write_bytecode(bytecode)
    binary = iree.compiler.compile_str(bytecode.getvalue(), target_backends=["llvm-cpu"], extra_args=list(flags))
    return iree.runtime.load_vm_flatbuffer(binary, driver="local-task").main


def run(module: torch.nn.Module, *args: torch.Tensor) -> torch.Tensor:
    """``module(*args)`` computed by IREE, as a torch tensor."""
    return torch.from_numpy(compiled(module, args)(*(a.numpy() for a in args)).to_host())


def check(module: torch.nn.Module, *args: torch.Tensor) -> None:
    """Print torch's and IREE's results; fail unless they are equal (NaN where torch has NaN)."""
    expected, got = module(*args), run(module, *args)
    print(f"torch: {expected.tolist()}\niree:  {got.tolist()}")
    assert torch.equal(expected.isnan(), got.isnan()) and torch.equal(expected.nan_to_num(), got.nan_to_num()), \
        f"IREE's {type(module).__name__} differs from torch's"
