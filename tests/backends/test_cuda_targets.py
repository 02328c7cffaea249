"""The CUDA targets on a machine with a GPU: cases run there, say which GPU ran them, and
``cuda:tf32`` really computes float32 matmuls in TF32 while ``cuda:eager`` does not.

Without a GPU every test here skips with the reason; ``tests/backends/test_targets.py`` checks
those skips."""
from __future__ import annotations

import pytest
import torch

from mluverify.core.backends import BackendRegistry
from mluverify.core.case import Case
from mluverify.core.plugin_manager import call_hook, new_plugin_manager
from mluverify.core.status import PASSED
from mluverify.report.loading import load

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a GPU: torch.cuda.is_available() is False on this machine")
CUDA_TARGETS = ("cuda:eager", "cuda:tf32", "cuda:inductor")


@pytest.fixture(scope="module")
def registry() -> BackendRegistry:
    registry = BackendRegistry()
    call_hook(new_plugin_manager(), "mluverify_add_backends", registry=registry)
    return registry


def test_cases_run_on_the_gpu_and_name_it(pytester):
    pytester.makepyfile(test_any="""
        import torch

        def test_ops(verify):
            verify(torch.add, torch.ones(3), torch.full((3,), 2.0), op="add")
            verify(torch.sigmoid, torch.linspace(-4, 4, 64), op="sigmoid")
    """)
    targets = [arg for target in CUDA_TARGETS for arg in ("--mlu-target", target)]
    run = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", *targets, "-p", "no:cacheprovider",
                                           "--mlu-report", str(run))
    result.assert_outcomes(passed=3)
    records = load(run)
    assert sorted(records.target.unique()) == sorted(CUDA_TARGETS)
    assert len(records) == 2 * len(CUDA_TARGETS)
    assert set(records.device_impl) == {torch.cuda.get_device_name()}
    assert set(records.status) == {PASSED}


def _matmul_error(registry: BackendRegistry, target: str) -> float:
    """Norm-wise error of a 512x512 float32 matmul on ``target`` against the float64 product."""
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(512, 512, generator=generator) for _ in range(2))
    resolved, backend = registry.resolve(target)
    case = Case("mm", "matmul", resolved)
    out = backend.execute(torch.matmul, (a, b), {}, case=case).output
    exact = a.double() @ b.double()
    return float((out.double() - exact).norm() / exact.norm())


def test_tf32_rounds_the_inputs_of_a_matmul_and_eager_does_not(registry):
    # TF32 keeps 10 of float32's 23 mantissa bits: each input is rounded to within 2**-11
    # relative, so a product of normal random matrices is off by about 2**-11 * sqrt(2/3) ~ 4e-4
    # norm-wise. IEEE float32 accumulation of 512 terms stays near 2**-24 * sqrt(512) ~ 1e-6.
    eager, tf32 = _matmul_error(registry, "cuda:eager"), _matmul_error(registry, "cuda:tf32")
    assert eager < 1e-5, eager
    assert 1e-4 < tf32 < 2e-3, tf32
