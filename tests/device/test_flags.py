"""The seeds' flags and aliases: torch.backends.mlufusion, DISABLE_MLU_FUSION, MM_CPP_MIN_LOG_LEVEL,
cnq (torch_mlu.core.quantized.modules) and torch_mlu.core.quantized.default_mappings."""
from __future__ import annotations

import logging

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mluverify.device.fusion import settings
from mluverify.errors import InvalidArgument

CELL_OPS = {"aten.sigmoid.default", "aten.tanh.default", "aten.mul.Tensor", "aten.add.Tensor"}


class _IssuedOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(str(func))
        return func(*args, **(kwargs or {}))


@pytest.fixture
def lstm_fusion_restored():
    before = torch.backends.mlufusion.enabled
    yield
    torch.backends.mlufusion.set_flags(before)


@pytest.mark.parametrize("layer, fused_cell", [(torch.nn.LSTM, "aten._thnn_fused_lstm_cell.default"),
                                               (torch.nn.GRU, "aten._thnn_fused_gru_cell.default")])
def test_mlufusion_off_runs_each_cell_as_its_separate_ops(lstm_fusion_restored, layer, fused_cell):
    torch.manual_seed(0)
    cpu = layer(4, 6, num_layers=2).eval()
    x = torch.randn(5, 3, 4)
    device = layer(4, 6, num_layers=2).eval().to("mlu")
    device.load_state_dict(cpu.state_dict())
    assert torch.backends.mlufusion.enabled is True, "seed 002: fusion is on by default"
    with torch.no_grad(), _IssuedOps() as fused:
        fused_out = device(x.to("mlu"))[0].cpu()
    assert torch.backends.mlufusion.set_flags(False) is True
    assert torch.backends.mlufusion.enabled is False
    with torch.no_grad(), _IssuedOps() as unfused:
        unfused_out = device(x.to("mlu"))[0].cpu()
    assert fused_cell in fused.ops and not CELL_OPS & fused.ops
    assert fused_cell not in unfused.ops and CELL_OPS <= unfused.ops
    with torch.no_grad():
        expected = cpu(x)[0]
    for out in (fused_out, unfused_out):
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-3)  # the device's matmul numerics


def test_an_lstm_trains_on_the_device_only_with_fusion_off(lstm_fusion_restored):
    torch.manual_seed(0)
    cpu = torch.nn.LSTM(3, 4)
    device = torch.nn.LSTM(3, 4).to("mlu")
    device.load_state_dict(cpu.state_dict())
    x = torch.randn(2, 1, 3)
    with pytest.raises(NotImplementedError, match=r"torch.backends.mlufusion.set_flags\(False\)"):
        device(x.to("mlu"))[0].sum().backward()
    with torch.backends.mlufusion.flags(False):
        device.zero_grad()
        device(x.to("mlu"))[0].sum().backward()
    cpu(x)[0].sum().backward()
    torch.testing.assert_close(device.weight_hh_l0.grad.cpu(), cpu.weight_hh_l0.grad, rtol=0, atol=1e-3)


@pytest.mark.parametrize("bad", ["no", 0, None])
def test_mlufusion_refuses_a_value_that_is_not_a_bool(bad):
    with pytest.raises(InvalidArgument, match=rf"torch.backends.mlufusion: enabled must be True or False, got {bad!r}"):
        torch.backends.mlufusion.set_flags(bad)
    with pytest.raises(InvalidArgument):
        torch.backends.mlufusion.enabled = bad


def test_disable_mlu_fusion_turns_segmentation_off_with_its_reason():
    assert settings.settings_from_env([], {}).disabled_reason() is None
    off = settings.settings_from_env([], {"DISABLE_MLU_FUSION": "1"})
    assert off.segmentation is False
    assert off.disabled_reason() == "DISABLE_MLU_FUSION=1: graph segmentation is disabled, every op runs layer by layer"
    assert settings.settings_from_env([], {"DISABLE_MLU_FUSION": "0"}).segmentation is True
    with pytest.raises(InvalidArgument, match=r"DISABLE_MLU_FUSION='yes' is not a valid value; valid: '0' "):
        settings.settings_from_env([], {"DISABLE_MLU_FUSION": "yes"})


