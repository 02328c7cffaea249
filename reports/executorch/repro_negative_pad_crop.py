"""ExecuTorch 1.5, portable kernels: ``constant_pad_nd`` with negative padding (a crop) is
refused at run time, though torch allows it and the program exports, lowers and saves.

``F.pad(x, (-1, -1))`` crops one element off each end in torch. ExecuTorch's runtime fails with
"Check failed (check_constant_pad_args(in, pad, value, out))" and error 0x12 (InvalidArgument);
the XNNPACK partitioner leaves negative pads to the portable kernel. Models reach it through
timm's PNASNet (its pad-then-crop, pads [-1, 1, -1, 1]) and ``F.fold`` (VOLO: col2im's
decomposition crops its padding), both ``fail_to_run`` on ``executorch:xnnpack`` in the zoo.

Needs only torch and executorch. Exits 1 while the refusal holds, 0 once the runtime crops as
torch does.

Upstream: the refusal is deliberate, pytorch/executorch#18018 (the kernel wrote out of bounds on
negative pads before); XNNPACK does not take them, #12935 (issue #12456). Support for cropping in
the portable kernel: not found reported.
"""
import sys

import torch
import torch.nn.functional as F
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class Crop(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pad(x, (-1, -1))


x = torch.arange(6.0).reshape(1, 6)
program = to_edge_transform_and_lower(torch.export.export(Crop(), (x,))).to_executorch()
try:
    out = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])[0]
except RuntimeError as exc:
    print(f"ExecuTorch cannot run F.pad(x, (-1, -1)) (torch gives {Crop()(x).tolist()}): {exc}")
    sys.exit(1)
print("ExecuTorch:", out.tolist(), "torch:", Crop()(x).tolist())
sys.exit(0 if torch.equal(out, Crop()(x)) else 1)
