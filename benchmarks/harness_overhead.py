"""1,000 trivial parametrized cases: `pytest -p mluverify` (recording on) vs plain pytest with
torch.testing.assert_close, each a whole pytest process, alternated, medians compared.

Target (issue 36 item 6): at most 1.2x. Run: .venv/bin/python benchmarks/harness_overhead.py
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = 1000

PLAIN = f"""
import pytest, torch

@pytest.mark.parametrize("i", range({CASES}))
def test_add(i):
    x = torch.full((16,), float(i))
    torch.testing.assert_close(torch.add(x, 1.0), x + 1.0)
"""

HARNESS = f"""
import pytest, torch

@pytest.mark.parametrize("i", range({CASES}))
def test_add(verify, i):
    verify(torch.add, torch.full((16,), float(i)), 1.0, op="add")
"""


def time_pytest(directory: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
                   cwd=directory, check=True, capture_output=True)
    return time.perf_counter() - start


def main(repeats: int = 3) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plain_dir, harness_dir = Path(tmp, "plain"), Path(tmp, "harness")
        plain_dir.mkdir()
        harness_dir.mkdir()
        (plain_dir / "test_plain.py").write_text(PLAIN)
        (harness_dir / "test_harness.py").write_text(HARNESS)
        plain, harness = [], []
        for _ in range(repeats):
            plain.append(time_pytest(plain_dir))
            harness.append(time_pytest(harness_dir, "-p", "mluverify", "--mlu-target=cpu64:eager",
                                       f"--mlu-report={harness_dir / 'run'}"))
        records = __import__("pyarrow.parquet").parquet.read_table(harness_dir / "run" / "records.parquet")
        assert records.num_rows == CASES, records.num_rows
    p, h = statistics.median(plain), statistics.median(harness)
    print(f"plain pytest + assert_close:        {p:6.2f} s for {CASES} cases")
    print(f"pytest -p mluverify (recording on): {h:6.2f} s for {CASES} cases, {CASES} records")
    print(f"ratio: {h / p:.2f}x (target <= 1.2x)")


if __name__ == "__main__":
    main()
