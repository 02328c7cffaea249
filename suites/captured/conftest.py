"""The captured suite: the cases of the suites' networks (``<model>/cases.parquet``, collected by
mluverify's ``--mlu-cases`` collector wherever a cases file is met), replayed on every target.

Selection:

- full-size ResNet50 and VGG19 (``HEAVY``) are ``mlu_heavy``: they run with ``--mlu-heavy``;
- so are layout ops (``LAYOUT_OPS``: views, copies) on ``mlu:cnml``: fused alone they are a
  program that moves bytes, and each costs a capture and a build; ``mlu:cnnl`` replays them.

Which cases a fused target replays at all is the collector's rule for every cases file, a
user's included (``mluverify.pytest_plugin.cases.FusedRule``); device moves, host reads and
mluverify's own ops were never captured as cases (``mluverify.dump.capture``).
"""
from __future__ import annotations

import pytest

from mluverify.pytest_plugin.cases import CapturedCaseItem

HEAVY = ("resnet50", "vgg19")
LAYOUT_OPS = frozenset({"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand",
                        "clone", "contiguous", "split", "select", "slice", "unsqueeze", "squeeze",
                        "flatten"})
FUSED_TARGET = "mlu:cnml"


@pytest.hookimpl(tryfirst=True)  # before suites/conftest.py turns mlu_heavy into skips
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, CapturedCaseItem):
            continue
        if item.case.model in HEAVY:
            item.add_marker(pytest.mark.mlu_heavy)
        if str(item.mlu_target) == FUSED_TARGET and item.case.op_name.split(".")[0] in LAYOUT_OPS:
            item.add_marker(pytest.mark.mlu_heavy)
