"""``mluverify expectations check``: stale, matching-nothing, not exercised (target not run),
expired, uncategorised and uncapped waivers, the worst value a waiver covers and one above its ceiling, ``--prune`` keeping
comments, ``--fail-on-uncapped``."""
import datetime as dt

import pandas as pd

from mluverify.cli import main
from mluverify.core.expectations import load_expectations
from mluverify.report.expectations_check import check_expectations, prune

WAIVERS = '''# known deviations of the test suite
[expectations]
case_ids = { "" = "t.py::test_op[*-{key}]" }

[waivers]
# fixed since: every case passes now
"add-*" = { reason = "was off by one ulp", until = "2099-01-01", category = "device bug", max = 1e-6 }
# still failing on MLU270 only
"mul-*" = { reason = "int16 products", until = "2099-01-01", category = "quantization", scope = { cores = ["MLU270"] }, max = 0.01 }
# no such case any more
"gone-*" = { reason = "removed op", until = "2099-01-01", category = "unsupported" }
"old-*" = { reason = "nobody said why", until = "2020-01-01", max = 0.1 }
'''


def records():
    rows = [("add-0", "MLU270", "passed"), ("add-1", "MLU370", "passed"),
            ("mul-0", "MLU270", "waived"), ("mul-0", "MLU370", "passed"), ("mul-1", "MLU270", "passed"),
            ("old-0", "MLU270", "waived")]
    return pd.DataFrame([{"case_id": f"t.py::test_op[mlu:cnnl-{core}-{name}]", "target": "mlu:cnnl",
                          "core_version": core, "device_impl": "emulator", "status": status}
                         for name, core, status in rows])


def file_in(tmp_path):
    path = tmp_path / "waivers.toml"
    path.write_text(WAIVERS)
    return path


def test_stale_matching_nothing_expired_and_uncategorised_are_reported(tmp_path):
    checks = {c.key: c for c in check_expectations(records(), [load_expectations(file_in(tmp_path))],
                                                   today=dt.date(2026, 1, 1))}
    assert (checks["add-*"].cases, checks["add-*"].passing, checks["add-*"].stale) == (2, 2, True)
    # mul's scope is MLU270: its MLU370 record is not its case; of its two MLU270 cases one passes
    assert (checks["mul-*"].cases, checks["mul-*"].passing, checks["mul-*"].stale) == (2, 1, False)
    assert checks["gone-*"].matches_nothing and checks["gone-*"].problems == ["matches nothing"]
    assert checks["old-*"].problems == ["expired on 2020-01-01", "uncategorised"]


def test_prune_drops_the_stale_entries_and_keeps_the_comments(tmp_path):
    path = file_in(tmp_path)
    assert prune(load_expectations(path), ["add-*", "gone-*"]) == 2
    text = path.read_text()
    assert '"add-*"' not in text and '"gone-*"' not in text
    assert "# known deviations of the test suite" in text and "# still failing on MLU270 only" in text
    assert list(load_expectations(path).waivers) == ["mul-*", "old-*"]


def write_run(run_dir):
    """A run directory holding ``records()`` through the records schema."""
    import pyarrow.parquet as pq

    from mluverify.report.records import SCHEMA_VERSION, to_table

    rows = [{"run_id": "run", "op": "op", "metric": "rel_mse", "value": 0.0, "bound": 1.0,
             "passed": row["status"] == "passed", "waived": row["status"] == "waived", **row}
            for row in records().to_dict("records")]
    run_dir.mkdir()
    pq.write_table(to_table(rows, {"schema_version": SCHEMA_VERSION}), run_dir / "records.parquet")
    return run_dir


