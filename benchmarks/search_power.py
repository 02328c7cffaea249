"""Search power: does the value search find narrow device bugs that the seed-only search misses?

Plants 8 bugs in the emulated MLU's kernels, each wrong on a small part of the input space
(a special value, a denormal, an interval of width 1e-3, one size class, the last element of an
odd extent, ...), and searches each with ``mluverify.strategies.tensors`` (elements drawn by
hypothesis) and with the old seed-only strategy (a copy below: hypothesis draws a numpy seed,
never an element), on the same budget: the ``ci`` profile's max_examples and the ``audit``
profile's (conftest.py), shrinking on, each ``--runs`` times with the seeds 0, 1, ... so the
figures repeat. A bug is found when the device result fails the cnnl judge against the CPU.
Prints, per bug, budget and search, in how many runs it was found and the median element count
of the shrunk example; then the bugs found per run, and what one example costs with each
strategy on a correct kernel (the value search's share of a suite's time).

Targets (issue 25): the value search finds >= 7 of 8 under the audit budget and >= 2x as many
as the seed-only search under the CI budget; each failure shrinks to <= 4 elements where the
bug allows (``min_elements``: the fewest a failing input can have).

Bugs are planted by wrapping the cnnl kernel in ``mluverify.device.kernel_registry()`` and
restoring it afterwards (the registry the ``mluverify_device_kernels`` hook fills).
Run: .venv/bin/python benchmarks/search_power.py
"""
from __future__ import annotations

import argparse
import contextlib
import runpy
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, given, seed, settings, strategies as st

import mluverify.device
from mluverify.judge import compare
from mluverify.strategies import DISTRIBUTIONS, shapes, tensors

WRONG = 1e3  # what a planted bug adds: far beyond any bound, so only the bug fails a case
_TINY = float(np.finfo(np.float32).tiny)


@dataclass(frozen=True)
class PlantedBug:
    """``op`` (an ATen overload) is wrong where ``wrong(inputs, out)`` is True."""

    name: str
    aten: str
    call: Callable[[torch.Tensor], torch.Tensor]
    wrong: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    min_elements: int  # the fewest input elements that can trigger it


