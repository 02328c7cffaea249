"""CPU fallbacks: counted per op, in order, logged per TORCH_MIN_CNLOG_LEVEL, and never silent."""
from __future__ import annotations

import logging
import subprocess
import sys

import pytest
import torch

import mluverify.device as md
from mluverify.device import _log


def test_ops_without_kernel_run_on_cpu_counted_in_order():
    x = torch.arange(6.0).reshape(2, 3).to("mlu")
    with md.track_fallbacks() as outer:
        torch.cumsum(x, 1)
        with md.track_fallbacks() as inner:
            torch.flip(x, [0])
            torch.flip(x, [1])
        y = torch.cumsum(x, 0)
    assert outer.ops == ("aten::cumsum.out", "aten::flip")
    assert outer.counts == {"aten::cumsum.out": 2, "aten::flip": 2} and outer.total == 4
    assert inner.ops == ("aten::flip",) and inner.total == 2
    assert torch.equal(y.cpu(), torch.cumsum(torch.arange(6.0).reshape(2, 3), 0))


def test_ops_with_kernels_are_not_fallbacks():
    x = torch.randn(4, 4).to("mlu")
    with md.track_fallbacks() as fb:
        torch.relu(x @ x + 1).sum()
        x.t().contiguous().view(-1)
    assert fb.ops == ()


def test_complex_inputs_fall_back_to_cpu_and_are_recorded():
    z = torch.tensor([1 + 2j, 3 - 1j])
    with md.track_fallbacks() as fb:
        got = (z.to("mlu") + z.to("mlu")).cpu()
    assert torch.equal(got, z + z)
    assert fb.counts["aten::add.Tensor"] == 1


def test_first_fallback_of_an_op_warns_then_debug(caplog):
    x = torch.randn(5).to("mlu")
    caplog.set_level(logging.DEBUG, logger="mluverify.device")
    torch.special.erfcx(x)  # an op no other test uses, so this is its first fallback
    torch.special.erfcx(x)
    records = [r for r in caplog.records if "erfcx" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.WARNING, logging.DEBUG]
    assert "runs on the CPU" in records[0].getMessage()


@pytest.mark.parametrize("text, level", [("-1", logging.DEBUG), ("0", logging.INFO), ("1", logging.WARNING),
                                         ("2", logging.ERROR), ("3", logging.CRITICAL), (None, logging.WARNING)])
def test_log_level_from_torch_min_cnlog_level(text, level):
    assert _log.parse_level(text) == level


@pytest.mark.parametrize("text", ["4", "WARNING", "-2"])
def test_invalid_log_level_lists_valid_values(text):
    with pytest.raises(ValueError, match=r"TORCH_MIN_CNLOG_LEVEL.*-1 \(DEBUG\).*3 \(CRITICAL\)"):
        _log.parse_level(text)


def test_env_var_silences_fallback_warnings_in_a_fresh_process():
    script = (
        "import logging, torch, mluverify.device;"
        "logging.basicConfig(level=logging.DEBUG);"
        "torch.flip(torch.ones(2).to('mlu'), [0]);"
        "print('level', logging.getLogger('mluverify.device').level)"
    )
    quiet = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           env={**_env(), "TORCH_MIN_CNLOG_LEVEL": "2"}, timeout=120)
    loud = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**_env(), "TORCH_MIN_CNLOG_LEVEL": "1"}, timeout=120)
    assert quiet.returncode == loud.returncode == 0, quiet.stderr + loud.stderr
    assert "aten::flip runs on the CPU" not in quiet.stderr and "level 40" in quiet.stdout
    assert "aten::flip runs on the CPU" in loud.stderr


