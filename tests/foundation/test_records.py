"""Shards survive crashes; merging is atomic, repeatable, and loses no record."""
import json
import math

import pyarrow.parquet as pq
import pytest

from mluverify.errors import RecordsError
from mluverify.report import records


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
    assert records.read_shards(tmp_path).column("case_id").to_pylist() == [a_record(1)["case_id"]]
    writer.close()


def test_a_torn_last_line_is_skipped(tmp_path):
    writer = records.ShardWriter(tmp_path)
    writer.write(a_record(1))
    writer.close()
    with open(writer.path, "a") as fh:
        fh.write('{"run_id": "r1", "case_')  # the process died mid-write
    assert records.read_shards(tmp_path).num_rows == 1


def test_merge_writes_every_record_of_every_shard_once(tmp_path):
    for worker, ids in (("gw0", range(0, 5)), ("gw1", range(5, 12))):
        writer = records.ShardWriter(tmp_path, worker)
        for i in ids:
            writer.write(a_record(i))
        writer.close()
    path = records.merge(tmp_path)
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
    records.merge(tmp_path)
    writer = records.ShardWriter(tmp_path)
    writer.write(a_record(2))
    writer.close()
    assert pq.read_table(records.merge(tmp_path)).num_rows == 2


def test_run_metadata_travels_in_the_parquet_schema(tmp_path):
    records.write_metadata(tmp_path, records.run_metadata("r1"))
    writer = records.ShardWriter(tmp_path)
    writer.write(a_record(1))
    writer.close()
    meta = json.loads(pq.read_schema(records.merge(tmp_path)).metadata[b"mluverify"])
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
        records.merge(tmp_path / "nowhere")

