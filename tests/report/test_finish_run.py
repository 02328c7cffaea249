import datetime as dt

import pytest

from mluverify.core.config import Settings
from mluverify.core.expectations import Waiver
from mluverify.errors import RecordsError
from mluverify.report import finish_run
from mluverify.report.records import ShardWriter
from mluverify.report.finish import finish_empty_run

from report_records import make_record, write_run


def write_shards(run_dir, rows):
    writer = ShardWriter(run_dir)
    for row in rows:
        writer.write(row)
    writer.close()


def finish(run_dir, pm, baseline=None, gate=True, **settings):
    lines = []
    status = finish_run(run_dir, pm=pm, settings=Settings(**{"noise_floor": 0.0, **settings}), baseline=baseline,
                        gate=gate, terminal_write=lines.append)
    return status, "\n".join(lines)


def test_merges_and_writes_every_report(tmp_path, report_pm):
    write_shards(tmp_path, [make_record("t[a]", 0.001), make_record("t[b]", 0.002, op="mul")])
    status, out = finish(tmp_path, report_pm)
    assert status == 0 and "mluverify gate: passed" in out
    for name in ("records.parquet", "summary.csv", "summary.md", "report.html", "gate.md"):
        assert (tmp_path / name).exists(), name
    # op, target, dtype, metric, cases, worst status, one count per status (mluverify.core.status order:
    # errored, not_on_device, not_fused, nondeterministic, failed, waived, passed), pass rate
    assert (tmp_path / "summary.csv").read_text().splitlines()[1].startswith(
        "add,mlu:cnnl,float32,,rel_mse,1,passed,0,0,0,0,0,0,1,1.0,")  # quant "" after dtype
    page = (tmp_path / "report.html").read_text()
    # self-contained: plots and script inline, nothing fetched
    assert page.count('src="data:image/png;base64,') == 2
    assert "<script src" not in page and "http://" not in page and "https://" not in page
    # the banner has the gate's verdict; the run ends with one line naming the report
    assert '<div class="mv-verdict">gate passed</div>' in page
    assert out.splitlines()[-1].startswith("mluverify: gate passed; 2 comparisons in 2 cases: 2 passed; report: ")


def test_gate_failure_prints_why_and_returns_1(tmp_path, report_pm):
    baseline = write_run(tmp_path / "baseline", [make_record("t[a]", 0.001), make_record("t[b]", 0.001)])
    write_shards(tmp_path / "run", [make_record("t[a]", 0.004)])
    status, out = finish(tmp_path / "run", report_pm, baseline=baseline)
    assert status == 1
    assert "FAILED (2 blocking findings)" in out
    assert "| new failure | t[a] |" in out and "| missing | t[b] |" in out
    assert (tmp_path / "run" / "diff.md").exists()


def test_without_gate_failures_do_not_force_a_status(tmp_path, report_pm):
    write_shards(tmp_path, [make_record("t[a]", 0.004)])
    assert finish(tmp_path, report_pm, gate=False)[0] == 0


def test_configured_waivers_apply(tmp_path, report_pm):
    write_shards(tmp_path, [make_record("t[a]", 0.004)])
    until = dt.date.today() + dt.timedelta(days=30)
    status, out = finish(tmp_path, report_pm, waivers={"t*": Waiver("tracked", until)})
    assert status == 0 and "tracked" in out


def test_empty_session_fails_the_gate_explicitly_and_writes_nothing(tmp_path):
    lines = []
    status = finish_empty_run(tmp_path / "never-written", gate=True, terminal_write=lines.append)
    assert status == 1 and "nothing was verified" in "\n".join(lines)
    assert not (tmp_path / "never-written").exists()


def test_corrupt_baseline_is_a_named_failure(tmp_path, report_pm):
    (tmp_path / "baseline").mkdir()
    (tmp_path / "baseline" / "records.parquet").write_bytes(b"garbage")
    write_shards(tmp_path / "run", [make_record("t[a]", 0.001)])
    with pytest.raises(RecordsError, match="baseline/records.parquet is not a readable parquet file"):
        finish(tmp_path / "run", report_pm, baseline=tmp_path / "baseline")


def test_terminal_shows_the_first_findings_and_gate_md_all(tmp_path, report_pm):
    write_shards(tmp_path, [make_record(f"t[{i}]", 0.004) for i in range(60)])
    status, out = finish(tmp_path, report_pm)
    assert status == 1 and "FAILED (60 blocking findings)" in out
    assert out.count("| fails tolerance |") == 50 and "... and 10 more findings" in out
    assert (tmp_path / "gate.md").read_text().count("| fails tolerance |") == 60


def test_report_without_records_exits_2_naming_the_file_and_keeps_the_pages(tmp_path, capsys):
    from mluverify.cli import main

    from mluverify.report.records import run_metadata, write_metadata

    run = write_run(tmp_path / "run", [make_record("t[a]", 0.001)])
    write_metadata(run, run_metadata("r1"))
    assert main(["report", str(run)]) == 0
    pages = {name: (run / name).read_bytes() for name in ("report.html", "summary.md", "summary.csv")}
    (run / "records.parquet").unlink()
    capsys.readouterr()
    assert main(["report", str(run)]) == 2
    assert f"{run / 'records.parquet'} is missing" in capsys.readouterr().err
    assert {name: (run / name).read_bytes() for name in pages} == pages  # not rewritten as "nothing verified"


def test_report_merges_the_shards_of_a_killed_run_without_records(tmp_path, capsys):
    from mluverify.cli import main

    write_shards(tmp_path / "run", [make_record("t[a]", 0.001), make_record("t[b]", 0.002)])
    assert main(["report", str(tmp_path / "run")]) == 0
    assert "2 comparisons in 2 cases: 2 passed" in capsys.readouterr().out


def test_a_corrupt_shard_line_costs_that_line_only_and_is_named(tmp_path, report_pm):
    import json

    import pyarrow.parquet as pq

    write_shards(tmp_path, [make_record(f"t[{i}]", 0.001) for i in range(5)])
    [shard] = (tmp_path / "shards").glob("records-*.jsonl")
    lines = shard.read_text().splitlines(keepends=True)
    lines[2] = '{"run_id": "run", "case_id": garbage}\n'  # line 3: a stray write mid-file
    shard.write_text("".join(lines))
    named = f"shards/{shard.name} line 3: JSON parse error: Invalid value."
    status, out = finish(tmp_path, report_pm)
    assert status == 1 and named in out  # printed, and the gate fails: a lost record may be a failure
    assert pq.read_table(tmp_path / "records.parquet").column("case_id").to_pylist() == [
        "t[0]", "t[1]", "t[3]", "t[4]"]
    assert json.loads((tmp_path / "run.json").read_text())["corrupt_records"] == [named]
    for page in ("summary.md", "report.html", "gate.md"):
        assert named in (tmp_path / page).read_text(), page
    assert shard.with_name(shard.name + ".corrupt").read_text() == "".join(lines)  # nothing lost
    # reported again (mluverify report): the same records, the line still named, once
    status, out = finish(tmp_path, report_pm)
    assert status == 1 and f"\n  {named}\n" in out and pq.read_table(tmp_path / "records.parquet").num_rows == 4
    assert json.loads((tmp_path / "run.json").read_text())["corrupt_records"] == [named]
