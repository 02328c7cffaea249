"""Shared set-up for mluverify's own tests."""
import pytest
import torch


@pytest.fixture(autouse=True)
def _restore_grad_mode():
    """The seeds' scripts call ``torch.set_grad_enabled(False)`` at module level; tests that run
    them in-process must not turn autograd off for the tests after them."""
    enabled = torch.is_grad_enabled()
    yield
    torch.set_grad_enabled(enabled)
