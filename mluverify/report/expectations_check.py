"""Which waivers still hold: ``mluverify expectations check`` and the gate's opt-in stale rule.

A waiver is matched against a run's records by the one rule of ``mluverify.core.expectations``
(its case-id glob, then its scope on the record's target, core version, device implementation
and the run's torch version). It is **not exercised** when none of the targets it names (its
scope's, else those in its case-id glob's parameters: ``*[openvino:*-relu]*``) ran in these
runs: they cannot say whether it still holds (a real compiler's waivers, in a run of the MLU
targets). Else it is **stale** when it covers no record (it matches nothing in these runs) or
when every case it covers passed (the deviation is gone). Expired and
uncategorised waivers are reported as well, **uncapped** ones (an accuracy waiver, all but
``skip`` and category ``unsupported``, without a ceiling ``max`` would excuse any error: the
report gives the worst value it covers, what a ceiling is written from) and those whose
covered comparisons lie **above the ceiling** (each record kind against its own: ``max_by_kind``).
``prune`` rewrites an expectations file without the stale entries, keeping its comments and
layout (tomlkit).
"""
from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Collection, Iterable, NamedTuple

from mluverify.core.expectations import ExpectationsFile, Waiver, Where, case_id_regex, matches_case_id
from mluverify.core.gradients import OUTPUT
from mluverify.core.status import PASSED
from mluverify.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

WHERE_COLUMNS = ("target", "core_version", "device_impl", "torch_version")
# A target (``backend:mode``, ``mluverify.core.case.Target``) among a case-id glob's parameters,
# perhaps a glob itself: ``openvino:*`` in ``test_unary[*-openvino:*-relu]*``.
TARGET_PARAMETER = re.compile(r"[\w*?]+:[\w*?]+")


@dataclass(frozen=True)
class WaiverCheck:
    """What the runs say of one waiver: ``cases`` it covers, how many of them ``passing``, and
    ``worst``: the largest judged value among its comparisons that did not pass (NaN: none),
    what a ceiling is written from; ``worst_by_kind``: the same per record kind. ``targets``:
    the targets it names, as globs (empty: any); ``exercised``: whether one of them ran in the
    checked records (else the records cannot say whether it still holds)."""

    source: str
    key: str
    case_id_glob: str
    waiver: Waiver
    cases: int
    passing: int
    expired: bool
    worst: float = math.nan
    worst_by_kind: tuple[tuple[str, float], ...] = ()
    targets: tuple[str, ...] = ()
    exercised: bool = True

    @property
    def matches_nothing(self) -> bool:
        """Its targets ran, yet it covers no record."""
        return self.exercised and self.cases == 0

    @property
    def not_exercised(self) -> str:
        """Why the records cannot judge it ("" when they can): none of its targets ran."""
        if self.exercised:
            return ""
        if not self.targets:
            return "not exercised: these runs hold no records"
        plural = "s" if len(self.targets) > 1 else ""
        return f"not exercised: target{plural} {', '.join(self.targets)} not in these runs"

    @property
    def all_pass(self) -> bool:
        return self.cases > 0 and self.passing == self.cases

    @property
    def stale(self) -> bool:
        return self.matches_nothing or self.all_pass

    @property
    def uncapped(self) -> bool:
        """An accuracy waiver (``Waiver.needs_ceiling``) without a ceiling: it excuses any error."""
        return self.waiver.needs_ceiling and self.waiver.max is None

    @property
    def problems(self) -> list[str]:
        """Why the entry needs attention (empty: it still holds)."""
        measured = f" (worst value here {self.worst:.4g})" if self.worst == self.worst else ""
        found = [("matches nothing", self.matches_nothing),
                 (f"all {self.cases} cases it covers pass", self.all_pass),
                 (f"expired on {self.waiver.until.isoformat()}", self.expired),
                 ("uncategorised", not self.waiver.category),
                 (f"no ceiling: an accuracy waiver needs max = <measured worst case x margin>{measured}",
                  self.uncapped)]
        above = [f"above its ceiling: worst {kind} value {worst:.4g} > {' '.join(map(str, self.waiver.ceiling(kind)))}"
                 for kind, worst in self.worst_by_kind if self.waiver.over_ceiling(worst, kind)]
        return [text for text, applies in found if applies] + above


