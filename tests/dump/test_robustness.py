"""A dump survives what goes wrong around it: a crash, a full disk; and it stays opt-in."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from mluverify.dump import dump_case, load

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_python(code: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, timeout=300)


NETWORK = """
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 3), torch.nn.ReLU(),
                              torch.nn.Conv2d(8, 8, 3), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 32, 32)
"""


@pytest.mark.parametrize("layout", ["cambricon", "index"])  # the index in Python and in C++
def test_a_crash_keeps_the_index_of_what_was_written(tmp_path, layout):
    done = run_python(NETWORK + f"""
    import os
    from mluverify.dump import Dumper
    with torch.no_grad(), Dumper({str(tmp_path / 'dump')!r}, level=1, layout={layout!r}):
        net[1](net[0](x))
        os._exit(3)  # dies inside the block: no __exit__, no parquet
    """)
    assert done.returncode == 3, done.stderr
    index = load(tmp_path / "dump")
    assert not (tmp_path / "dump" / "index.parquet").exists()
    assert sorted(set(index["path"])) == ["1_conv2d/1_convolution", "2_relu"]
    assert index.query("path == '2_relu' and arg == 'cnnl_result'")["abs_sum"].iloc[0] > 0


def dump_with_file_limit(tmp_path, limit: int, dumper_args: str):
    """Dump the network in a process whose files may not grow past ``limit`` bytes
    (RLIMIT_FSIZE: the kernel refuses the write with EFBIG, as a full disk would); the
    program's own result must not change."""
    done = run_python(NETWORK + f"""
    import json, resource, signal, warnings
    from mluverify.dump import Dumper
    with torch.no_grad():
        expected = net(x)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, resource.RLIM_INFINITY))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad(), Dumper({str(tmp_path / 'dump')!r}, {dumper_args}) as dumper:
            out = net(x)
    print(json.dumps({{"same": torch.equal(out, expected), "core": dumper._session._core is not None,
                      "warnings": [str(w.message) for w in caught]}}))
    """)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["same"]
    assert len(report["warnings"]) == 1 and "stopped dumping" in report["warnings"][0]
    index = load(tmp_path / "dump")
    assert 0 < index["seq"].max() < 6  # some ops indexed, not all six
    return report, index


def test_full_disk_stops_dumping_with_a_warning_and_leaves_the_result_alone(tmp_path):
    # The sidecar of exact values crosses 100 KiB at the fourth op.
    _, index = dump_with_file_limit(tmp_path, 100 * 1024, "level=2")
    sidecar_size = (tmp_path / "dump" / "values.bin").stat().st_size
    for _, row in index.iterrows():
        assert (tmp_path / "dump" / row["file"]).exists()
        assert row["offset"] + row["nbytes"] <= sidecar_size


def test_full_disk_under_the_index_core_stops_dumping_and_keeps_the_journal(tmp_path):
    # The C++ core's journal write fails once the journal would pass 1 KiB.
    report, index = dump_with_file_limit(tmp_path, 1024, "layout='index'")
    assert report["core"]
    assert not (tmp_path / "dump" / "index.parquet").exists()
    assert list(index["seq"]) == sorted(index["seq"])


def test_importing_the_dumper_does_not_register_the_device():
    done = run_python("""
    import sys
    import mluverify.dump
    print("mluverify.device" in sys.modules, hasattr(__import__("torch"), "mlu"))
    """)
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_dump_case_reruns_a_case_at_level_1_with_the_cpu(tmp_path):
    a, b = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 0.5])
    path = dump_case(lambda p, q: torch.relu(p + q), (a, b), {}, tmp_path / "case")
    assert path == tmp_path / "case"
    index = load(path)
    assert set(index["level"].dropna()) == {1}
    relu = index.query("path == '2_relu' and role == 'result'").iloc[0]
    assert (relu["abs_sum"], relu["rel_mse"]) == (1.5, 0.0)
    assert (path / "2_relu" / "cpu_result").exists()


def test_public_api():
    import mluverify.dump

    assert sorted(mluverify.dump.__all__) == [
        "Capture", "CaseError", "CasesMeta", "DumpDiff", "DumpSettings", "Dumper", "EXIT_STATUS", "HARNESS_OPS",
        "OpTolerance", "Replay", "ReplayCase", "capture", "dump_case", "dump_diff", "first_wrong_group",
        "fused_kernel_debug", "group_table", "load", "load_values", "op_tolerance", "read_cases", "read_replay_cases",
        "shown_table", "undumped"]
    assert all(hasattr(mluverify.dump, name) for name in mluverify.dump.__all__)
    assert all(getattr(mluverify.dump, name).__doc__ for name in mluverify.dump.__all__)


def test_a_crash_while_writing_the_index_leaves_the_journal_to_read(tmp_path, monkeypatch):
    from mluverify.dump import Dumper, _index

    x = torch.arange(-3.0, 3.0)
    with Dumper(tmp_path / "whole", level=1, layout="index") as whole:
        torch.relu(x)
    # The same run dying after writing half of index.parquet: the journal is still there.
    monkeypatch.setattr(_index.os, "remove", lambda path: None)
    with Dumper(tmp_path / "torn", level=1, layout="index") as torn:
        torch.relu(x)
    parquet = torn.path / "index.parquet"
    parquet.write_bytes(parquet.read_bytes()[: parquet.stat().st_size // 2])
    expected, rows = load(whole.path), load(torn.path)
    assert rows[["path", "arg", "abs_sum"]].equals(expected[["path", "arg", "abs_sum"]])
    assert list(rows["abs_sum"]) == [9.0, 3.0]  # |x| and relu(x), summed
