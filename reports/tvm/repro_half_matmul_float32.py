"""TVM's PyTorch front end gives every matmul, linear and convolution ``out_dtype="float32"``
whatever its inputs' dtype: a float16 (or bfloat16) ``x @ w`` returns float32 where torch returns
float16, and a float16 ``nn.Linear`` / ``nn.Conv2d`` with a bias does not import at all (its
float32 product meets a float16 bias: "Binary operators must have the same datatype"). A float16
inference ``nn.BatchNorm2d`` returns float32 as well (found when the judge began checking a float16
case's output dtype: these cases had passed on their values, computed in float32).

apache-tvm 0.27.0.post1, torch 2.14.1; upstream: not found reported (apache/tvm issues searched
for float16 matmul / conv out_dtype in the Relax PyTorch front end; #20198 is a different pass
dropping an explicit out_dtype). Exits non-zero while the deviation is there.
"""
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program


class MatMul(torch.nn.Module):
    def forward(self, x, w):
        return x @ w


x, w = torch.ones(2, 3, dtype=torch.float16), torch.ones(3, 4, dtype=torch.float16)
program = from_exported_program(torch.export.export(MatMul(), (x, w)))
vm = relax.VirtualMachine(tvm.compile(program, target="llvm"), tvm.cpu())
got = vm["main"](tvm.runtime.tensor(x.numpy()), tvm.runtime.tensor(w.numpy()))[0].numpy()
print("torch:", (x @ w).dtype, "tvm:", got.dtype)
try:
    linear = torch.nn.Linear(3, 4).half()
    from_exported_program(torch.export.export(linear, (x,)))
    print("float16 nn.Linear with a bias: imported")
except Exception as exc:  # the front end's TypeError
    print("float16 nn.Linear with a bias:", type(exc).__name__, str(exc).splitlines()[0][:160])
norm, image = torch.nn.BatchNorm2d(3).eval().half(), torch.ones(1, 3, 4, 4, dtype=torch.float16)
normed = relax.VirtualMachine(tvm.compile(from_exported_program(torch.export.export(norm, (image,))), target="llvm"),
                              tvm.cpu())["main"](tvm.runtime.tensor(image.numpy()))[0].numpy()
print("batch norm: torch:", norm(image).dtype, "tvm:", normed.dtype)
assert str(got.dtype) == "float16", f"float16 matmul returned {got.dtype} on TVM"
assert str(normed.dtype) == "float16", f"float16 batch norm returned {normed.dtype} on TVM"