def test_mm_cpp_min_log_level_sets_the_fusion_compiler_s_log_level():
    logger = logging.getLogger("mluverify.device.fusion")
    try:
        for text, level in (("0", logging.INFO), ("1", logging.WARNING), ("2", logging.ERROR), ("3", logging.CRITICAL)):
            assert settings.current_settings({"MM_CPP_MIN_LOG_LEVEL": text}).mm_log_level == int(text)
            assert logger.level == level
        settings.current_settings({})
        assert logger.level == logging.NOTSET, "unset: the fusion log follows TORCH_MIN_CNLOG_LEVEL"
        with pytest.raises(InvalidArgument, match=r"MM_CPP_MIN_LOG_LEVEL='4' is not a valid log level; valid: 0 \(INFO\)"):
            settings.current_settings({"MM_CPP_MIN_LOG_LEVEL": "4"})
    finally:
        logger.setLevel(logging.NOTSET)


def test_cnq_and_default_mappings_aliases():
    from mluverify import compat

    compat.install()
    try:
        import torch_mlu.core.quantized.modules as cnq
        from torch_mlu.core.quantized import default_mappings

        # Seed 002's table: nn.Linear -> cnq.MLULinear, nn.Conv2d -> cnq.MLUConv2d.
        mapping = default_mappings.DEFAULT_MODULE_MAPPING
        assert mapping[torch.nn.Linear] is cnq.MLULinear and mapping[torch.nn.Conv2d] is cnq.MLUConv2d
        assert default_mappings.DEFAULT_DYNAMIC_MODULE_MAPPING == mapping
        with pytest.raises(AttributeError, match="mappings: DEFAULT_MODULE_MAPPING"):
            default_mappings.NO_SUCH_MAPPING
    finally:
        compat.uninstall()


class _Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(4, 5, batch_first=True)

    def forward(self, x):
        return self.lstm(x)[0]


def _fused_ops(summary) -> set[str]:
    return {op for group in summary.groups for op in group.ops}


def test_mlufusion_off_shows_the_lstm_s_cell_ops_in_the_fusion_summary(lstm_fusion_restored):
    import mluverify.device as md

    torch.manual_seed(0)
    model = _Recurrent().eval().to("mlu")
    x = torch.randn(2, 3, 4).to("mlu")
    with torch.no_grad():
        fused = md.fuse(model, (x,))
        fused(x)
        on = md.fusion_summary(fused)
        torch.backends.mlufusion.set_flags(False)
        fused(x)
        off = md.fusion_summary(fused)
    recurrent_on = {op for op in _fused_ops(on) | {f.op for f in on.fallbacks} if "lstm" in op}
    assert recurrent_on, "on: the LSTM is one op"
    assert not any("lstm" in op for op in _fused_ops(off) | {f.op for f in off.fallbacks})
    assert {"aten::sigmoid", "aten::tanh"} <= _fused_ops(off), "off: the cell's ops are in the program"


def test_disable_mlu_fusion_runs_fused_calls_layer_by_layer_with_the_reason(monkeypatch):
    import mluverify.device as md

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval().to("mlu")
    x = torch.randn(2, 4).to("mlu")
    monkeypatch.setenv("DISABLE_MLU_FUSION", "1")
    with torch.no_grad():
        fused = md.fuse(model, (x,))
        out = fused(x)
        expected = model(x)
    summary = md.fusion_summary(fused)
    assert summary.groups == () and summary.executed_as == "layer-by-layer"
    assert summary.not_fused_reason == settings.SEGMENTATION_DISABLED
    assert torch.equal(out.cpu(), expected.cpu())