def _env():
    import os
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TORCH_MIN_CNLOG_LEVEL"}
    return {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def test_invalid_env_log_level_fails_the_import_clearly():
    done = subprocess.run([sys.executable, "-c", "import mluverify.device"], capture_output=True, text=True,
                          env={**_env(), "TORCH_MIN_CNLOG_LEVEL": "verbose"}, timeout=120)
    assert done.returncode != 0
    assert "ValueError: TORCH_MIN_CNLOG_LEVEL='verbose' is not a valid log level; valid: -1 (DEBUG)" in done.stderr


def test_fallbacks_of_backward_ops_on_autograd_threads_are_tracked():
    x = torch.randn(5).to("mlu").requires_grad_()
    y = torch.cumsum(x, 0)
    with md.track_fallbacks() as fb:
        y.sum().backward()  # cumsum's backward flips on autograd's device thread; flip has no kernel
    assert "aten::flip" in fb.ops
    assert torch.equal(x.grad.cpu(), torch.arange(5.0, 0.0, -1.0))


@pytest.mark.parametrize("make, divisor", [
    (lambda: torch.arange(7), 3),
    (lambda: torch.linspace(-3, 3, 9), 0.75),
])
def test_a_fallback_op_with_a_python_scalar_operand_matches_the_cpu(make, divisor):
    # The dispatcher passes `x % 3`'s scalar as a number where the schema wants a tensor.
    x = make()
    on_mlu = x.to("mlu") % divisor
    assert on_mlu.dtype == (x % divisor).dtype
    assert torch.equal(on_mlu.cpu(), x % divisor)


# -- the fallback rule ----------------------------------------------------------------------------
def _raising(message):
    def kernel(*args, **kwargs):
        raise RuntimeError(message)
    return kernel


def test_the_default_rule_runs_undeclared_ops_on_the_cpu_and_lets_kernel_failures_raise(kernel_override):
    from mluverify.device import _fallback

    assert _fallback.active_rule() == "cpu"
    x = torch.tensor([1.0, 2.0, 3.0]).to("mlu")
    with md.track_fallbacks() as tracked:
        assert torch.equal(torch.cumsum(x, 0).cpu(), torch.tensor([1.0, 3.0, 6.0]))
    assert tracked.reasons == {"aten::cumsum.out": ["no MLU kernel"]}
    kernel_override("aten::relu", _raising("relu kernel broke"))
    with pytest.raises(RuntimeError, match="relu kernel broke"):
        torch.relu(x)


def test_the_seed_rule_stops_at_an_undeclared_op_naming_it():
    x = torch.tensor([1.0, 2.0, 3.0]).to("mlu")
    with md.fallback_rule("seed"):
        with pytest.raises(md.NotDeclaredError, match=r"aten::cumsum.out cannot be dispatched to the MLU: it is not "
                                                      r"declared for the MLU"):
            torch.cumsum(x, 0)
        assert torch.equal((x * 2).cpu(), torch.tensor([2.0, 4.0, 6.0])), "declared ops still run"


def test_the_seed_rule_runs_a_failing_kernel_s_op_on_the_cpu_and_records_why(kernel_override):
    def half_done_then_broken(self, other, alpha=1):
        self[0] = 1000.0  # a partial write before failing must not leak into the CPU's result
        raise RuntimeError("add_ kernel broke")

    kernel_override("aten::relu", _raising("relu kernel broke"))
    kernel_override("aten::add_.Tensor", half_done_then_broken)
    x = torch.tensor([-1.0, 2.0]).to("mlu")
    with md.fallback_rule("seed"), md.track_fallbacks() as tracked:
        assert torch.equal(torch.relu(x).cpu(), torch.tensor([0.0, 2.0]))
        x.add_(torch.ones(2, device="mlu"))
    assert torch.equal(x.cpu(), torch.tensor([0.0, 3.0]))
    assert tracked.reasons == {"aten::relu": ["kernel failed: RuntimeError: relu kernel broke"],
                               "aten::add_.Tensor": ["kernel failed: RuntimeError: add_ kernel broke"]}


def test_the_rule_is_a_setting_with_a_process_default():
    from mluverify.core.config import ConfigError, Settings, parse_settings
    from mluverify.device import _config, _fallback

    assert _config.fallback_rule({}, Settings()) == "cpu"
    assert _config.fallback_rule({}, parse_settings({"fallback": "seed"})) == "seed"
    assert _config.fallback_rule({"MLUVERIFY_FALLBACK": "seed"}, Settings()) == "seed"
    with pytest.raises(ValueError, match="unknown MLUVERIFY_FALLBACK 'strict'; valid: 'cpu', 'seed'"):
        _config.fallback_rule({"MLUVERIFY_FALLBACK": "strict"}, Settings())
    with pytest.raises(ConfigError, match=r"fallback = 'strict'; valid: 'cpu', 'seed'"):
        parse_settings({"fallback": "strict"})
    with pytest.raises(ValueError, match="unknown fallback rule 'never'"):
        md.fallback_rule("never")
    md.set_fallback_rule("seed")
    try:
        assert _fallback.active_rule() == "seed"
        with md.fallback_rule("cpu"):
            assert _fallback.active_rule() == "cpu"
    finally:
        md.set_fallback_rule("cpu")
