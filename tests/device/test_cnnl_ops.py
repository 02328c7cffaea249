"""The built-in CNNL op set: every op of the issue runs on the device (no CPU fallback) and
agrees with the CPU in float32 on the default profile (MLU270 keeps float32 arithmetic)."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import mluverify.device as md

g = torch.Generator().manual_seed(0)


def r(*shape):
    return torch.randn(*shape, generator=g)


CASES = {
    "conv1d": (nn.Conv1d(4, 6, 3, padding=1), (r(2, 4, 10),)),
    "conv2d_groups_dilation": (nn.Conv2d(4, 8, 3, groups=2, dilation=2, stride=2), (r(1, 4, 11, 11),)),
    "conv3d": (nn.Conv3d(2, 3, 3), (r(1, 2, 5, 5, 5),)),
    "conv_transpose2d": (nn.ConvTranspose2d(4, 3, 3, stride=2, output_padding=1), (r(1, 4, 5, 5),)),
    "linear": (nn.Linear(7, 5), (r(3, 7),)),
    "linear_3d": (nn.Linear(7, 5), (r(2, 3, 7),)),
    "mm": (torch.mm, (r(3, 4), r(4, 5))),
    "bmm": (torch.bmm, (r(2, 3, 4), r(2, 4, 5))),
    "baddbmm": (lambda c, a, b: torch.baddbmm(c, a, b, beta=0.5, alpha=2.0), (r(2, 1, 5), r(2, 3, 4), r(2, 4, 5))),
    "matmul": (torch.matmul, (r(2, 3, 4), r(4, 6))),
    "batch_norm_eval": (nn.BatchNorm2d(3).eval(), (r(2, 3, 4, 4),)),
    "batch_norm_train": (nn.BatchNorm2d(3).train(), (r(2, 3, 4, 4),)),
    "layer_norm": (nn.LayerNorm(6), (r(2, 5, 6),)),
    "group_norm": (nn.GroupNorm(2, 4), (r(2, 4, 3, 3),)),
    "relu": (torch.relu, (r(10),)),
    "relu6": (F.relu6, (r(10) * 5,)),
    "leaky_relu": (F.leaky_relu, (r(10),)),
    "hardtanh": (F.hardtanh, (r(10) * 2,)),
    "sigmoid": (torch.sigmoid, (r(10),)),
    "tanh": (torch.tanh, (r(10),)),
    "gelu": (F.gelu, (r(10),)),
    "silu": (F.silu, (r(10),)),
    "elu": (F.elu, (r(10),)),
    "hardswish": (F.hardswish, (r(10) * 4,)),
    "hardsigmoid": (F.hardsigmoid, (r(10) * 4,)),
    "glu": (lambda a: F.glu(a, 0), (r(4, 3),)),
    "softmax": (lambda x: torch.softmax(x, -1), (r(3, 7),)),
    "log_softmax": (lambda x: torch.log_softmax(x, 0), (r(3, 7),)),
    "max_pool2d": (nn.MaxPool2d(3, 2, 1), (r(1, 2, 9, 9),)),
    "avg_pool2d": (nn.AvgPool2d(2), (r(1, 2, 8, 8),)),
    "adaptive_avg_pool2d": (nn.AdaptiveAvgPool2d((1, 1)), (r(1, 3, 7, 7),)),
    "adaptive_max_pool2d": (nn.AdaptiveMaxPool2d(2), (r(1, 3, 7, 7),)),
    "add_alpha_broadcast": (lambda a, b: torch.add(a, b, alpha=0.5), (r(3, 4), r(4))),
    "add_scalar": (lambda a: a + 2.5, (r(3, 4),)),
    "sub": (lambda a, b: a - b, (r(3, 4), r(3, 1))),
    "rsub_scalar": (lambda a: 1 - a, (r(3, 4),)),
    "mul": (lambda a, b: a * b, (r(3, 4), r(3, 4))),
    "div": (lambda a, b: a / b, (r(3, 4), r(3, 4).abs() + 1)),
    "div_scalar_inplace": (lambda a: a.div_(4), (r(3, 4),)),
    "pow": (lambda a: a.pow(3), (r(5),)),
    "exp_log_sqrt_rsqrt": (lambda a: torch.rsqrt(torch.sqrt(torch.log(torch.exp(a.abs() + 1)))), (r(5),)),
    "abs_neg_clamp": (lambda a: torch.clamp(-a.abs(), -0.5, 0.5), (r(8),)),
    "sum_mean": (lambda a: (a.sum(), a.mean(1), a.sum(0, keepdim=True)), (r(4, 5),)),
    "max_min_argmax": (lambda a: (a.max(), a.min(), a.max(1), a.min(0), a.argmax(1)), (r(4, 5),)),
    "var": (lambda a: (a.var(1), a.var()), (r(4, 5),)),
    "cat_stack": (lambda a, b: (torch.cat([a, b], 1), torch.stack([a, b])), (r(2, 3), r(2, 3))),
    "split_chunk": (lambda a: (*a.split(2, 1), *a.chunk(3, 0)), (r(6, 5),)),
    "view_ops": (lambda a: a.view(4, 6).reshape(2, 12).permute(1, 0).transpose(0, 1).flatten()
                 .contiguous().expand(2, 24), (r(2, 3, 4),)),
    "index_select_gather": (lambda a, i: (a.index_select(1, i), a.gather(1, i.expand(3, 2))),
                            (r(3, 5), torch.tensor([[4, 0]]).view(-1))),
    "embedding": (nn.Embedding(10, 4), (torch.tensor([[1, 2], [9, 0]]),)),
    "dropout_eval": (nn.Dropout(0.5).eval(), (r(10),)),
    "lstm": (nn.LSTM(4, 3, num_layers=2), (r(5, 2, 4),)),
    "gru": (nn.GRU(4, 3), (r(5, 2, 4),)),
    "upsample_nearest": (nn.Upsample(scale_factor=2, mode="nearest"), (r(1, 2, 3, 3),)),
    "upsample_bilinear": (nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False), (r(1, 2, 3, 3),)),
}


def _run(fn, inputs, device):
    if isinstance(fn, nn.Module):
        torch.manual_seed(0)
        fn = _fresh(fn).to(device)
    return fn(*(x.clone().to(device) for x in inputs))


def _fresh(module):
    import copy

    return copy.deepcopy(module)


@pytest.mark.usefixtures("float_matmul")  # op semantics, not quantization (tests/device/test_numerics.py)
@pytest.mark.parametrize("name", sorted(CASES))
def test_op_runs_on_device_and_matches_cpu(name):
    fn, inputs = CASES[name]
    expected = _run(fn, inputs, "cpu")
    with md.track_fallbacks() as fallbacks:
        got = _run(fn, inputs, "mlu")
        got = torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.detach().cpu(), got)
    expected = torch.utils._pytree.tree_map_only(torch.Tensor, lambda t: t.detach(), expected)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert fallbacks.ops == (), f"{name} fell back to the CPU for {fallbacks.ops}"


HALF_CASES = ["conv1d", "conv2d_groups_dilation", "conv3d", "conv_transpose2d", "linear", "bmm",
              "batch_norm_eval", "layer_norm", "group_norm", "gelu", "silu", "softmax", "log_softmax",
              "avg_pool2d", "adaptive_avg_pool2d", "upsample_bilinear", "sum_mean", "lstm", "gru"]


def _half(value):
    return value.half() if isinstance(value, nn.Module) else value


@pytest.mark.parametrize("name", HALF_CASES)
def test_float16_on_device_deviates_from_float32_within_cnnl_tolerance(name):
    from mluverify.judge import metrics

    fn, inputs = CASES[name]
    expected = _run(fn, inputs, "cpu")
    got = _run(_half(_fresh(fn)) if isinstance(fn, nn.Module) else fn, [x.half() for x in inputs], "mlu")
    flat_got = torch.utils._pytree.tree_leaves(got)
    flat_expected = torch.utils._pytree.tree_leaves(expected)
    for g_, e_ in zip(flat_got, flat_expected):
        assert g_.dtype == torch.float16
        judged = metrics(g_.detach().cpu(), e_.detach())
        assert judged["max_abs"] > 0, f"{name}: float16 result identical to float32"
        assert judged["rel_mse"] <= 0.003, f"{name}: rel_mse {judged['rel_mse']}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_batch_norm_training_updates_running_statistics_on_device(dtype):
    import copy

    bn = nn.BatchNorm2d(3).train()
    x = r(4, 3, 5, 5).to(dtype)
    reference = copy.deepcopy(bn)
    reference(x.float())  # float16 values are exact in float32
    on_device = copy.deepcopy(bn).to(dtype).to("mlu")
    on_device(x.to("mlu"))
    tolerance = 1e-6 if dtype == torch.float32 else 2e-3  # one float16 rounding of values near 1
    for name in ("running_mean", "running_var"):
        got = getattr(on_device, name).cpu().float()
        torch.testing.assert_close(got, getattr(reference, name), rtol=tolerance, atol=tolerance)
    assert on_device.num_batches_tracked.item() == 1


@pytest.mark.parametrize("name", HALF_CASES)
@pytest.mark.parametrize("version", ["MLU270", "MLU370"])
def test_device_results_are_bit_identical_run_to_run(name, version, core_version):
    core_version(version)
    fn, inputs = CASES[name]
    runs = [torch.utils._pytree.tree_leaves(_run(fn, inputs, "mlu")) for _ in range(2)]
    for first, second in zip(*runs):
        assert torch.equal(first.detach().cpu(), second.detach().cpu())
