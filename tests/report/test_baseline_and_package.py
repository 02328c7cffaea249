import argparse
import subprocess
import sys

import pytest

import mluverify.report
from mluverify.cli import baseline as baseline_command
from mluverify.errors import RecordsError
from mluverify.report.loading import load

from report_records import make_record, write_run


def update(*argv):
    parser = argparse.ArgumentParser()
    baseline_command.register(parser.add_subparsers())
    args = parser.parse_args(["baseline", "update", *map(str, argv)])
    return args.func(args)


def test_update_replaces_the_baseline_records(tmp_path, capsys):
    baseline = write_run(tmp_path / "baseline", [make_record("old", 0.001)])
    latest = write_run(tmp_path / "latest", [make_record("new[a]", 0.001), make_record("new[b]", 0.004)])
    (latest / "summary.md").write_text("# summary\n- [fuzz findings](fuzz.html)\n")
    (latest / "fuzz.html").write_text("<html>findings</html>")
    with pytest.raises(RecordsError, match=r"1 failing case\(s\), e.g. new\[b\] \(failed\)"):
        update("--from", latest, "--to", baseline)  # a failing case is no baseline ...
    assert load(baseline)["case_id"].tolist() == ["old"]
    assert update("--from", latest, "--to", baseline, "--allow-failures") == 0  # ... unless allowed
    assert load(baseline)["case_id"].tolist() == ["new[a]", "new[b]"]
    assert (baseline / "summary.md").read_text() == "# summary\n- [fuzz findings](fuzz.html)\n"
    assert (baseline / "fuzz.html").read_text() == "<html>findings</html>"  # the page it links
    assert "2 records, 1 failing" in capsys.readouterr().out


def test_an_empty_run_never_replaces_the_baseline(tmp_path):
    baseline = write_run(tmp_path / "baseline", [make_record("old", 0.001)])
    empty = write_run(tmp_path / "latest", [])
    with pytest.raises(RecordsError, match="holds no records"):
        update("--from", empty, "--to", baseline)
    assert load(baseline)["case_id"].tolist() == ["old"]


def test_an_incomplete_run_is_refused_in_plain_words(tmp_path):
    from mluverify.report.completeness import INTERRUPTED, at_end
    from mluverify.report.records import write_metadata

    latest = write_run(tmp_path / "latest", [make_record("t[a]", 0.001)])
    write_metadata(latest, at_end(1, 3, interrupted=True).as_metadata())
    with pytest.raises(RecordsError) as refused:
        update("--from", latest, "--to", tmp_path / "baseline")
    assert str(refused.value).startswith(f"{latest} is incomplete: 1 of 3 tests ({INTERRUPTED}); finish a full run")


def test_a_missing_run_is_named(tmp_path):
    with pytest.raises(RecordsError, match="nowhere is not a run directory"):
        update("--from", tmp_path / "nowhere", "--to", tmp_path / "baseline")


def test_importing_the_report_package_loads_neither_pandas_nor_matplotlib():
    code = "import sys, mluverify.report; print('pandas' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_public_names_resolve():
    for name in mluverify.report.__all__:
        assert getattr(mluverify.report, name) is not None, name
