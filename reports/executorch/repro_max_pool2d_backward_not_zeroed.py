"""ExecuTorch 1.5.1: the portable max_pool2d_with_indices_backward does not zero its output.

Needs only torch and executorch. Exits non-zero (AssertionError) while the deviation holds. The
gradient of a max pooling is scattered into an output buffer that the kernel never clears; ExecuTorch's
memory planning gives that buffer the memory of the forward's pooled values, so the gradient comes
back with the pooled maxima added where it should be 0 (1x2x3x6 input, kernel 3, stride 2,
ceil_mode: the first row of the gradient reads 1.2377, 1.1168, 0.8487, 1.2032, 2.2032, 2.3022 where
torch gives 0, 0, 0, 0, 1, 0). The XNNPACK partitioner delegates none of it: the portable kernels
run it. Found by the OpInfo entry max_pool2d_with_indices_backward on executorch:xnnpack
(rel_mse 5.1).
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class MaxPoolBackward(torch.nn.Module):
    def forward(self, x):
        out, indices = torch.nn.functional.max_pool2d_with_indices(x, 3, 2, 0, 1, ceil_mode=True, return_indices=True)
        return torch.ops.aten.max_pool2d_with_indices_backward.default(
            torch.ones_like(out), x, [3, 3], [2, 2], [0, 0], [1, 1], True, indices)


x = torch.randn(1, 2, 3, 6, generator=torch.Generator().manual_seed(0))
program = to_edge_transform_and_lower(torch.export.export(MaxPoolBackward(), (x,)),
                                      partitioner=[XnnpackPartitioner()]).to_executorch()
got = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])[0]
want = MaxPoolBackward()(x)
print("executorch:", got[0, 0].tolist())
print("torch:     ", want[0, 0].tolist())
torch.testing.assert_close(got, want)
