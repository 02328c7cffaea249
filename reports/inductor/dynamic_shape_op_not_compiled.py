"""TorchDynamo does not compile an op whose output shape depends on the input's values
(masked_select, nonzero, ...) unless its config capture_dynamic_output_shape_ops is on (off by
default): torch.compile(backend="inductor") runs it eagerly, so the cpu:inductor case executes
layer by layer (status not_fused).

    .venv/bin/python reports/inductor/dynamic_shape_op_not_compiled.py

prints the graphs compiled (0) and why ("Dynamic shape operator").
"""
import torch
from torch._dynamo.utils import counters

x = torch.randn(4, 5)
with torch.no_grad():
    torch.compile(torch.masked_select, backend="inductor")(x, x > 0)
reasons = [reason.splitlines()[0] for reason in (*counters["graph_break"], *counters["unimplemented"])]
print(f"masked_select: graphs compiled {counters['stats']['unique_graphs']}, not compiled because {reasons}")
