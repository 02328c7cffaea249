"""dump-diff as reports show it: the harness's copies left out (a switch shows them), a failure
that no op's own error explains named as such with its own exit status, the shared page look.

Dumps are real ``use_cpu`` dumps of CPU ops; planted errors come from a dispatch mode that
scales one op's output during the dumped run only (the CPU re-run of each op is exact)."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mluverify.cli import main
from mluverify.dump import HARNESS_OPS, Dumper, dump_diff, shown_table
from mluverify.report.dump_diff import case_error, headline, write_dump_diff_pages

from report_records import make_record, write_run


class Scaled(TorchDispatchMode):
    """Every aten ``op`` result comes out ``factor`` times too large."""

    def __init__(self, op, factor):
        super().__init__()
        self.op, self.factor = op, factor

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out * self.factor if func is self.op else out


def dump(path, mode=None):
    """linspace, five chained muls, and four ops of the harness's kind: two detach, a clone, a
    dtype move (_to_copy)."""
    with torch.no_grad(), (mode or Scaled(None, 1.0)), Dumper(path, level=1, use_cpu=True) as dumper:
        x = torch.linspace(0.5, 1.5, 16).clone().detach()
        for _ in range(5):
            x = x * 1.01
        x.to(torch.float64)
    return dumper.path


def test_harness_copies_are_left_out_unless_asked_for(tmp_path):
    diff = dump_diff(dump(tmp_path / "d"))
    ops = diff.table["op"].tolist()
    assert {"aten::clone", "aten::detach", "aten::_to_copy"} <= set(ops) <= HARNESS_OPS | {"aten::linspace", "aten::mul.Tensor"}
    assert shown_table(diff)["op"].tolist() == ["aten::linspace"] + ["aten::mul.Tensor"] * 5
    assert shown_table(diff, all_ops=True)["op"].tolist() == ops
    markdown = (write_dump_diff_pages(diff, tmp_path / "out")[1]).read_text()
    assert "aten::clone" not in markdown and "4 of the harness's own copies and device moves left out" in markdown
    assert "aten::clone" in write_dump_diff_pages(diff, tmp_path / "all", all_ops=True)[1].read_text()


def test_a_harness_copy_that_breaks_the_bound_is_shown(tmp_path):
    diff = dump_diff(dump(tmp_path / "d", Scaled(torch.ops.aten.clone.default, 1.05)))
    shown = shown_table(diff)
    assert "aten::clone" in shown["op"].tolist() and diff.verdict == "blamed"


def test_errors_that_build_up_over_ops_are_unexplained(tmp_path, capsys):
    # each mul 0.2 % off (own rel_mse 0.002 < 0.003); five of them: about 1 % at the output
    path = dump(tmp_path / "d", Scaled(torch.ops.aten.mul.Tensor, 1.002))
    diff = dump_diff(path)
    assert diff.first_offender is None and diff.output_rel_mse == pytest.approx(1.002 ** 5 - 1, rel=1e-3)
    assert diff.verdict == "unexplained"
    assert headline(diff).startswith("unexplained: the output's total rel_mse is 0.01, but no op's own error breaks")
    assert main(["dump-diff", str(path), "--out", str(tmp_path / "out")]) == 3
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("unexplained:") and printed[-1] == f"full page: {tmp_path / 'out' / 'dump_diff.html'}"


def test_a_clean_dump_exits_0_and_a_blamed_op_1(tmp_path, capsys):
    assert main(["dump-diff", str(dump(tmp_path / "clean"))]) == 0
    blamed = dump(tmp_path / "blamed", Scaled(torch.ops.aten.mul.Tensor, 1.05))
    assert main(["dump-diff", str(blamed)]) == 1
    assert "first offender: " in capsys.readouterr().out


def test_a_run_dump_is_judged_with_its_case_record(tmp_path, capsys):
    """A case dumped by --mlu-dump=fail failed at 3x its bound; its dump is exact everywhere."""
    run = tmp_path / "run"
    path = dump(run / "dumps" / "t_mul_")
    write_run(run, [make_record("t[mul]", 0.009, op="mul", target="mlu:cnml", bound=0.003,
                                reproducer=f"pytest 't[mul]'; dump: {path}"),
                    make_record("t[other]", 0.001)])
    case = case_error(path)
    assert (case.metric, case.value, case.bound, case.status, case.mode) == ("rel_mse", 0.009, 0.003, "failed", "cnml")
    assert case_error(dump(tmp_path / "elsewhere")) is None
    assert main(["dump-diff", str(path)]) == 3
    first = capsys.readouterr().out.splitlines()[0]
    # the ops are judged by the case's mode (cnml: 0.02), the failure by the case's own bound
    assert first.startswith("unexplained: the case failed (rel_mse 9e-3 > bound 3e-3), but no op's own error "
                            "breaks rel_mse <= 0.02 (cnml)")
    page = (path / "dump_diff.html").read_text()
    assert '<div class="mv-banner bad" id="banner">' in page and "show the harness's copies and device moves (4)" in page
