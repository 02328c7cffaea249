"""``mluverify fuzz`` end to end on the planted target: campaign, corpus, replay."""
import json
import shlex

import pytest
import torch

from mluverify.cli import main

pytestmark = pytest.mark.e2e  # end to end, seconds a test: make test-e2e


def test_a_campaign_keeps_its_finding_and_replay_reproduces_it(tmp_path, capsys, monkeypatch):
    corpus = tmp_path / "corpus"
    argv = ["fuzz", "--target", "planted:fused", "--plugin", "fuzz_planted", "--ops", "transpose,matmul,relu,add,sum",
            "--seed", "0", "--budget", "200", "--out", str(corpus), "--in-process"]
    assert main(argv) == 1  # a finding was made
    out = capsys.readouterr().out
    assert "planted:fused | 200 |" in out and "transpose -> matmul" in out
    (case,) = corpus.glob("*.json")
    data = json.loads(case.read_text())
    assert data["ops"] == ["transpose", "matmul"] and data["kind"] == "deviation"
    assert (corpus / f"{case.stem}.py").exists()
    # The reproducer needs only what mluverify installs: run it from another directory.
    monkeypatch.chdir(tmp_path)
    command = shlex.split(data["reproducer"])
    assert command[:2] == ["mluverify", "fuzz"] and main(command[1:]) == 1
    assert f"{case.stem} on planted:fused: reproduces" in capsys.readouterr().out
    replay = ["fuzz", "--replay", str(corpus), "--plugin", "fuzz_planted", "--in-process"]
    assert main(replay) == 1
    assert f"{case.stem} on planted:fused: reproduces" in capsys.readouterr().out
    assert main([*replay, "--target", "cpu64:eager"]) == 0  # a correct target does not reproduce it
    assert "0 of 1 findings reproduce" in capsys.readouterr().out


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_targets_that_cannot_run_here_are_skipped_with_their_reason(capsys):
    assert main(["fuzz", "--target", "cuda:eager", "--budget", "1"]) == 2
    out, err = capsys.readouterr()
    assert "skipped target cuda:eager: " in out
    assert "none of the targets cuda:eager can run here" in err


def test_a_missing_out_directory_is_made_before_the_campaign(tmp_path, capsys):
    out = tmp_path / "new" / "corpus"
    argv = ["fuzz", "--target", "mlu:cnnl", "--ops", "relu,add", "--budget", "2", "--in-process", "--out", str(out)]
    assert main(argv) == 0
    assert (out / "fuzz.html").is_file()


def test_an_out_path_that_is_a_file_is_refused_before_any_program_runs(tmp_path, capsys):
    taken = tmp_path / "corpus"
    taken.write_text("not a corpus")
    argv = ["fuzz", "--target", "mlu:cnnl", "--ops", "relu,add", "--budget", "2", "--in-process", "--out", str(taken)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert f"--out {taken}: not a directory" in err and "programs" not in out
    assert taken.read_text() == "not a corpus"
