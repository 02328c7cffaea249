"""Records -> pandas: loading, summaries, HTML / markdown / CSV reports, regression diff,
tolerance audit and the CI gate.

Importing this package is cheap: the public names below resolve lazily (pandas and matplotlib
load only when one of them is first used).
"""
from __future__ import annotations

import importlib
from typing import Any

# public name -> the submodule defining it
_EXPORTS: dict[str, str] = {
    "load": "mluverify.report.loading",
    "summarize": "mluverify.report.tables",
    "run_tables": "mluverify.report.tables",
    "diff_runs": "mluverify.report.diff",
    "RunDiff": "mluverify.report.diff",
    "audit_runs": "mluverify.report.audit",
    "Audit": "mluverify.report.audit",
    "evaluate_gate": "mluverify.report.gate",
    "GateResult": "mluverify.report.gate",
    "finish_run": "mluverify.report.finish",
    "write_reports": "mluverify.report.finish",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
