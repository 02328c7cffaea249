import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from mluverify.errors import RecordsError
from mluverify.report import loading
from mluverify.report.loading import load
from mluverify.report.merging import merge
from mluverify.report.records import COLUMNS, SCHEMA_VERSION, ShardWriter, run_metadata, to_table, write_metadata

from report_records import make_record, write_run

# The columns schema version 2 added (status and provenance), listed by hand.
V2_COLUMNS = {"status", "kind", "leaf", "executed_as", "op_on_cpu", "not_fused_reason", "device_impl",
              "core_version", "core_number", "device_error", "reference_error", "error_ratio",
              "compile_s", "graph_breaks", "recompiles", "model", "call_site"}


def test_load_returns_every_record_with_every_column(tmp_path):
    rows = [make_record("t[a]", 0.001), make_record("t[b]", 0.005, op="mul")]
    frame = load(write_run(tmp_path / "run", rows))
    assert list(frame.columns) == list(COLUMNS)
    assert frame["case_id"].tolist() == ["t[a]", "t[b]"]
    assert frame["passed"].tolist() == [True, False]


def test_load_accepts_the_parquet_file_itself(tmp_path):
    run = write_run(tmp_path / "run", [make_record("t[a]", 0.001)])
    assert len(load(run / "records.parquet")) == 1


def test_missing_run_names_the_path(tmp_path):
    with pytest.raises(RecordsError, match="nowhere.*does not exist"):
        load(tmp_path / "nowhere")


def test_directory_without_records_names_the_file(tmp_path):
    with pytest.raises(RecordsError, match="records.parquet does not exist"):
        load(tmp_path)


def test_unmerged_shards_suggest_merging(tmp_path):
    writer = ShardWriter(tmp_path)
    writer.write(make_record("t[a]", 0.001))
    writer.close()
    with pytest.raises(RecordsError, match="unmerged shards.*--merge"):
        load(tmp_path)


def test_corrupt_parquet_names_the_file(tmp_path):
    (tmp_path / "records.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(RecordsError, match=r"records\.parquet is not a readable parquet file"):
        load(tmp_path)


def test_foreign_parquet_names_the_file_and_missing_columns(tmp_path):
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "records.parquet")
    with pytest.raises(RecordsError, match=r"records\.parquet is not a mluverify records file.*'case_id'"):
        load(tmp_path)


def test_newer_schema_is_refused_naming_both_versions(tmp_path):
    write_run(tmp_path, [make_record("t[a]", 0.001)], {"schema_version": 99})
    with pytest.raises(RecordsError, match=f"version 99, newer than version {SCHEMA_VERSION}"):
        load(tmp_path)


def _version0_table():
    """A pretend version-0 file: the judged value was called ``judged``."""
    table = to_table([make_record("t[a]", 0.002)])
    names = ["judged" if n == "value" else n for n in table.column_names]
    return table.rename_columns(names).replace_schema_metadata({"mluverify": json.dumps({"schema_version": 0})})


def test_older_schema_without_migration_is_refused_naming_both_versions(tmp_path):
    pq.write_table(_version0_table(), tmp_path / "records.parquet")
    with pytest.raises(RecordsError, match=f"version 0; this mluverify reads version {SCHEMA_VERSION} and has no migration"):
        load(tmp_path)


def test_older_schema_is_migrated_step_by_step(tmp_path, monkeypatch):
    def rename_judged(table):
        return table.rename_columns(["value" if n == "judged" else n for n in table.column_names])

    monkeypatch.setitem(loading.MIGRATIONS, 0, rename_judged)
    pq.write_table(_version0_table(), tmp_path / "records.parquet")
    assert load(tmp_path)["value"].tolist() == [0.002]


def test_version1_records_get_a_status_from_passed_waived_and_error(tmp_path):
    rows = [dict(make_record("t[ok]", 0.001), passed=True), dict(make_record("t[bad]", 0.5), passed=False),
            dict(make_record("t[w]", 0.5), passed=False, waived=True),
            dict(make_record("t[e]", 0.5), passed=False, error="RuntimeError: boom")]
    table = to_table(rows)
    version1 = [n for n in table.column_names if n not in V2_COLUMNS | {"worst"}]
    pq.write_table(table.select(version1).replace_schema_metadata({"mluverify": json.dumps({"schema_version": 1})}),
                   tmp_path / "records.parquet")
    frame = load(tmp_path)
    assert frame["status"].tolist() == ["passed", "failed", "waived", "errored"]
    assert frame["core_version"].isna().all() and list(frame.columns) == list(COLUMNS)


def test_version2_records_load_without_worst_elements(tmp_path):
    table = to_table([make_record("t[a]", 0.001, status="passed")])
    version2 = [n for n in table.column_names if n != "worst"]
    pq.write_table(table.select(version2).replace_schema_metadata({"mluverify": json.dumps({"schema_version": 2})}),
                   tmp_path / "records.parquet")
    frame = load(tmp_path)
    assert frame["status"].tolist() == ["passed"] and frame["worst"].isna().all()
    assert list(frame.columns) == list(COLUMNS)


def test_empty_run_loads_as_an_empty_frame(tmp_path):
    write_metadata(tmp_path, run_metadata("empty"))  # a run that recorded nothing
    merge(tmp_path)
    frame = load(tmp_path)
    assert frame.empty and list(frame.columns) == list(COLUMNS)
