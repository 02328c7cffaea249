"""Cost of dumping (and capturing) a ResNet50 forward, each variant side by side with the
undumped forward; Ascend's msprobe (statistics, level L1) on the same model in the same process.

Run: ``PYTHONPATH=. .venv/bin/python benchmarks/dump_overhead.py [--device cpu|mlu]
[--repeat 3] [--threads N] [--dir DIR] [--only TEXT]``. Each variant is timed as the whole
``with Dumper(...)`` / ``with capture(...)`` block (the dump is complete, index written, when
the clock stops) and divided by the undumped forward run just before it; the table shows
medians of those ratios, in wall-clock time and in this process's CPU time (steadier on a
shared machine). msprobe (``pip install -e '.[bench]'``) runs last, timed as
``start(); forward; stop(); step()``: it patches torch's APIs, so the forwards after it are
timed again. Rows that break the index layout's cost down: "pass-through modes" (the Dumper's
function and dispatch modes with handlers that only call through: the floor of any dump),
"index, 0, in Python" and "index, 1, in Python" (the same dumps with the C++ index core off),
"index, 0, gc off" (level 0 with Python's garbage collector off). Two probes after the table
show why the per-op work is in C++: the level-0 work replayed back to back over the forward's
recorded ops (caches hot), and one op's journal frame pickled hot and right after a conv2d.
Not a timed test: it prints, with the machine's load averages.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Callable

import torch

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from mluverify.dump import Dumper, capture
from mluverify.dump import _dumper, _index, _summary, _writer
from mluverify.dump._layout import op_info
from mluverify.dump._format import format_numbers

class PassThroughFunctions(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class PassThroughOps(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@contextlib.contextmanager
def pass_through_modes(path: Path):
    """The Dumper's two modes with handlers that only call through: the floor of any dump."""
    path.mkdir(parents=True)  # nothing is written; the caller removes it
    with PassThroughFunctions(), PassThroughOps():
        yield


@contextlib.contextmanager
def in_python(path: Path, level: int):
    """An index dump with the C++ index core off: every op dumped by the Python dumper."""
    original = _dumper._index_core
    _dumper._index_core = lambda settings: None
    try:
        with Dumper(path, level=level, layout="index"):
            yield
    finally:
        _dumper._index_core = original


@contextlib.contextmanager
def without_gc(path: Path):
    """A level-0 index dump with Python's garbage collector off (the dump's objects trigger
    collections that walk the model's objects too)."""
    gc.disable()
    try:
        with Dumper(path, level=0, layout="index"):
            yield
    finally:
        gc.enable()


VARIANTS: tuple[tuple[str, Callable[[Path], contextlib.AbstractContextManager]], ...] = (
    ("pass-through modes", pass_through_modes),
    ("index, level 0", lambda path: Dumper(path, level=0, layout="index")),
    ("index, 0, in Python", lambda path: in_python(path, 0)),
    ("index, 0, gc off", without_gc),
    ("index, level 1", lambda path: Dumper(path, level=1, layout="index")),
    ("index, 1, in Python", lambda path: in_python(path, 1)),
    ("capture (16 MiB of values)", lambda path: capture(path)),
    ("cambricon, level 0", lambda path: Dumper(path, level=0)),
    ("cambricon, level 1", lambda path: Dumper(path, level=1)),
    ("cambricon, level 2", lambda path: Dumper(path, level=2)),
    ("index, level 1, use_cpu", lambda path: Dumper(path, level=1, layout="index", use_cpu=True)),
)
MSPROBE = "msprobe statistics L1"


def resnet50(device: str) -> tuple[torch.nn.Module, torch.Tensor]:
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).eval().to(device)
    return model, torch.randn(1, 3, 224, 224).to(device)


def pick_device(requested: str | None) -> str:
    if requested == "cpu":
        return "cpu"
    try:
        import mluverify.device  # noqa: F401  (registers "mlu")
        return "mlu"
    except Exception as exc:  # any failure to set up the device: measure on the CPU
        if requested == "mlu":
            raise
        print(f"mlu unavailable ({exc}); measuring on the CPU")
        return "cpu"


