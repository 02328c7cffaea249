"""Built-in plugin: the ``captured`` case source, the cases of ``mluverify capture`` files.

``mluverify_case_sources`` returns one source, ``captured``, without paths;
``source.with_paths(paths).cases(ops)`` yields a ``ReplayCase`` per unique captured case of
each cases file (a directory made by ``mluverify capture`` / ``mluverify.dump.capture``, or
its ``cases.parquet``), in capture order, keeping those of ``ops`` when ``ops`` is given
(``"aten::add.Tensor"``, ``"add.Tensor"`` or ``"add"``). The pytest option ``--mlu-cases``
replays them (``mluverify.pytest_plugin.cases``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from mluverify.core.hookspecs import hookimpl


@dataclass(frozen=True)
class CapturedCasesSource:
    """The ``captured`` case source: the unique cases of cases files."""

    name: str = "captured"
    paths: tuple[str, ...] = ()

    def with_paths(self, paths: Iterable[str | os.PathLike[str]]) -> "CapturedCasesSource":
        """This source reading ``paths`` (cases directories or ``cases.parquet`` files)."""
        return replace(self, paths=tuple(os.fspath(path) for path in paths))

    def cases(self, ops: Iterable[str] = ()) -> Iterator:
        """Every case of every path (of ``ops`` if given); RecordsError names a bad file."""
        from mluverify.dump import read_replay_cases

        wanted = set(ops)
        for path in self.paths:
            _, cases = read_replay_cases(path)
            for case in cases:
                if not wanted or wanted & {case.op, case.op_name, case.op_name.split(".")[0]}:
                    yield case


@hookimpl
def mluverify_case_sources() -> Iterable[CapturedCasesSource]:
    return [CapturedCasesSource()]
