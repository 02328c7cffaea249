"""dump-diff: own error vs inherited error, the first offender, reports and bad input."""
import os
import pickle
import struct
import textwrap

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mluverify.cli import main
from mluverify.dump import Dumper, dump_diff
from mluverify.report.dump_diff import headline, write_dump_diff_pages
from mluverify.errors import RecordsError


class WrongAdd(TorchDispatchMode):
    """A planted CPU-side bug: every aten add.Tensor comes out 5 % too large."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * 1.05 if func is torch.ops.aten.add.Tensor else out


def network():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(64, 10)).eval()
    return net, torch.randn(1, 3, 8, 8)


def forward_with_planted_add(net, x):
    """conv -> relu -> (+ 0.5, the wrong op) -> conv -> relu -> linear."""
    h = net[1](net[0](x))
    h = h + 0.5
    return net[5](net[4](net[3](net[2](h))))


@pytest.fixture
def planted_dump(tmp_path):
    net, x = network()
    with torch.no_grad(), WrongAdd(), Dumper(tmp_path / "dump", level=1, use_cpu=True) as d:
        forward_with_planted_add(net, x)
    return d.path


def test_first_offender_is_the_planted_op_not_the_ops_after_it(planted_dump):
    diff = dump_diff(planted_dump)
    by_path = diff.table.set_index("path")
    assert by_path.loc["3_add", "seq"] == diff.first_offender
    # 5 % on every value is a relative error of exactly 0.05.
    assert by_path.loc["3_add", "own_rel_mse"] == pytest.approx(0.05, rel=1e-4)
    after = diff.table[diff.table["seq"] > diff.first_offender]
    assert after["own_passed"].tolist() == [True] * len(after)
    assert by_path.loc["4_conv2d/1_convolution", "inherited_rel_mse"] > diff.bound
    assert by_path.loc["7_linear/2_addmm", "total_rel_mse"] > diff.bound
    assert "aten::add.Tensor" in diff.reproducer and "3_add" in diff.reproducer


def test_cnml_mode_judges_against_its_looser_bound(planted_dump):
    assert dump_diff(planted_dump, mode="cnml").first_offender is not None  # 0.05 > 0.02
    assert dump_diff(planted_dump, mode="cnml").bound == 0.02


def test_clean_run_blames_nothing(tmp_path):
    net, x = network()
    with torch.no_grad(), Dumper(tmp_path / "dump", use_cpu=True) as dumper:
        forward_with_planted_add(net, x)
    diff = dump_diff(dumper.path)
    assert diff.first_offender is None and diff.reproducer is None
    assert diff.table["own_passed"].dropna().all()


def test_reports_put_the_offender_first(planted_dump, tmp_path):
    csv_path, md_path, html_path = write_dump_diff_pages(dump_diff(planted_dump), tmp_path / "out")
    markdown = md_path.read_text()
    assert markdown.splitlines()[2].startswith("first offender: 3_add (aten::add.Tensor)")
    assert "first offender: 3_add" in html_path.read_text()
    assert csv_path.read_text().splitlines()[0].startswith("seq,path,op,inputs,own_rel_mse")


def test_cli_exit_code_and_outputs(planted_dump, tmp_path, capsys):
    assert main(["dump-diff", str(planted_dump), "--out", str(tmp_path / "out")]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("first offender: 3_add")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == \
        ["dump_diff.csv", "dump_diff.html", "dump_diff.md"]


def test_dump_without_use_cpu_is_refused(tmp_path):
    x = torch.ones(2)
    with Dumper(tmp_path / "dump") as dumper:
        torch.relu(x)
    with pytest.raises(RecordsError, match="use_cpu"):
        dump_diff(dumper.path)


def test_foreign_directory_error_names_the_file(tmp_path, capsys):
    (tmp_path / "foreign").mkdir()
    assert main(["dump-diff", str(tmp_path / "foreign")]) == 2
    assert str(tmp_path / "foreign" / "dump.json") in capsys.readouterr().err


def test_corrupt_index_error_names_the_file(planted_dump):
    (planted_dump / "index.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(RecordsError, match="index.parquet: corrupt"):
        dump_diff(planted_dump)


def test_corrupt_or_hostile_journal_frame_is_named(tmp_path):
    x = torch.ones(2)
    with Dumper(tmp_path / "dump") as dumper:
        torch.relu(x)
    (dumper.path / "index.parquet").unlink()
    garbage = b"not a pickle"
    hostile = pickle.dumps([{"seq": os.system}])  # a global: must be refused, not called
    for frame in (garbage, hostile):
        (dumper.path / "index.journal").write_bytes(struct.pack("<Q", len(frame)) + frame)
        with pytest.raises(RecordsError, match=r"index.journal: corrupt index frame at byte 8"):
            dump_diff(dumper.path)
    plain_but_foreign = pickle.dumps(([(1, "aten::relu")], None))  # rows of the wrong width
    (dumper.path / "index.journal").write_bytes(
        struct.pack("<Q", len(plain_but_foreign)) + plain_but_foreign)
    with pytest.raises(RecordsError, match=r"frame at byte 8 is not a mluverify op frame"):
        dump_diff(dumper.path)


def test_level_2_reproducer_loads_the_exact_inputs_from_the_sidecar(tmp_path):
    net, x = network()
    with torch.no_grad(), WrongAdd(), Dumper(tmp_path / "dump", level=2, use_cpu=True) as d:
        h = net[1](net[0](x))
        forward_with_planted_add(net, x)
    reproducer = dump_diff(d.path).reproducer
    snippet = reproducer.split("exact inputs (level 2 sidecar):\n")[1]
    namespace = {}
    exec(textwrap.dedent(snippet), namespace)
    assert namespace["values"]["mlu_self"].tolist() == h.tolist()


class NanRelu(TorchDispatchMode):
    """A planted CPU-side bug: the first value of every relu comes out NaN."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.relu.default:
            out = out.clone()
            out.view(-1)[0] = float("nan")
        return out


def test_nan_where_the_cpu_is_finite_is_an_offender(tmp_path):
    net, x = network()
    with torch.no_grad(), NanRelu(), Dumper(tmp_path / "dump", use_cpu=True) as dumper:
        net(x)
    diff = dump_diff(dumper.path)
    relu = diff.table.set_index("path").loc["2_relu"]
    assert relu["nan_mismatch"] == 1 and relu["seq"] == diff.first_offender
    assert "1 NaN/Inf positions" in headline(diff)
