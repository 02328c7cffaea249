"""ExecuTorch 1.5.1 + XNNPACK: gelu(x, approximate="tanh") is computed as the exact (erf) gelu.

Needs only torch and executorch. Exits non-zero (AssertionError) while the deviation holds:
the delegated program returns erf-gelu values (gelu(1.5) = 1.3997892, the erf form) where eager
PyTorch returns the tanh approximation (1.3995715), an absolute error of 2e-4 at x = 1.5 and
4.4e-4 at x = -2.5; both close to each other, so a 2 % rel_mse bound alone passes it.
"""
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime


class GeluTanh(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x, approximate="tanh")


x = torch.tensor([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5])
program = to_edge_transform_and_lower(torch.export.export(GeluTanh(), (x,)),
                                      partitioner=[XnnpackPartitioner()]).to_executorch()
got = Runtime.get().load_program(program.buffer).load_method("forward").execute([x])[0]
tanh_form = torch.nn.functional.gelu(x, approximate="tanh")
erf_form = torch.nn.functional.gelu(x)
print("executorch+xnnpack:", got.tolist())
print("eager tanh gelu:   ", tanh_form.tolist())
print("eager erf gelu:    ", erf_form.tolist())
torch.testing.assert_close(got, tanh_form, rtol=1e-5, atol=1e-6)
