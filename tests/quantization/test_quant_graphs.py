"""Graphs keep the quantized layers as custom ops (for fusion), with constant parameters."""
from __future__ import annotations

import torch
import torch.nn as nn

from mluverify.device.quantization import quantize_for_target


def _net_and_input():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 5)).eval()
    return net, torch.randn(2, 3, 8, 8)


def _call_targets(graph) -> set[str]:
    return {str(node.target) for node in graph.nodes if node.op == "call_function"}


def test_torch_export_keeps_the_quantized_ops_and_computes_float_on_the_cpu():
    net, x = _net_and_input()
    quantized = quantize_for_target(net, [x])
    program = torch.export.export(quantized, (x,))
    assert {"mluverify.quant_conv.default", "mluverify.quant_linear.default"} <= _call_targets(program.graph)
    with torch.no_grad():
        assert torch.equal(program.module()(x), net(x))


def _traced_input_scale(traced) -> float:
    conv_calls = [n for n in traced.inlined_graph.nodes() if n.kind() == "mluverify::quant_conv"]
    assert len(conv_calls) == 1
    return conv_calls[0].inputsAt(7).toIValue()  # input_scale, after input ... groups


def test_jit_trace_bakes_the_scales_so_half_keeps_them():
    net, x = _net_and_input()
    quantized = quantize_for_target(net, [x], dtype="int16")
    traced = torch.jit.trace(quantized, x, check_trace=False)
    calibrated = 32767 / x.abs().max().item()
    assert _traced_input_scale(traced) == torch.tensor(calibrated, dtype=torch.float32).item()
    traced.half()  # converts weights and buffers to float16; the graph's constants stay
    assert _traced_input_scale(traced) == torch.tensor(calibrated, dtype=torch.float32).item()
