"""Merging records: a run's shards into its ``records.parquet``, and several runs into one.

Merging is atomic (write to a temporary file, then rename) and can be repeated on an interrupted
run: ``mluverify report --merge DIR``. ``merge_runs`` joins the runs that several machines made
of one suite (``mluverify report --merge RUN... --out DIR``).
"""
from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any, Iterable

from mluverify.errors import RecordsError
from mluverify.report.loading import migrate, read_table
from mluverify.report.records import (COLUMNS, CORRUPT_KEY, RECORDS_FILE, SCHEMA_VERSION, SHARD_DIR,
                                      arrow_schema, check_run_dir, read_metadata, read_shards,
                                      write_metadata, write_records)

# A shard holding a line that is no record is kept under its name and this suffix.
CORRUPT_SUFFIX = ".corrupt"


def merge(run_dir: Path) -> Path:
    """Merge the shards of ``run_dir`` (with any earlier merged records) into ``records.parquet``.

    Atomic: readers see the old file or the new one, never half of one. Shards are kept until
    the new file is in place, then removed, so an interrupted merge can simply be run again. A
    line that is no record is skipped and named in ``run.json`` (``CORRUPT_KEY``); its shard is
    kept beside, renamed ``<shard>.corrupt``.
    """
    import pyarrow as pa

    run_dir = check_run_dir(run_dir)
    shards = sorted((run_dir / SHARD_DIR).glob("records-*.jsonl"))
    found = read_shards(run_dir)
    table = pa.concat_tables([*_merged_records(run_dir), found.table])
    metadata = read_metadata(run_dir)
    if found.corrupt:
        metadata[CORRUPT_KEY] = _joined(metadata.get(CORRUPT_KEY, []), found.corrupt)
        write_metadata(run_dir, metadata)
    # the merged records are of this version, whatever wrote them (or whether a run.json exists)
    target = write_records(run_dir, table, {**metadata, "schema_version": SCHEMA_VERSION})
    for shard in shards:
        if shard in found.corrupt_shards:
            shard.rename(shard.with_name(shard.name + CORRUPT_SUFFIX))
        else:
            shard.unlink()
    return target


def _joined(earlier: Iterable[str], later: Iterable[str]) -> list[str]:
    """``earlier`` then the entries of ``later`` it lacks (a merge run again names a line once)."""
    kept = list(earlier)
    return kept + [entry for entry in later if entry not in kept]


def _merged_records(run_dir: Path) -> list:
    """The records already merged into ``run_dir`` (none or one table, current schema, no
    metadata); a truncated or foreign file is a RecordsError naming it."""
    path = Path(run_dir) / RECORDS_FILE
    if not path.exists():
        return []
    table = migrate(read_table(path), path)
    return [table.select(list(COLUMNS)).cast(arrow_schema()).replace_schema_metadata(None)]


# Slices of one run must come from the same software: records of different versions are not
# one run.
MERGE_SAME_KEYS = ("mluverify_version", "torch_version", "git_revision")


def merge_runs(sources: Iterable[Path], into: Path) -> Path:
    """Merge run directories (e.g. the slices CI ran on several machines) into the run directory
    ``into``: their records (merged or still in shards) and metadata naming each source (and
    each shard line that was no record, under ``CORRUPT_KEY``, prefixed by its run). The
    sources are only read. The merged run is gated as a whole (no selection is kept): a slice
    that did not make it into the merge shows as missing cases, not as a smaller suite.

    Refuses (RecordsError) runs of different versions (``MERGE_SAME_KEYS``) and a case id found
    in more than one run, naming them.
    """
    import pyarrow as pa

    runs = [check_run_dir(source) for source in sources]
    metadata = [read_metadata(run) for run in runs]
    _check_same_versions(runs, metadata)
    found = [read_shards(run) for run in runs]
    tables = [pa.concat_tables([*_merged_records(run), shards.table]) for run, shards in zip(runs, found)]
    _check_disjoint(runs, tables)
    merged_metadata = _merged_metadata(runs, metadata)
    corrupt = [f"{run}/{entry}" for run, meta, shards in zip(runs, metadata, found)
               for entry in _joined(meta.get(CORRUPT_KEY, []), shards.corrupt)]
    if corrupt:
        merged_metadata[CORRUPT_KEY] = corrupt
    write_metadata(into, merged_metadata)
    return write_records(into, pa.concat_tables(tables), merged_metadata)


def _check_same_versions(runs: list[Path], metadata: list[dict[str, Any]]) -> None:
    for key in MERGE_SAME_KEYS:
        values = {meta.get(key, "") for meta in metadata}
        if len(values) > 1:
            listed = ", ".join(f"{run}: {meta.get(key, '') or '(unknown)'}" for run, meta in zip(runs, metadata))
            raise RecordsError(f"cannot merge runs of different {key} ({listed}); merge only slices of "
                               f"one run, made from the same revision and environment")


def _check_disjoint(runs: list[Path], tables: list) -> None:
    """Each case belongs to one slice: a case id in two runs means overlapping slices (or a
    run given twice)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    uniques = [pc.unique(table["case_id"]) for table in tables]
    counts = pc.value_counts(pa.concat_arrays(uniques)) if uniques else None
    duplicated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(duplicated) == 0:
        return
    example = duplicated[0].as_py()
    holders = [str(run) for run, ids in zip(runs, uniques) if pc.any(pc.equal(ids, example)).as_py()]
    raise RecordsError(f"cannot merge: {len(duplicated)} case id(s) are in more than one run, e.g. "
                       f"{example!r} in {' and '.join(holders)}; the runs overlap (or one was given twice)")


def _merged_metadata(runs: list[Path], metadata: list[dict[str, Any]]) -> dict[str, Any]:
    """The merged run's metadata: the shared versions, a new run id, the earliest start, and
    where each part came from."""
    import uuid

    from mluverify.report.completeness import KEYS, completeness_of, merged

    per_run = ("finished", "baseline", "interrupted", CORRUPT_KEY, *KEYS)
    first = {key: value for key, value in metadata[0].items() if key not in per_run}
    starts = [meta["started"] for meta in metadata if meta.get("started")]
    return {
        **first,
        "schema_version": SCHEMA_VERSION,
        "run_id": uuid.uuid4().hex[:12],
        "host": ", ".join(sorted({meta.get("host", "") for meta in metadata} - {""})),
        "command": shlex.join(sys.argv),
        "started": min(starts) if starts else first.get("started", ""),
        "merged_from": [{"run_dir": str(run), "run_id": meta.get("run_id", ""), "host": meta.get("host", "")}
                        for run, meta in zip(runs, metadata)],
        **merged(completeness_of(meta) for meta in metadata).as_metadata(),
    }
