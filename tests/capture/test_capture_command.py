"""`mluverify capture SCRIPT [args]`: the cases of a script, its arguments, a script that raises."""
import textwrap

import pytest

from mluverify.cli import main
from mluverify.cli.capture import byte_size
from mluverify.dump import read_cases

SCRIPT = """
import sys
import torch

x = torch.ones(int(sys.argv[1]))
for _ in range(3):
    y = x * 2
y + 1
"""

BROKEN = """
import torch

torch.ones(4) * 2
raise ValueError("the model broke")
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_script_and_its_arguments_become_cases(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    script = write(tmp_path, "doubler.py", SCRIPT)
    assert main(["capture", "--max-bytes", "0", str(script), "5"]) == 0
    meta, rows = read_cases(tmp_path / "cases" / "doubler")
    assert meta.model == "doubler" and meta.complete and meta.ops == 5
    # ones (a factory), mul x3 of a [5] tensor, add once
    assert [(row["op"], row["count"]) for row in rows] == [
        ("aten::ones", 1), ("aten::mul.Tensor", 3), ("aten::add.Tensor", 1)]
    assert rows[1]["arguments"] == "self=float32[5], other=2"
    assert rows[1]["call_site"] == "doubler.py:7 in <module>"
    out = capsys.readouterr().out
    assert "mluverify capture: wrote 3 unique cases of 5 ops into cases/doubler" in out


def test_a_script_that_raises_keeps_the_cases_before_the_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    script = write(tmp_path, "broken.py", BROKEN)
    assert main(["capture", "--out", str(tmp_path / "out"), str(script)]) == 1
    meta, rows = read_cases(tmp_path / "out")
    assert not meta.complete and [row["op"] for row in rows] == ["aten::ones", "aten::mul.Tensor"]
    assert meta.error == "ValueError: the model broke (at broken.py:5 in <module>)"
    err = capsys.readouterr().err
    assert "ValueError: the model broke" in err  # the traceback
    assert (f"the script raised ValueError: the model broke (at broken.py:5 in <module>); kept "
            f"the 2 unique cases of 2 ops into {tmp_path / 'out'} recorded up to the error") in err


def test_a_missing_script_is_an_error(tmp_path, capsys):
    assert main(["capture", str(tmp_path / "nowhere.py")]) == 2
    assert "nowhere.py' does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("text, size", [("0", 0), ("4096", 4096), ("512KiB", 512 << 10),
                                        ("16MiB", 16 << 20), ("2g", 2 << 30), ("8 kb", 8 << 10)])
def test_byte_sizes(text, size):
    assert byte_size(text) == size


def test_a_bad_size_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["capture", "--max-bytes", "lots", str(tmp_path / "x.py")])
    assert exit_info.value.code == 2
    assert "'lots' is not a size such as 4096, 512KiB or 16MiB" in capsys.readouterr().err