def test_the_command_reports_then_prunes_and_fails_on_stale_only_when_asked(tmp_path, capsys):
    path, run = file_in(tmp_path), write_run(tmp_path / "run")
    assert main(["expectations", "check", str(run), "--file", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 'add-*': all 2 cases it covers pass" in out
    assert f"{path}: 'gone-*': matches nothing" in out
    assert ("4 waivers: 2 stale (1 match nothing, 1 whose cases all pass), 0 not exercised (none of their "
            "targets ran), 3 waived cases pass now") in out
    assert main(["expectations", "check", str(run), "--file", str(path), "--fail-on-stale"]) == 1
    assert main(["expectations", "check", str(run), "--file", str(path), "--prune"]) == 0
    assert list(load_expectations(path).waivers) == ["mul-*", "old-*"]
    capsys.readouterr()
    assert main(["expectations", "check", str(run), "--file", str(path), "--fail-on-stale"]) == 0


def test_the_gate_fails_on_a_stale_configured_waiver_only_when_asked(tmp_path):
    from mluverify.core.expectations import parse_waivers
    from mluverify.report.loading import load
    from mluverify.report.gate import evaluate_gate

    run = load(write_run(tmp_path / "run"))
    waivers = parse_waivers({"t.py::test_op[*-add-*]": {"reason": "fixed", "until": "2099-01-01"},
                             "t.py::test_op[*-old-*]": {"reason": "open", "until": "2099-01-01"},
                             # a target the run did not run: not exercised, so not stale
                             "t.py::test_op[cpu:inductor-*]": {"reason": "open", "until": "2099-01-01"}})
    today = dt.date(2026, 1, 1)
    assert "stale waiver" not in set(evaluate_gate(run, waivers=waivers, today=today).blocking["rule"])
    blocking = evaluate_gate(run, waivers=waivers, today=today, stale_waivers=True).blocking
    stale = blocking[blocking["rule"] == "stale waiver"]
    assert stale["case_id"].tolist() == ["t.py::test_op[*-add-*]"]


UNCAPPED = '''[expectations]
case_ids = { "" = "t.py::test_op[*-{key}]" }

[waivers]
"mul-*" = { reason = "int16 products", until = "2099-01-01", category = "quantization" }
"add-*" = { reason = "no kernel: CPU fallback", until = "2099-01-01", category = "unsupported" }
"old-*" = { reason = "raises on the device", until = "2099-01-01", category = "device bug", skip = true }
'''


def test_an_accuracy_waiver_without_a_ceiling_is_reported_and_fails_the_check_when_asked(tmp_path, capsys):
    path, run = tmp_path / "waivers.toml", write_run(tmp_path / "run")
    path.write_text(UNCAPPED)
    checks = {c.key: c for c in check_expectations(records(), [load_expectations(path, skippable=True)])}
    # only the accuracy waiver needs one: "unsupported" excuses where a case ran, skip has no value
    assert [key for key, check in checks.items() if check.uncapped] == ["mul-*"]
    assert main(["expectations", "check", str(run), "--file", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 'mul-*': no ceiling: an accuracy waiver needs max" in out
    assert "1 accuracy waivers without a ceiling" in out
    assert main(["expectations", "check", str(run), "--file", str(path), "--fail-on-uncapped"]) == 1
    path.write_text(UNCAPPED.replace('category = "quantization"', 'category = "quantization", max = 0.02'))
    assert main(["expectations", "check", str(run), "--file", str(path), "--fail-on-uncapped"]) == 0


def test_the_worst_value_a_waiver_covers_is_reported_and_one_above_its_ceiling_is_flagged(tmp_path):
    path = tmp_path / "waivers.toml"
    path.write_text(UNCAPPED.replace('category = "quantization"', 'category = "quantization", max = 0.02'))
    frame = records().assign(value=[0.0, 0.0, 0.03, 0.0, 0.001, 0.5])  # mul-0 on MLU270 waived at 0.03
    checks = {c.key: c for c in check_expectations(frame, [load_expectations(path, skippable=True)])}
    assert checks["mul-*"].worst == 0.03  # the passing cases' values are not what it excuses
    assert checks["mul-*"].problems == ["above its ceiling: worst output value 0.03 > max 0.02"]
    path.write_text(UNCAPPED)
    checks = {c.key: c for c in check_expectations(frame, [load_expectations(path, skippable=True)])}
    assert checks["mul-*"].problems == ["no ceiling: an accuracy waiver needs max = <measured worst case x margin> "
                                        "(worst value here 0.03)"]


TARGETED = '''[waivers]
# ort:cpu never ran in records(): these runs cannot say whether it holds
"t.py::test_op[ort:cpu-add-*]" = { reason = "ort rounds", until = "2099-01-01", category = "upstream bug", max = 0.1 }
# the scope names the target: cpu:inductor did not run either
"t.py::test_op[*-add-*]" = { reason = "inductor fuses", until = "2099-01-01", category = "unsupported", scope = { targets = ["cpu:inductor"] } }
# mlu:cnnl ran, and no case of it is "gone": stale
"t.py::test_op[mlu:*-gone-*]" = { reason = "removed op", until = "2099-01-01", category = "unsupported" }
'''


def test_a_waiver_whose_target_did_not_run_is_not_exercised_never_stale_nor_pruned(tmp_path, capsys):
    path, run = tmp_path / "waivers.toml", write_run(tmp_path / "run")
    path.write_text(TARGETED)
    checks = {c.key: c for c in check_expectations(records(), [load_expectations(path)])}
    ort, inductor = checks["t.py::test_op[ort:cpu-add-*]"], checks["t.py::test_op[*-add-*]"]
    assert (ort.targets, ort.exercised, ort.stale, ort.problems) == (("ort:cpu",), False, False, [])
    assert ort.not_exercised == "not exercised: target ort:cpu not in these runs"
    assert (inductor.targets, inductor.stale) == (("cpu:inductor",), False)
    assert main(["expectations", "check", str(run), "--file", str(path), "--fail-on-stale", "--prune"]) == 0
    out = capsys.readouterr().out
    assert f"{path}: 1 waiver not exercised: target ort:cpu not in these runs" in out
    assert f"{path}: 1 waiver not exercised: target cpu:inductor not in these runs" in out
    assert "3 waivers: 1 stale (1 match nothing, 0 whose cases all pass), 2 not exercised" in out
    assert list(load_expectations(path).waivers) == ["t.py::test_op[ort:cpu-add-*]", "t.py::test_op[*-add-*]"]
    # (the stale one pruned) no run at all: nothing is exercised, nothing is stale
    assert main(["expectations", "check", "--file", str(path), "--fail-on-stale"]) == 0
    assert "2 waivers: 0 stale (0 match nothing, 0 whose cases all pass), 2 not exercised" in capsys.readouterr().out
    # nor is a waiver that names no target
    assert main(["expectations", "check", "--file", str(file_in(tmp_path)), "--fail-on-stale"]) == 0
    assert "4 waivers not exercised: these runs hold no records" in capsys.readouterr().out


def test_a_waiver_whose_target_ran_and_that_matches_nothing_is_stale(tmp_path, capsys):
    path, run = tmp_path / "waivers.toml", write_run(tmp_path / "run")
    path.write_text(TARGETED)
    (check,) = [c for c in check_expectations(records(), [load_expectations(path)]) if "gone" in c.key]
    # "mlu:*" is a glob on the target: mlu:cnnl ran
    assert (check.targets, check.exercised, check.not_exercised) == (("mlu:*",), True, "")
    assert check.stale and check.problems == ["matches nothing"]
    assert main(["expectations", "check", str(run), "--file", str(path), "--fail-on-stale"]) == 1
    assert f"{path}: 't.py::test_op[mlu:*-gone-*]': matches nothing" in capsys.readouterr().out
