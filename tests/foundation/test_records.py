"""Shards survive crashes; merging is atomic, repeatable, and loses no record."""
import json
import math

import pyarrow.parquet as pq
import pytest

from mluverify.errors import RecordsError
from mluverify.report import merging, records


def a_record(i, **overrides):
    row = {"run_id": "r1", "case_id": f"suites/ops/test_x.py::test_{i}", "op": "add",
           "target": "mlu:cnnl", "value": i / 1000, "bound": 0.003, "passed": True,
           "headroom": math.inf if i == 0 else 3 / i, "seed": i}
    row.update(overrides)
    return row


def test_shard_lines_are_flushed_as_written(tmp_path):
    writer = records.ShardWriter(tmp_path, "gw0")
    writer.write(a_record(1))
    # readable before close: a crash after this line keeps the record
    assert records.read_shards(tmp_path).table.column("case_id").to_pylist() == [a_record(1)["case_id"]]
    writer.close()


def test_a_torn_last_line_is_skipped(tmp_path):
    writer = records.ShardWriter(tmp_path)
    writer.write(a_record(1))
    writer.close()
    with open(writer.path, "a") as fh:
        fh.write('{"run_id": "r1", "case_')  # the process died mid-write
    assert records.read_shards(tmp_path).table.num_rows == 1


def test_merge_writes_every_record_of_every_shard_once(tmp_path):
    for worker, ids in (("gw0", range(0, 5)), ("gw1", range(5, 12))):
        writer = records.ShardWriter(tmp_path, worker)
        for i in ids:
            writer.write(a_record(i))
        writer.close()
    path = merging.merge(tmp_path)
    table = pq.read_table(path)
    assert table.num_rows == 12
    assert sorted(table.column("seed").to_pylist()) == list(range(12))
    assert table.schema.names == list(records.COLUMNS)
    assert not list((tmp_path / records.SHARD_DIR).glob("*.jsonl"))
    assert table.column("headroom").to_pylist()[0] == math.inf


def test_merging_again_appends_later_shards_to_the_merged_records(tmp_path):
    writer = records.ShardWriter(tmp_path)
    writer.write(a_record(1))
    writer.close()
    merging.merge(tmp_path)
    writer = records.ShardWriter(tmp_path)
    writer.write(a_record(2))
    writer.close()
    assert pq.read_table(merging.merge(tmp_path)).num_rows == 2


def test_run_metadata_travels_in_the_parquet_schema(tmp_path):
    records.write_metadata(tmp_path, records.run_metadata("r1"))
    writer = records.ShardWriter(tmp_path)
    writer.write(a_record(1))
    writer.close()
    meta = json.loads(pq.read_schema(merging.merge(tmp_path)).metadata[b"mluverify"])
    assert meta["run_id"] == "r1" and meta["schema_version"] == records.SCHEMA_VERSION
    assert meta["torch_version"].startswith("2.")


def test_unknown_columns_and_unwritable_dirs_are_named(tmp_path):
    writer = records.ShardWriter(tmp_path)
    with pytest.raises(RecordsError, match="colour"):
        writer.write(a_record(1, colour="red"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(RecordsError, match="cannot write records"):
        records.ShardWriter(blocker / "run")
    with pytest.raises(RecordsError, match="does not exist"):
        merging.merge(tmp_path / "nowhere")



def test_the_typed_record_keeps_the_columns_of_the_committed_baseline():
    """The baseline in reports/baseline was written before the record was typed: its schema
    is the column list (names, order, types) the record's fields must begin with; the columns
    of later schema versions follow, and the baseline loads with them (migrated)."""
    from dataclasses import fields
    from pathlib import Path

    from mluverify.core.record import Record
    from mluverify.report.loading import load

    baseline = Path(__file__).parents[2] / "reports" / "baseline"
    written = pq.read_schema(baseline / "records.parquet").remove_metadata()
    assert [column.name for column in fields(Record)][:len(written.names)] == written.names
    assert all(records.arrow_schema().field(name).equals(written.field(name)) for name in written.names)
    assert list(load(baseline).columns) == list(records.COLUMNS)


def test_a_record_round_trips_through_the_shard_writer(tmp_path):
    import numpy as np

    from mluverify.core.backends import Execution
    from mluverify.core.case import Case, Target
    from mluverify.core.record import make_record
    from mluverify.judge import compare

    expected = np.linspace(1, 2, 16, dtype=np.float32)
    actual = expected * np.float32(1.001)
    case = Case("t.py::test_add[mlu:cnnl]", "add", Target("mlu", "cnnl"), suite="ops", seed=3, shape="16")
    execution = Execution(actual, fallback_ops=("aten::erf",), info={"device_impl": "emulator", "core_number": 4})
    record = make_record("r1", case, compare(actual, expected), execution, 0.25, status="passed")
    writer = records.ShardWriter(tmp_path)
    writer.write(record)
    writer.close()
    (row,) = records.read_shards(tmp_path).table.to_pylist()
    assert row == record.as_row()
    assert (row["case_id"], row["target"], row["fallback_ops"], row["device_impl"], row["core_number"]) == \
        (case.case_id, "mlu:cnnl", "aten::erf", "emulator", 4)
    # rel_mse = sqrt(sum((a-e)^2) / sum(e^2)) = 0.001 for a uniform 0.1 % error
    assert (row["metric"], row["value"], row["passed"]) == ("rel_mse", pytest.approx(1e-3, rel=1e-3), True)


def test_a_record_keeps_the_raw_rel_mse_the_eps_flag_and_ulps_only_with_a_golden_result():
    import numpy as np

    from mluverify.core.backends import Execution
    from mluverify.core.case import Case, Target
    from mluverify.core.record import make_record
    from mluverify.judge import compare

    golden = np.ones(8)
    expected = golden.astype(np.float32)
    actual = (golden + 2.0 ** -23).astype(np.float32)  # 1 float32 ULP above 1 everywhere
    case = Case("t.py::test_copy[mlu:cnnl]", "copy", Target("mlu", "cnnl"), suite="ops", dtype="float32")
    with_golden = make_record("r1", case, compare(actual, expected, golden=golden, dtype="float32"),
                              Execution(actual), 0.0, status="passed")
    # 8 x (2^-23)^2 <= (2/16384)^2: judged 0; raw sqrt(8 x 2^-46 / 8) = 2^-23
    assert (with_golden.value, with_golden.eps_zeroed) == (0.0, True)
    assert with_golden.raw_rel_mse == pytest.approx(2.0 ** -23)
    assert (with_golden.ulp_max, with_golden.ulp_p99) == (1.0, 1.0)
    assert "raw_rel_mse" not in with_golden.extra_metrics and "ulp" not in with_golden.extra_metrics
    without = make_record("r1", case, compare(actual, expected), Execution(actual), 0.0, status="passed")
    assert without.ulp_max is None and without.ulp_p99 is None  # absent, not 0
    errored = make_record("r1", case, None, Execution(actual), 0.0, status="errored", error="boom")
    assert errored.raw_rel_mse is None and errored.eps_zeroed is None
