"""Rebuilding captured inputs: strides (expanded and transposed), precisions, integer and boolean
recipes, cases replay skips, and cases files that cannot be read."""
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from mluverify.dump import capture, read_cases, read_replay_cases
from mluverify.dump._cases import META_KEY
from mluverify.dump._replay import restride, synthesise
from mluverify.errors import RecordsError


def test_restride_keeps_transposed_and_expanded_layouts():
    values = torch.arange(6.0).reshape(2, 3)
    transposed = restride(values, [2, 3], [1, 2])
    assert transposed.stride() == (1, 2) and torch.equal(transposed, values)
    row = torch.tensor([1.0, 2.0, 3.0])
    expanded = restride(row.expand(4, 3).contiguous(), [4, 3], [0, 1])
    assert expanded.stride() == (0, 1) and expanded.untyped_storage().nbytes() == 3 * 4
    assert torch.equal(expanded, row.expand(4, 3))


def test_captured_strides_come_back(tmp_path):
    weight = torch.randn(3, 4)
    with capture(tmp_path / "cases", max_bytes=None) as c:
        torch.ones(2, 1).expand(2, 3) * weight.t()[:2]  # stride-0 input, transposed slice
    (mul,) = [case for case in read_replay_cases(c.path)[1] if case.op == "aten::mul.Tensor"]
    replay = mul.build()
    assert [t.stride() for t in replay.args] == [(1, 0), (1, 4)]
    assert torch.equal(replay.fn(*replay.args), torch.ones(2, 3) * weight.t()[:2])


def test_half_precision_cases_run_in_half_on_the_device(tmp_path):
    x = torch.randn(4, 4).half()
    with capture(tmp_path / "cases", max_bytes=None) as c:
        torch.relu(x)
    (case,) = read_replay_cases(c.path)[1]
    replay = case.build()
    # the CPU reference gets the same values in float32; the session casts the device's to half
    assert replay.dtype == "float16" and replay.args[0].dtype == torch.float32
    assert torch.equal(replay.args[0], x.float())


def test_integer_and_boolean_recipes():
    ints = synthesise({"shape": [1000], "min": 2.0, "max": 9.0, "mean": 5.0, "std": 2.0}, torch.int64, 1)
    assert ints.dtype == torch.int64 and int(ints.min()) == 2 and int(ints.max()) == 9
    mask = synthesise({"shape": [10, 100], "min": 0.0, "max": 1.0, "mean": 0.3, "std": 0.46},
                      torch.bool, 2)
    assert mask.dtype == torch.bool and mask.shape == (10, 100)
    assert 0.2 < float(mask.float().mean()) < 0.4  # about the captured share of True
    nothing_finite = synthesise({"shape": [4], "min": math.nan, "max": math.nan, "mean": math.nan,
                                 "std": math.nan, "nan_share": 1.0}, torch.float32, 3)
    assert bool(nothing_finite.isnan().all())


def test_cases_that_compare_nothing_are_marked(tmp_path):
    x = torch.randn(8)
    with capture(tmp_path / "cases") as c:
        torch.empty_like(x)
        torch.nn.functional.dropout(x, 0.5, training=True)  # empty_like, bernoulli_, div_, mul
        torch.arange(4)
        x + 1
    reasons = {case.op: case.not_comparable for case in read_replay_cases(c.path)[1]}
    assert reasons["aten::empty_like"] == "aten::empty_like returns uninitialised memory"
    assert reasons["aten::bernoulli_.float"] == "aten::bernoulli_.float returns random values"
    assert reasons["aten::arange"] == ("aten::arange takes no tensor: nothing tells the target "
                                       "where to run it")
    assert reasons["aten::add.Tensor"] is None


def test_an_unknown_op_or_argument_cannot_be_rebuilt(tmp_path):
    with capture(tmp_path / "cases") as c:
        torch.ones(3) + 1
    table = pq.read_table(c.path / "cases.parquet")
    rows = [row for row in table.to_pylist() if row["op"] == "aten::add.Tensor"]
    rows.append({**rows[0], "name": "add.Tensor-2",
                 "call": json.dumps({"args": [{"tensor": 0}, {"unsupported": "Generator: g"}],
                                     "kwargs": {}})})
    rows[0]["op"] = "aten::no_such_op"
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), c.path / "cases.parquet")
    unknown, unsupported = read_replay_cases(c.path)[1]
    with pytest.raises(RecordsError, match=r"op aten::no_such_op does not exist in this torch"):
        unknown.build()
    with pytest.raises(RecordsError, match=r"an argument cannot be rebuilt \(unsupported: Generator: g\)"):
        unsupported.build()


def test_bad_cases_files_are_named(tmp_path):
    with capture(tmp_path / "cases") as c:
        torch.ones(3) + 1
    file = c.path / "cases.parquet"
    table = pq.read_table(file)
    header = json.loads(table.schema.metadata[META_KEY])
    pq.write_table(table.replace_schema_metadata({META_KEY: json.dumps({**header, "version": 0})}),
                   file)
    with pytest.raises(RecordsError, match=rf"{file}: cases schema version 0; this mluverify "
                                           rf"reads version 1"):
        read_cases(c.path)
    pq.write_table(table.replace_schema_metadata({}), file)
    with pytest.raises(RecordsError, match=rf"{file}: not a mluverify cases file"):
        read_cases(file)
    file.write_bytes(b"PAR1 garbage")
    with pytest.raises(RecordsError, match=rf"{file}: corrupt cases file"):
        read_cases(c.path)
    with pytest.raises(RecordsError, match=r"no such cases file"):
        read_cases(tmp_path / "nowhere")