def _last_of_odd_extent(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    mask = torch.zeros_like(out, dtype=torch.bool)
    if out.dim() and out.shape[-1] % 2 == 1 and out.shape[-1] > 1:
        mask[..., -1] = True
    return mask


def _past_first_block(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    flat = torch.arange(out.numel()).reshape(out.shape)
    return flat >= 2048


BUGS = (
    PlantedBug("relu at -0.0", "aten::relu", torch.relu,
               lambda x, out: (x == 0) & torch.signbit(x), 1),
    PlantedBug("sigmoid at float32 denormals", "aten::sigmoid", torch.sigmoid,
               lambda x, out: (x != 0) & (x.abs() < _TINY), 1),
    PlantedBug("tanh on [0.25, 0.251)", "aten::tanh", torch.tanh,
               lambda x, out: (x >= 0.25) & (x < 0.251), 1),
    PlantedBug("exp on [-1.234, -1.233)", "aten::exp", torch.exp,
               lambda x, out: (x >= -1.234) & (x < -1.233), 1),
    PlantedBug("floor at exact integers in [-4, -2]", "aten::floor", torch.floor,
               lambda x, out: (x == torch.round(x)) & (x <= -2) & (x >= -4), 1),
    PlantedBug("clamp(-0.5, 0.75) at exactly 0.75", "aten::clamp",
               lambda x: torch.clamp(x, -0.5, 0.75), lambda x, out: x == 0.75, 1),
    PlantedBug("add: last element of an odd last extent", "aten::add.Tensor",
               lambda x: torch.add(x, x), lambda x, out: _last_of_odd_extent(x, out), 3),
    PlantedBug("abs past 2048 elements (second block)", "aten::abs", torch.abs,
               lambda x, out: _past_first_block(x, out), 2049),
)


@contextlib.contextmanager
def planted(bug: PlantedBug) -> Iterator[None]:
    """The cnnl kernel of ``bug.aten`` made wrong where ``bug.wrong`` says, restored after."""
    registry = mluverify.device.kernel_registry()
    original = registry.kernel(bug.aten, "cnnl")

    def buggy(x, *args, **kwargs):
        out = original(x, *args, **kwargs)
        return torch.where(bug.wrong(x, out), out + WRONG, out)

    registry.register(bug.aten, buggy, "cnnl")
    try:
        yield
    finally:
        registry.register(bug.aten, original, "cnnl")


# --- the seed-only search, as mluverify.strategies drew tensors before issue 25 --------------
_OLD_SPECIAL_VALUES = (0.0, -0.0, 1.0, -1.0, 1e-30, -1e-30, 3.0e4, -3.0e4, 0.5, 2.0)


def _seeded_values(shape, distribution: str, rng_seed: int) -> np.ndarray:
    rng = np.random.default_rng(rng_seed)
    size = int(np.prod(shape)) if len(shape) else 1
    if distribution == "normal":
        flat = rng.normal(0.0, 1.0, size)
    elif distribution == "wide_uniform":
        flat = rng.uniform(-1e3, 1e3, size)
    elif distribution == "outliers":
        flat = rng.normal(0.0, 1.0, size)
        spikes = rng.random(size) < 0.01
        flat[spikes] = rng.choice([-1e3, 1e3], spikes.sum())
    else:  # special
        flat = rng.choice(np.array(_OLD_SPECIAL_VALUES), size)
    return flat.astype(np.float32).reshape(tuple(shape))


@st.composite
def seed_only_tensors(draw, shape_strategy):
    shape = draw(shape_strategy)
    distribution = draw(st.sampled_from(list(DISTRIBUTIONS)))
    rng_seed = draw(st.integers(0, 2**31 - 1))
    if len(shape) >= 2 and draw(st.booleans()):
        swapped = (*shape[:-2], shape[-1], shape[-2])
        return torch.from_numpy(_seeded_values(swapped, distribution, rng_seed)).transpose(-1, -2)
    return torch.from_numpy(_seeded_values(shape, distribution, rng_seed))
# ----------------------------------------------------------------------------------------------


def fails_on_device(bug: PlantedBug) -> Callable[[torch.Tensor], bool]:
    def check(x: torch.Tensor) -> bool:
        actual = bug.call(x.to("mlu")).cpu()
        return not compare(actual, bug.call(x), op=bug.name).passed
    return check


def search(bug: PlantedBug, strategy, budget: settings, run: int) -> int | None:
    """Elements of the shrunk failing input of one search (random seed ``run``), or None when
    the budget found none. After shrinking, hypothesis replays the minimal example last."""
    fails, tried = fails_on_device(bug), []

    @seed(run)
    @settings(budget)
    @given(x=strategy)
    def probe(x):
        tried.append(x.numel())
        assert not fails(x)

    with planted(bug):
        try:
            probe()
        except AssertionError:
            return tried[-1]
    return None


def seconds_per_example(strategy, budget: settings, runs: range) -> float:
    """Median over ``runs`` of a whole search's seconds per example on a correct kernel (sigmoid
    on the device against the CPU): drawing, the device call and the judge, as a suite case."""
    check = fails_on_device(BUGS[1])  # with nothing planted: every example passes
    timings = []
    for run in runs:
        examples = []

        @seed(run)
        @settings(budget)
        @given(x=strategy)
        def probe(x):
            examples.append(x.numel())
            assert not check(x)

        start = time.perf_counter()
        probe()
        timings.append((time.perf_counter() - start) / len(examples))
    return statistics.median(timings)


def budgets() -> dict[str, settings]:
    common = dict(derandomize=False, database=None, deadline=None, phases=list(Phase), print_blob=False,
                  suppress_health_check=list(HealthCheck))
    return {name: settings(max_examples=settings.get_profile(name).max_examples, **common)
            for name in ("ci", "audit")}


def main() -> None:
    # the repo's hypothesis profiles (and its empty pool of mined constants)
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "conftest.py"))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="searches per bug, budget and strategy (seeds 0..runs-1)")
    runs = range(parser.parse_args().runs)
    searches = {"value": tensors(shapes()), "seed-only": seed_only_tensors(shapes())}
    print(f"{len(runs)} runs each; cell: runs that found the bug, median shrunk elements")
    print(f"{'bug':42} {'budget':7} {'value search':>16} {'seed-only':>16}  min elements")
    found = {(budget, name): 0 for budget in budgets() for name in searches}
    for bug in BUGS:
        for budget_name, budget in budgets().items():
            cells = []
            for name, strategy in searches.items():
                sizes = [size for run in runs if (size := search(bug, strategy, budget, run)) is not None]
                found[(budget_name, name)] += len(sizes)
                median = f"{statistics.median(sizes):g}" if sizes else "-"
                cells.append(f"{len(sizes)}/{len(runs)}, {median}")
            print(f"{bug.name:42} {budget_name:7} {cells[0]:>16} {cells[1]:>16}  {bug.min_elements}")
    for budget_name, budget in budgets().items():
        per_run = {name: found[(budget_name, name)] / len(runs) for name in searches}
        print(f"bugs found per run under {budget_name} ({budget.max_examples} examples): value search "
              f"{per_run['value']:.1f}/{len(BUGS)}, seed-only {per_run['seed-only']:.1f}/{len(BUGS)}")
    # What the value search costs a suite: whole searches (draws, device, judge) on a correct kernel.
    cost = {name: seconds_per_example(strategy, budgets()["audit"], runs) for name, strategy in searches.items()}
    print(f"seconds per example (audit budget, correct sigmoid): value search {cost['value'] * 1e3:.2f} ms, "
          f"seed-only {cost['seed-only'] * 1e3:.2f} ms, ratio {cost['value'] / cost['seed-only']:.2f}x")


if __name__ == "__main__":
    main()
