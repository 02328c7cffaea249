"""dump-diff as reports show it: the harness's copies left out (a switch shows them), a failure
that no op's own error explains named as such with its own exit status, the shared page look.

Dumps are real ``use_cpu`` dumps of CPU ops; planted errors come from a dispatch mode that
scales one op's output during the dumped run only (the CPU re-run of each op is exact)."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from mluverify.cli import main
from mluverify.judge import Tolerance
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
    # a record without its resolved tolerance (older records): the ops are judged by the case's
    # mode (cnml: 0.02), the failure by the case's own bound
    assert first.startswith("unexplained: the case failed (rel_mse 9e-3 > bound 3e-3), but no op's own error "
                            "breaks rel_mse <= 0.02 (policy:cnml)")
    page = (path / "dump_diff.html").read_text()
    assert '<div class="mv-banner bad" id="banner">' in page and "show the harness's copies and device moves (4)" in page


def _dumped_case(tmp_path, factor, **tolerance):
    """A run whose one case failed and was dumped: every mul of the dump ``factor`` off."""
    run = tmp_path / "run"
    path = dump(run / "dumps" / "t_mul_", Scaled(torch.ops.aten.mul.Tensor, factor))
    write_run(run, [make_record("t[mul]", 1e-4, op="mul", bound=1e-9, reproducer=f"pytest 't[mul]'; dump: {path}",
                                **tolerance)])
    return path


def test_each_op_is_judged_with_the_cases_marker_tolerance(tmp_path, capsys):
    # each mul 0.01 % off: own rel_mse 1e-4, within the cnnl policy's 0.003 but not the marker's 1e-9
    path = _dumped_case(tmp_path, 1.0001, tolerance_metric="rel_mse", tolerance_bound=1e-9,
                        tolerance_source="marker")
    assert case_error(path).tolerance == Tolerance("rel_mse", 1e-9, "marker")
    assert main(["dump-diff", str(path)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("first offender: ") and "(aten::mul.Tensor): own rel_mse 1e-4 > 1e-09 (marker)" in first
    assert "Each op judged by rel_mse <= 1e-09 (marker)." in (path / "dump_diff.md").read_text()
    assert "each op judged by" in (path / "dump_diff.html").read_text()


def test_a_case_tolerance_on_another_metric_judges_that_metric_per_op(tmp_path):
    # linspace(0.5, 1.5) times 1.01 once: the first mul's own max_abs is 1.5 x 1.01 x 0.01 = 0.01515
    path = _dumped_case(tmp_path, 1.01, tolerance_metric="max_abs", tolerance_bound=0.02, tolerance_source="config:mul")
    diff = dump_diff(path, case=case_error(path))
    assert (diff.metric, diff.bound, diff.source, diff.note) == ("max_abs", 0.02, "config:mul", "")
    # every mul's inputs came from the CPU chain, so each one's own max_abs stays near 0.015
    assert diff.verdict == "unexplained" and diff.table["own_value"].max() < 0.02


@pytest.mark.parametrize("tolerance, note", [
    ({"tolerance_metric": "ulp_max", "tolerance_bound": 1.0, "tolerance_source": "marker"},
     "the case's tolerance (ulp_max <= 1, marker) cannot be judged per op"),
    ({"tolerance_metric": "golden", "tolerance_bound": 0.0, "tolerance_source": "policy:golden"},
     "the case's tolerance (the golden rule, policy:golden) cannot be judged per op"),
])
def test_a_tolerance_the_dump_cannot_judge_per_op_says_so_and_the_mode_policy_judges(tmp_path, tolerance, note):
    path = _dumped_case(tmp_path, 1.0001, **tolerance)
    diff = dump_diff(path, case=case_error(path))
    assert diff.note.startswith(note) and diff.note.endswith("so policy:cnnl judges each op")
    assert (diff.metric, diff.bound, diff.source) == ("rel_mse", 0.003, "policy:cnnl")
    assert note in (write_dump_diff_pages(diff, tmp_path / "out")[1]).read_text()


def test_an_exact_case_is_judged_per_op_as_max_abs_zero(tmp_path):
    path = _dumped_case(tmp_path, 1.0001, tolerance_metric="exact", tolerance_bound=0.0, tolerance_source="policy:exact")
    diff = dump_diff(path, case=case_error(path))
    assert (diff.metric, diff.bound, diff.verdict) == ("max_abs", 0.0, "blamed")
    assert diff.note == "exact (policy:exact) judged per op as max_abs 0"


MARKED_SOFTMAX = """
import pytest, torch

@pytest.mark.mlu_tolerance(1e-9)
def test_softmax(verify):
    torch.manual_seed(0)
    verify(torch.softmax, torch.randn(8, 100), -1, op="softmax")
"""


def test_a_run_records_the_marker_tolerance_and_dump_diff_blames_the_op_by_it(pytester, capsys):
    """End to end: the emulated softmax is within 0.3 % but not within the marker's 1e-9 (its
    rel_mse is eps-zeroed, its raw one is not); dump-diff names it as the offender by the marker."""
    pytester.makepyfile(test_marked=MARKED_SOFTMAX)
    result = pytester.runpytest_subprocess("-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=mlu:cnnl",
                                           "--mlu-dump=fail", f"--mlu-report={pytester.path / 'run'}")
    result.assert_outcomes(failed=1)
    (path,) = (pytester.path / "run" / "dumps").iterdir()
    assert case_error(path).tolerance == Tolerance("rel_mse", 1e-9, "marker")
    capsys.readouterr()  # pytester's own lines
    assert main(["dump-diff", str(path)]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("first offender: ") and "(aten::_softmax): own rel_mse " in first
    assert first.split(": own rel_mse ")[1].split(",")[0].endswith(" > 1e-09 (marker)")
