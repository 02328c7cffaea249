"""Fixtures for the fusion tests: a clean fusion environment and the seeds' TestModel."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mluverify.device import mlu_model  # noqa: E402

FUSION_ENV = ("DEBUG_FORCED_FALLBACK_OPS", "FUSED_KERNEL_DEBUG", "FUSED_KERNEL_DEBUG_DIR", "TORCH_MIN_CNLOG_LEVEL",
              "DISABLE_MLU_FUSION", "MM_CPP_MIN_LOG_LEVEL")


@pytest.fixture(autouse=True)
def fusion_defaults(monkeypatch):
    """Each test starts with fusion on, no fusion env vars and inference mode (as the seeds ask)."""
    for name in FUSION_ENV:
        monkeypatch.delenv(name, raising=False)
    previous = mlu_model._jit_can_fuse_on_mlu()
    mlu_model._jit_override_can_fuse_on_mlu(True)
    with torch.no_grad():
        yield
    mlu_model._jit_override_can_fuse_on_mlu(previous)