def check_expectations(records: "pd.DataFrame", files: Iterable[ExpectationsFile],
                       today: dt.date | None = None) -> list[WaiverCheck]:
    """One ``WaiverCheck`` per waiver of ``files`` against ``records`` (columns ``case_id``,
    ``status``, ``value``, ``kind`` and ``WHERE_COLUMNS``; a missing one is not known, a
    record of no kind an output)."""
    today = today or dt.date.today()
    records = records.reindex(columns=["case_id", "status", "value", "kind", *WHERE_COLUMNS])
    case_passes = (records["status"] == PASSED).groupby(records["case_id"]).all()
    not_passing = records["value"].astype(float).where(records["status"] != PASSED)
    kinds = records["kind"].where(records["kind"].notna() & (records["kind"] != ""), OUTPUT)
    places = Places.of(records)
    ran = set(records["target"].dropna().astype(str)) - {""} if len(records) else set()
    checks = []
    for file in files:
        for key, waiver in file.waivers.items():
            glob = file.case_id_globs[key]
            rows = covered_rows(records, glob, waiver, places)
            covered = records.loc[rows, "case_id"].unique()
            by_kind = not_passing[rows].groupby(kinds[rows]).max().dropna()
            targets = named_targets(glob, waiver)
            checks.append(WaiverCheck(str(file.path), key, glob, waiver, len(covered),
                                      int(case_passes.reindex(covered).sum()), waiver.expired(today),
                                      float(not_passing[rows].max()),
                                      tuple((str(kind), float(worst)) for kind, worst in by_kind.items()),
                                      targets, len(covered) > 0 or targets_ran(targets, ran, len(records) > 0)))
    return checks


def named_targets(glob: str, waiver: Waiver) -> tuple[str, ...]:
    """The targets ``glob -> waiver`` applies to, as globs: its scope's, else the targets among
    the glob's parameters (``t.py::test_x[*-openvino:*-relu]*`` -> ``("openvino:*",)``); empty
    when it names none (it applies to any target)."""
    if waiver.scope.targets:
        return tuple(sorted(waiver.scope.targets))
    return tuple(dict.fromkeys(TARGET_PARAMETER.findall(glob.partition("[")[2])))


def targets_ran(targets: tuple[str, ...], ran: Collection[str], any_records: bool) -> bool:
    """Whether a waiver naming ``targets`` (``named_targets``; empty: any) is exercised by runs
    of the targets ``ran`` (``any_records``: whether the runs hold any record at all)."""
    if not targets:
        return any_records
    return any(matches_case_id(target, name) for target in targets for name in ran)


def covered_rows(records: "pd.DataFrame", glob: str, waiver: Waiver,
                 places: "Places | None" = None) -> "pd.Series":
    """Per record, whether ``glob -> waiver`` covers it: ``covers`` on a whole frame (the glob's
    literal head narrows the rows before the regular expression runs; the scope is decided once
    per distinct place)."""
    import numpy as np
    import pandas as pd

    head = re.split(r"[*?]", glob, maxsplit=1)[0]
    ids = records["case_id"].astype(str)
    near = ids.str.startswith(head).to_numpy(dtype=bool)
    hit = near.copy()
    hit[near] = ids[near].str.match(case_id_regex(glob)).to_numpy(dtype=bool)
    codes, where = places or Places.of(records)
    holds = np.array([waiver.scope.holds(place) for place in where], dtype=bool)
    return pd.Series(hit & holds[codes], index=records.index)


class Places(NamedTuple):
    """Per record, the index (``codes``) of its ``Where`` among the run's distinct ``places``."""

    codes: "np.ndarray"
    places: list[Where]

    @classmethod
    def of(cls, records: "pd.DataFrame") -> "Places":
        import pandas as pd

        frame = records.reindex(columns=list(WHERE_COLUMNS)).astype(object)
        frame = frame.where(frame.notna() & (frame != ""), None)
        keys = pd.Series(list(zip(*(frame[column] for column in WHERE_COLUMNS))), index=records.index, dtype=object)
        codes, distinct = pd.factorize(keys)
        return cls(codes, [Where(*key) for key in distinct])


def prune(file: ExpectationsFile, keys: Collection[str]) -> int:
    """Rewrite ``file`` without the waivers ``keys``, keeping comments and layout; how many
    entries it removed."""
    import tomlkit

    if file.path is None or not keys:
        return 0
    document = tomlkit.parse(Path(file.path).read_text(encoding="utf-8"))
    table = document
    for part in file.table:
        table = table[part]
    removed = [key for key in keys if key in table]
    if len(removed) != len(set(keys)):
        raise ConfigError(f"{file.path}: no waiver {sorted(set(keys) - set(removed))!r} to prune")
    for key in removed:
        del table[key]
    Path(file.path).write_text(tomlkit.dumps(document), encoding="utf-8")
    return len(removed)
