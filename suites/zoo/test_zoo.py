"""The model zoo (issue 39): every model of PyTorch's timm list and the Hugging Face
architectures of ``zoo_hf`` on every target the run names, in float32 and float16 (fused where
the target fuses: ``mlu:cnml``), int8 where the target quantizes (``mlu:cnml``, ``ort:int8``,
``openvino:int8``), and a training step (loss and gradients) for ``zoo_models.TRAINED``.

Each case runs the model twice in eager on the CPU first (as the dashboard does): an eager run
that raises is ``fail_to_run`` (not a device failure) and two that differ are
``nondeterministic`` (``eager_two_runs_differ``); then ``verify`` runs it on the target. Its
dashboard status is checked against ``expected_status.toml`` in both directions (a case that
starts passing fails as "improved" until the file is updated), and written as a row of the
run's dashboard (``zoo.md``); a failing case names the first op dump-diff blames when the run
dumps failures (``--mlu-dump=fail``).
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from .zoo_models import INSTALL, SEED, ZooModel, eager, find_models, zoo_models
from .zoo_status import (EXPECTED_FILE, FAIL_TO_RUN, KILLED, NONDETERMINISTIC, PASS, SKIPPED, ZooRow, case_status,
                         expected_status, gate_message, load_expected, write_row)

QUANTIZING_TARGETS = ("mlu:cnml", "ort:int8", "openvino:int8")
# An eager output no larger than this everywhere at the seeded weights: the activations vanished
# (float32 holds values far smaller, but nothing a bound could judge is left in them).
VANISHED = 1e-6


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "model" in metafunc.fixturenames:
        trained_only = metafunc.definition.name == "test_zoo_training"
        metafunc.definition.add_marker(pytest.mark.parametrize("model", zoo_params(metafunc.config, trained_only)))


def zoo_params(config: pytest.Config, trained_only: bool = False) -> list:
    """The models this run asks for (all without ``--mlu-zoo-model``), one param each."""
    names = config.getoption("mlu_zoo_model")
    try:
        models = find_models(names) if names else list(zoo_models().values())
    except ValueError as exc:
        raise pytest.UsageError(f"--mlu-zoo-model: {exc}") from None
    return [pytest.param(model, id=model.name) for model in models if model.trained or not trained_only]


def require_zoo() -> None:
    """Fail under CI=true when the extra is installed but cannot be imported (else skip)."""
    try:
        import timm  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the zoo extra is installed but does not import: {exc}")
        pytest.skip(f"the zoo extra does not import ({exc}): {INSTALL}")


class Loss(torch.nn.Module):
    """A training step's loss: cross-entropy of every output's logits against fixed labels
    (position ``i`` labelled ``i`` modulo the classes), summed. The model's integer inputs
    (token ids, masks) are buffers, moved with it: only floating inputs are arguments, the
    leaves whose gradients ``verify(grad=True)`` judges."""

    def __init__(self, model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        super().__init__()
        self.model = model
        self.floating = [tensor.is_floating_point() for tensor in inputs]
        for position, tensor in enumerate(inputs):
            if not tensor.is_floating_point():
                self.register_buffer(f"input_{position}", tensor)

    def forward(self, *floating: torch.Tensor) -> torch.Tensor:
        given = iter(floating)
        inputs = [next(given) if is_float else getattr(self, f"input_{position}")
                  for position, is_float in enumerate(self.floating)]
        losses = []
        for logits in self.model(*inputs):
            flat = logits.reshape(-1, logits.shape[-1]).float()
            labels = torch.arange(flat.shape[0], device=flat.device) % flat.shape[1]
            losses.append(F.cross_entropy(flat, labels))
        return torch.stack(losses).sum()


def _same(first: tuple[torch.Tensor, ...], second: tuple[torch.Tensor, ...]) -> bool:
    return all(torch.equal(a, b) or torch.allclose(a, b, rtol=0, atol=0, equal_nan=True) for a, b in zip(first, second))


def _eager_twice(model: ZooModel, mode: str) -> tuple[torch.nn.Module, tuple, str]:
    """The built model (a ``Loss`` in train mode), its inputs, and why two eager CPU runs differ ("")."""
    built, inputs = eager(model)
    if mode == "train":
        built, inputs = Loss(built, inputs), tuple(tensor for tensor in inputs if tensor.is_floating_point())
    with torch.no_grad():
        first, second = built(*inputs), built(*inputs)
    first, second = ((first,), (second,)) if mode == "train" else (first, second)
    if not any(bool((output.abs() > VANISHED).any()) for output in first if output.is_floating_point()):
        raise ValueError(f"every floating output is below {VANISHED:g} in magnitude at the seeded weights "
                         "(the activations vanished): a comparison would judge nothing")
    return built, inputs, "" if _same(first, second) else "two eager CPU runs differ (eager_two_runs_differ)"


def _first_bad_op(records: list[dict], run_dir: Path) -> str:
    """The first op (or fusion group) whose own error breaks the bound, from the dump of the
    failing case (``--mlu-dump=fail`` puts ``; dump: PATH``, relative to ``run_dir``, in its
    reproducer)."""
    dumps = [found.group(1) for record in records
             if (found := re.search(r"; dump: (\S+)", record.get("reproducer") or ""))]
    if not dumps:
        return ""
    from mluverify.dump import dump_diff

    diff = dump_diff(Path(run_dir) / dumps[-1])
    group = diff.first_group
    if group is not None:
        return f"fusion group {group.get('group', '')} ({group.get('ops', '')})"
    if diff.first_offender is None:
        return "none blamed: no op's own error breaks the bound (accumulated error)"
    offender = diff.table[diff.table["seq"] == diff.first_offender].iloc[0]
    return f"{offender['op']} {offender['inputs']}"


def _blame(records: list[dict], run_dir: Path) -> str:
    """``_first_bad_op``, or why dump-diff could not say: the case's status stands either way."""
    try:
        return _first_bad_op(records, run_dir)
    except Exception as exc:
        return f"dump-diff raised {type(exc).__name__}: {exc}"