def timed(fn) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of ``fn()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def median_pair(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


class FileClock:
    """Time and bytes spent creating directories and files (formatting text included)."""

    METHODS = ("mkdir", "write_text", "link")

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(self.METHODS, 0.0)
        self.text_bytes = 0
        self._originals = {name: getattr(_writer.DumpWriter, name) for name in self.METHODS}

    def __enter__(self) -> "FileClock":
        for name, original in self._originals.items():
            setattr(_writer.DumpWriter, name, self._timed(name, original))
        return self

    def _timed(self, name, original):
        clock = self

        def method(writer, *args):
            before, start = writer.bytes_written, time.perf_counter()
            original(writer, *args)
            clock.seconds[name] += time.perf_counter() - start
            if name == "write_text":
                clock.text_bytes += writer.bytes_written - before

        return method

    def __exit__(self, *exc) -> None:
        for name, original in self._originals.items():
            setattr(_writer.DumpWriter, name, original)


def formatter_rates(values: int = 1 << 20) -> str:
    """Text rate of the dump's formatter beside the fastest str method of the shared notes
    (``('%g\\n' * n) % tuple(a.tolist())``), on the same random float32 values, same run."""
    import numpy as np

    array = np.random.default_rng(0).standard_normal(values).astype(np.float32)
    start = time.perf_counter()
    text = ("%g\n" * values) % tuple(array.tolist())
    notes_rate = len(text) / (time.perf_counter() - start) / 1e6
    start = time.perf_counter()
    size = sum(len(chunk) for chunk in format_numbers(array))
    ours_rate = size / (time.perf_counter() - start) / 1e6
    assert size == len(text)  # same text, so the same digits
    return (f"text formatter on {values} float32 values: notes' str method {notes_rate:.0f} MB/s, "
            f"mluverify (bytes) {ours_rate:.0f} MB/s")


class _Recorder(TorchDispatchMode):
    """Keeps every aten op of a forward with its arguments and result."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        self.ops.append((func, args, kwargs or {}, output))
        return output


def per_op_work_hot(forward: Callable[[], object], root: Path, repeat: int = 20) -> str:
    """The level-0 Dumper's own work per op, run back to back over a recorded forward's ops
    (caches hot; the ops are not run again) by the C++ index core and by the Python dumper,
    to set beside what each adds to the live forward."""
    with _Recorder() as recorder:
        forward()
    medians = {}
    for label in ("C++ core", "Python"):
        seconds = []
        for index in range(repeat):
            path = root / f"hot-{index}"
            path.mkdir()
            session = _dumper._DumpSession(_dumper.DumpSettings(str(path), layout="index"), path)
            if label == "Python":
                session._core = None
            start = time.perf_counter()
            for func, args, kwargs, output in recorder.ops:
                _replay(session, op_info(func), func, args, kwargs, output)
            session.close()
            seconds.append(time.perf_counter() - start)
            shutil.rmtree(path)
            _summary.forget_shared_summaries()  # every replay summarizes afresh, in both paths
        medians[label] = statistics.median(seconds) * 1e3
    return (f"level 0's own work over the forward's {len(recorder.ops)} recorded ops, back to "
            f"back (caches hot), index included: " +
            ", ".join(f"{label} {ms:.1f} ms" for label, ms in medians.items()))


def _replay(session, info, func, args, kwargs, output) -> None:
    """One recorded op through the session's dumping, without running it again."""
    if info.excluded:
        return
    if session._core is not None:
        session._core.begin(info, args, kwargs)
        session._core_frame(info, output, raised=False)
    else:
        session._finish(session._begin(info, args, kwargs), func, args, kwargs, output)


def pickle_cold_hot() -> str:
    """One op's journal frame pickled with the caches hot and right after a convolution, which
    evicts the interpreter's code and data as each op of a forward does."""
    import pickle

    tensor = ("cnnl_result", "result", None, "float32", [1, 64, 56, 56], [200704, 3136, 56, 1],
              200704, 0, [0.5] * 10, *(None,) * 6, False, None, None)
    frame = ((1, "aten::convolution", "convolution", "1_conv2d/1_convolution", "conv2d",
              "mlu_stride=[1, 1], mlu_padding=[0, 0]"), [tensor, tensor[:], tensor[:]], None)
    x, weight = torch.randn(1, 64, 56, 56), torch.randn(64, 64, 3, 3)
    timings = {}
    for label, before in (("hot", lambda: None), ("after a conv2d", lambda: torch.conv2d(x, weight))):
        total = 0.0
        for _ in range(200):
            before()
            start = time.perf_counter()
            pickle.dumps(frame, protocol=5)
            total += time.perf_counter() - start
        timings[label] = total / 200 * 1e6
    return "pickling one op's journal frame: " + ", ".join(
        f"{label} {micros:.1f} us" for label, micros in timings.items())


def file_create_seconds(directory: Path, count: int = 400) -> float:
    """Seconds to create one small file (and a directory every fourth) on this disk now."""
    target = directory / "create-probe"
    start = time.perf_counter()
    for index in range(count):
        if index % 4 == 0:
            (target / str(index)).mkdir(parents=True)
        (target / str(index - index % 4) / f"f{index}").write_bytes(b"x")
    seconds = (time.perf_counter() - start) / count
    shutil.rmtree(target)
    return seconds


def entries(path: Path) -> int:
    return sum(len(dirs) + len(files) for _, dirs, files in os.walk(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "mlu"], default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    parser.add_argument("--dir", default=None, help="where dumps go (default: a temp dir)")
    parser.add_argument("--only", default="", help="run the variants whose label contains this")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    model, x = resnet50(device)
    root = Path(args.dir or tempfile.mkdtemp(prefix="dump-overhead-"))
    root.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        forward = lambda: model(x)  # noqa: E731
        forward()  # warm-up
        plain = [timed(forward) for _ in range(args.repeat)]
        print(f"ResNet50 on {device}, torch threads {torch.get_num_threads()}, dumps in {root}, "
              f"load averages {_load()}")
        wall, cpu = median_pair(plain)
        print(f"undumped forward: {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU "
              f"(median of {len(plain)})")
        print(f"{'variant':26} {'wall ms':>8} {'x fwd':>6} {'CPU ms':>8} {'x fwd':>6} "
              f"{'1st x':>6} {'min x':>6}  notes  (x fwd: median of block / the forward run before "
              f"it; 1st x: CPU ratio of the first block, statistics cache cold; min x: least block "
              f"CPU time / least forward CPU time)")
        for label, block in [variant for variant in VARIANTS if args.only in variant[0]]:
            _cold_cache()
            runs, befores, notes = [], [], ""
            for repeat in range(args.repeat):
                # Each block is paired with the undumped forward just before it, so a machine
                # that slows down or speeds up during the run moves both sides alike.
                befores.append(timed(forward))
                path = root / f"{label.replace(', ', '-').replace(' ', '')}-{repeat}"
                with FileClock() as files:
                    runs.append(timed(lambda: _run_in(block(path), forward)))
                if repeat == args.repeat - 1:
                    notes = _notes(path, files, runs[-1][0] - befores[-1][0])
                shutil.rmtree(path)
            _print_row(label, runs, befores, notes)
        if args.only in MSPROBE:
            _msprobe(forward, root, args.repeat)
    print(f"creating a file or directory here costs {file_create_seconds(root) * 1e3:.2f} ms "
          f"(probe, now); load averages {_load()}")
    print(formatter_rates())
    with torch.no_grad():
        print(per_op_work_hot(forward, root))
    print(pickle_cold_hot())


def _load() -> str:
    return "/".join(f"{load:.1f}" for load in os.getloadavg()) + " (1/5/15 min)"


def _print_row(label: str, runs: list, befores: list, notes: str) -> None:
    ratios = [(run[0] / before[0], run[1] / before[1]) for run, before in zip(runs, befores)]
    block_wall, block_cpu = median_pair(runs)
    ratio_wall, ratio_cpu = median_pair(ratios)
    # On a loaded machine the fastest runs are the least disturbed: ratio of the minima.
    least = min(run[1] for run in runs) / min(before[1] for before in befores)
    print(f"{label:26} {block_wall * 1e3:8.0f} {ratio_wall:6.2f} "
          f"{block_cpu * 1e3:8.0f} {ratio_cpu:6.2f} {ratios[0][1]:6.2f} {least:6.2f}  {notes}")


def _run_in(block: contextlib.AbstractContextManager, forward: Callable[[], object]) -> None:
    with block:
        forward()


def _msprobe(forward: Callable[[], object], root: Path, repeat: int) -> None:
    """msprobe's statistics dump at level L1 (every torch API's inputs and outputs), paired
    like the variants; its log lines are swallowed."""
    try:
        from msprobe.pytorch import PrecisionDebugger
    except ImportError:
        print(f"{MSPROBE:26} not installed (pip install -e '.[bench]')")
        return
    plain_before = median_pair([timed(forward) for _ in range(repeat)])[0]
    with contextlib.redirect_stdout(io.StringIO()):
        debugger = PrecisionDebugger(task="statistics", dump_path=str(root / "msprobe"), level="L1")

    def block() -> None:
        with contextlib.redirect_stdout(io.StringIO()):
            debugger.start()
            forward()
            debugger.stop()
            debugger.step()

    runs, befores = [], []
    for _ in range(repeat):
        befores.append(timed(forward))
        runs.append(timed(block))
    _print_row(MSPROBE, runs, befores, f"undumped forward {plain_before * 1e3:.0f} ms before "
               f"msprobe was set up, {median_pair([timed(forward) for _ in range(repeat)])[0] * 1e3:.0f} "
               f"ms after")
    shutil.rmtree(root / "msprobe", ignore_errors=True)


def _cold_cache() -> None:
    """Forget statistics kept across dumps, so each variant's first block starts cold."""
    _summary.forget_shared_summaries()


def _notes(path: Path, files: FileClock, overhead: float) -> str:
    """Where the last run's overhead went: files (level 0/1: almost all creation) and text."""
    if not files.seconds["mkdir"]:
        return ""
    in_files = sum(files.seconds.values())
    note = (f"{entries(path)} files+dirs: {in_files * 1e3:.0f} of {overhead * 1e3:.0f} ms "
            f"overhead in mkdir/open/write")
    if files.text_bytes > 1e6:
        note += (f"; text {files.text_bytes / 1e6:.0f} MB at "
                 f"{files.text_bytes / 1e6 / files.seconds['write_text']:.0f} MB/s")
    return note


if __name__ == "__main__":
    main()
