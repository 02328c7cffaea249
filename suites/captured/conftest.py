"""The captured suite: the cases of the suites' networks (``<model>/cases.parquet``, collected by
mluverify's ``--mlu-cases`` collector wherever a cases file is met), replayed on every target.

Selection:

- full-size ResNet50 and VGG19 (``HEAVY``) are ``mlu_heavy``: they run with ``--mlu-heavy``;
- so are layout ops (``LAYOUT_OPS``: views, copies) on ``mlu:cnml``: fused alone they are a
  program that moves bytes, and each costs a capture and a build; ``mlu:cnnl`` replays them;
- on ``mlu:cnml`` only the ops its fused engine accepts (``mluverify_fusible_ops``; an in-place
  op by its out-of-place form) are replayed: the engine runs every other op layer by layer,
  as ``mlu:cnnl`` does, which replays them all. The others are skipped with that reason.
"""
from __future__ import annotations

import pytest

from mluverify.pytest_plugin.cases import CapturedCaseItem

HEAVY = ("resnet50", "vgg19")
LAYOUT_OPS = frozenset({"view", "_unsafe_view", "reshape", "t", "transpose", "permute", "expand",
                        "clone", "contiguous", "split", "select", "slice", "unsqueeze", "squeeze",
                        "flatten"})
FUSED_TARGET = "mlu:cnml"


def _fusible_ops() -> frozenset[str]:
    from mluverify.core.plugin_manager import get_plugin_manager

    return frozenset(name.removesuffix(".default")
                     for answer in get_plugin_manager().hook.mluverify_fusible_ops() for name in answer)


def _out_of_place(op: str) -> str:
    """``aten::relu_`` -> ``aten::relu``; ``aten::div_.Scalar`` -> ``aten::div.Scalar``."""
    name, dot, overload = op.partition(".")
    return name.removesuffix("_") + dot + overload


@pytest.hookimpl(tryfirst=True)  # before suites/conftest.py turns mlu_heavy into skips
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    fusible = None
    for item in items:
        if not isinstance(item, CapturedCaseItem):
            continue
        if item.case.model in HEAVY:
            item.add_marker(pytest.mark.mlu_heavy)
        if str(item.mlu_target) == FUSED_TARGET:
            if item.case.op_name.split(".")[0] in LAYOUT_OPS:
                item.add_marker(pytest.mark.mlu_heavy)
            fusible = _fusible_ops() if fusible is None else fusible
            if _out_of_place(item.case.op) not in fusible:
                item.add_marker(pytest.mark.skip(
                    reason=f"{item.case.op} is outside {FUSED_TARGET}'s fusible set "
                           f"(mluverify_fusible_ops): the engine runs it layer by layer, as "
                           f"mlu:cnnl does, which replays it"))