def _run(request: pytest.FixtureRequest, verify, records: list, run_dir: Path, model: ZooModel, dtype: str,
         mode: str) -> None:
    """One zoo case: its row written as it starts and as it ends, then the expected-status gate."""
    require_zoo()
    params = request.node.callspec.params
    row = ZooRow(request.node.nodeid, model.name, model.family, model.input_kind, str(params["mlu_target"]),
                 params.get("mlu_core_version", ""), dtype, mode, FAIL_TO_RUN, KILLED)
    write_row(run_dir, row)  # kept if the case kills the process
    started = time.perf_counter()
    try:
        status, reason, raised = _outcome(verify, records, model, dtype, mode)
    except pytest.skip.Exception as exc:  # the target does not run this case: no row in the rates
        write_row(run_dir, replace(row, status=SKIPPED, reason=str(exc)))
        raise
    first_bad = _blame(records, run_dir) if status not in (PASS, FAIL_TO_RUN) else ""
    write_row(run_dir, replace(row, status=status, reason=reason, first_bad_op=first_bad,
                               seconds=round(time.perf_counter() - started, 3)))
    _gate(row.case_id, status, reason, raised, request.config.getoption("mlu_zoo_expected") or EXPECTED_FILE)


def _outcome(verify, records: list, model: ZooModel, dtype: str,
             mode: str) -> tuple[str, str, BaseException | None]:
    """``(status, reason, what verify raised)``: eager twice on the CPU, then ``verify``."""
    try:
        built, inputs, differ = _eager_twice(model, mode)
    except Exception as exc:  # the model itself does not run: not the device's failure
        return FAIL_TO_RUN, f"eager CPU run failed: {type(exc).__name__}: {exc}", None
    raised = None
    try:
        verify(built, *inputs, op=model.name, dtype=dtype, quant="int8" if mode == "int8" else "", seed=SEED,
               grad=mode == "train")
    except (Exception, pytest.fail.Exception, pytest.xfail.Exception) as exc:  # judged below, from the records
        raised = exc
    status, reason = case_status(records)
    if not records and raised is not None:  # verify raised before it judged anything: its words say why
        reason = f"{type(raised).__name__}: {raised}"
    if differ and status == PASS:
        status, reason = NONDETERMINISTIC, differ
    return status, reason, raised


def _gate(case_id: str, status: str, reason: str, raised: BaseException | None, expectations: Path) -> None:
    """The expected status of the case (from ``expectations``), checked in both directions."""
    expected, entry = expected_status(case_id, load_expected(expectations))
    if entry is not None and entry.expired():
        pytest.fail(f"the expected status expired on {entry.until} ({entry.reason}); now {status}: {reason}",
                    pytrace=False)
    problem = gate_message(expected, status, reason)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    if status != PASS:
        pytest.xfail(f"expected {status} until {entry.until}: {entry.reason}")
    if raised is not None:
        raise raised


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning")
def test_zoo_model(request, verify, records, mlu_run_dir, model: ZooModel, dtype: str) -> None:
    _run(request, verify, records, mlu_run_dir, model, dtype, "eval")


@pytest.mark.mlu_targets(*QUANTIZING_TARGETS)
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning")
def test_zoo_int8(request, verify, records, mlu_run_dir, model: ZooModel) -> None:
    _run(request, verify, records, mlu_run_dir, model, "float32", "int8")


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::FutureWarning", "ignore::DeprecationWarning")
def test_zoo_training(request, verify, records, mlu_run_dir, model: ZooModel) -> None:
    _run(request, verify, records, mlu_run_dir, model, "float32", "train")
