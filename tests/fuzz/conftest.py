"""Shared set-up of the fuzzer's tests: the planted plugin and an in-process runner for it."""
import pytest

from mluverify.cli.fuzz import TargetRunner

PLANTED = "fuzz_planted"


@pytest.fixture(scope="session")
def planted_runner():
    """Runs programs in this process on the built-in targets and the planted ones."""
    return TargetRunner([PLANTED])
