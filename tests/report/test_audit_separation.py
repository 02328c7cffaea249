"""Asked with known-bad variants, the audit says which metric separates an op's passing cases
from them best: a bug 3 ULPs wide hides under rel_mse but not under ulp_max."""
import math

from mluverify.cli import main
from mluverify.report.audit import separation

from report_records import as_frame, make_record, write_run

# passing cases: 1 ULP off at worst; the bad variants: one element 3 ULPs off, which moves the
# raw rel_mse and max_abs less than the passing cases' largest x 2 (the safety factor)
GOOD = dict(raw_rel_mse=1e-7, rae=1e-7, rma=1e-8, max_abs=1e-7, max_rel=2e-7, ulp_max=1.0, ulp_p99=0.5)
BAD = dict(raw_rel_mse=1.5e-7, rae=1.2e-7, rma=1e-8, max_abs=2e-7, max_rel=3e-7, ulp_max=3.0, ulp_p99=0.5)


def _runs(tmp_path=None):
    good = [make_record(f"exp[{i}]", 0.0, op="exp", **GOOD) for i in range(4)]
    good += [make_record("log[0]", 0.0, op="log", **(GOOD | {"ulp_max": None, "ulp_p99": None}))]
    bad = [make_record(f"exp[bad{i}]", 0.0, op="exp", **BAD) for i in range(4)]
    bad += [make_record("log[bad]", 0.0, op="log", **(BAD | {"ulp_max": None, "ulp_p99": None}))]
    if tmp_path is None:
        return as_frame(good), as_frame(bad)
    return write_run(tmp_path / "good", good), write_run(tmp_path / "bad", bad)


def test_the_metric_catching_the_most_known_bad_cases_is_named_with_its_bound():
    table = separation(*_runs()).set_index("op")
    exp = table.loc["exp"]
    # bounds: largest passing x 2, rounded up: raw 2e-7, max_abs 2e-7, max_rel 4e-7, ulp_max 2
    assert exp["raw_rel_mse_caught"] == 0.0 and exp["max_abs_caught"] == 0.0 and exp["max_rel_caught"] == 0.0
    assert exp["ulp_max_caught"] == 1.0 and exp["ulp_p99_caught"] == 0.0
    assert (exp["best_metric"], exp["best_bound"], exp["caught"]) == ("ulp_max", 2.0, "4 / 4")


def test_a_metric_not_measured_everywhere_is_not_a_candidate():
    log = separation(*_runs()).set_index("op").loc["log"]
    assert math.isnan(log["ulp_max_caught"])  # no golden result: no ULPs
    assert (log["best_metric"], log["caught"]) == ("", "")  # nothing else moves past its bound


def test_the_cli_writes_the_separation_when_asked(tmp_path, capsys):
    good, bad = _runs(tmp_path)
    assert main(["audit", str(good), "--bad", str(bad), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "  exp mlu:cnnl float32: ulp_max catches 4 / 4 known-bad cases (bound 2)" in printed
    assert (tmp_path / "out" / "audit_separation.csv").read_text().startswith("op,target,dtype,bad_cases,")


def test_without_bad_runs_there_is_no_separation(tmp_path):
    good, _ = _runs(tmp_path)
    assert main(["audit", str(good), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "audit.csv").exists() and not (tmp_path / "out" / "audit_separation.csv").exists()
