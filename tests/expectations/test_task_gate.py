"""Task-level gates: the threshold is the exact one-sided binomial bound, the sample size the
error budget needs is stated when too few are given, and a case whose task metric falls below
its threshold fails, in the record and in the gate's findings, with the test in words."""
import math
from typing import NamedTuple

import pandas  # noqa: F401  (imported before pytester snapshots sys.modules, so it is loaded once)
import pyarrow.parquet as pq
import pytest
import torch

from mluverify.core.task import Task, TaskReferences, matched_detections
from mluverify.errors import ConfigError, InvalidArgument
from mluverify.judge import TaskBudget, binomial_cdf, required_samples, task_threshold


def upper_tail(n: int, p: float, k: int) -> float:
    """P(X >= k) for X ~ Binomial(n, p), term by term with exact binomial coefficients."""
    return sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))


def test_the_threshold_is_the_hand_computed_binomial_bound():
    # n = 20, p0 = 0.9: P(X <= 15) = 1 - (P16 + ... + P20) = 1 - 0.95683 = 0.04317 <= 0.05,
    # P(X <= 16) = 0.04317 + 0.08978 = 0.13295 > 0.05: fail at <= 15 right, pass from 16 (0.80)
    assert 1 - upper_tail(20, 0.9, 16) == pytest.approx(0.04317, abs=1e-5)
    assert 1 - upper_tail(20, 0.9, 17) == pytest.approx(0.13295, abs=1e-5)
    gate = task_threshold(0.9, 20, budget=TaskBudget(effect_share=0.2 / 0.9))
    assert (gate.needed_right, gate.threshold) == (16, 0.8)
    # n = 40, p0 = 0.95: P(X <= 35) = 0.0480 <= 0.05 < P(X <= 36) = 0.1381: pass from 36 right (0.90)
    assert 1 - upper_tail(40, 0.95, 36) == pytest.approx(0.0480, abs=1e-4)
    assert task_threshold(0.95, 40, budget=TaskBudget(effect_share=0.25)).needed_right == 36
    assert binomial_cdf(35, 40, 0.95) == pytest.approx(1 - upper_tail(40, 0.95, 36), rel=1e-9)


def test_a_perfect_reference_fails_on_any_miss():
    gate = task_threshold(1.0, 30, budget=TaskBudget(effect_share=0.2))
    assert gate.needed_right == 30


def test_required_samples_is_the_normal_approximation_of_the_one_sided_test():
    # ((z.95 sqrt(.9 x .1) + z.8 sqrt(.7 x .3)) / 0.2)^2 = ((1.6449 x 0.3 + 0.8416 x 0.4583) / 0.2)^2 = 19.33
    assert required_samples(0.9, 0.2, TaskBudget()) == 20
    # MLPerf's 99 % at 97 % accuracy: effect 0.0097, ((1.6449 x 0.1706 + 0.8416 x 0.2167) / 0.0097)^2 = 2104
    assert required_samples(0.97, 0.0097, TaskBudget()) == 2104


def test_too_few_samples_for_the_budget_says_how_many_are_needed():
    with pytest.raises(InvalidArgument, match=r"19 samples are too few .* at least 20 are needed"):
        task_threshold(0.9, 19, budget=TaskBudget(effect_share=0.2 / 0.9), what="digits")
    with pytest.raises(InvalidArgument, match=r"899 samples are too few .* at least 2104 are needed"):
        task_threshold(0.97, 899)  # the default budget: 1 % of the float32 reference


@pytest.mark.parametrize("budget, culprit", [({"alpha": 0.0}, "alpha=0.0"), ({"beta": 1.5}, "beta=1.5"),
                                             ({"effect_share": -0.1}, "effect_share=-0.1")])
def test_a_budget_outside_zero_one_is_refused(budget, culprit):
    with pytest.raises(InvalidArgument, match=culprit):
        TaskBudget(**budget)


REFERENCES = """
[net.accuracy]
budget = { alpha = 0.05, beta = 0.2, effect_share = 0.25 }
references = { float32 = 0.95, "float32:int8" = 0.94 }
"""


def test_references_are_looked_up_per_dtype_and_quantization(tmp_path):
    path = tmp_path / "references.toml"
    path.write_text(REFERENCES)
    references = TaskReferences.load(path)
    task = references.task("net", "float32", "int8", labels=[0, 1])
    assert (task.reference, task.float32_reference, task.budget.effect_share) == (0.94, 0.95, 0.25)
    with pytest.raises(ConfigError, match=r"references.toml: \[net.accuracy\] has no reference 'float16'; "
                                          r"registered: float32, float32:int8"):
        references.task("net", "float16", labels=[0])
    with pytest.raises(ConfigError, match=r"no \[net.top1_agreement\]; registered: net.accuracy"):
        references.task("net", metric="top1_agreement")
    path.write_text(REFERENCES.replace("0.94", "94"))
    with pytest.raises(ConfigError, match=r"\[net.accuracy\]: references must map dtype\[:quant\] to a share in \(0, 1\]"):
        TaskReferences.load(path)
    path.write_text(REFERENCES.replace("alpha = 0.05", "size = 0.05"))
    with pytest.raises(ConfigError, match=r"\[net.accuracy\]: budget must be a table of alpha, beta, effect_share"):
        TaskReferences.load(path)
    path.write_text(REFERENCES.replace("net.accuracy", "net.recall"))
    with pytest.raises(ConfigError, match=r"\[net.recall\]: metric 'recall' is unknown; valid: accuracy, top1_agreement, detection_agreement"):
        TaskReferences.load(path)


def test_accuracy_needs_labels_and_agreement_takes_none():
    with pytest.raises(InvalidArgument, match="labels are needed"):
        Task("accuracy", 0.9)
    with pytest.raises(InvalidArgument, match="give none"):
        Task("top1_agreement", 0.9, labels=[1])


def test_detection_agreement_needs_the_post_processing_and_the_others_take_none():
    with pytest.raises(InvalidArgument, match="'detection_agreement': detections .* are needed"):
        Task("detection_agreement", 1.0)
    with pytest.raises(InvalidArgument, match="'top1_agreement': detections .* go with detection_agreement only"):
        Task("top1_agreement", 1.0, detections=list)


class Found(NamedTuple):
    boxes: torch.Tensor
    labels: torch.Tensor


def found(*boxes: tuple[float, float, float, float, int]) -> Found:
    return Found(torch.tensor([b[:4] for b in boxes], dtype=torch.float32).reshape(-1, 4),
                 torch.tensor([b[4] for b in boxes], dtype=torch.int64))


# CPU boxes, best first: A (0..10 square, class 1), B (20..30, class 2), C (the same place as A, class 3).
CPU = found((0, 0, 10, 10, 1), (20, 20, 30, 30, 2), (0, 0, 10, 10, 3))


@pytest.mark.parametrize("device, pairs, samples", [
    (CPU, 3, 3),                                                          # all found again
    (found((0, 0, 10, 10, 1), (20, 20, 30, 30, 2), (0, 0, 10, 10, 5)), 2, 4),  # C's class differs
    (found((0, 0, 10, 10, 1), (20, 20, 30, 30, 2), (0, 0, 10, 6, 3)), 3, 3),   # C smaller: IoU 0.6 >= 0.5
    (found((0, 0, 10, 10, 1), (20, 20, 30, 30, 2), (0, 0, 10, 4, 3)), 2, 4),   # IoU 0.4: no match
    (found((0, 0, 10, 10, 1)), 1, 3),                                     # B and C missing
    (found((0, 0, 10, 10, 1), (0, 0, 10, 10, 1), (20, 20, 30, 30, 2), (0, 0, 10, 10, 3)), 3, 4),  # one to one
    (found(), 0, 3),
])
def test_detections_match_one_to_one_by_class_at_iou_one_half(device, pairs, samples):
    assert matched_detections([device], [CPU]) == (pairs, samples)


def test_detection_agreement_scores_the_post_processed_outputs_and_gates_them():
    task = Task("detection_agreement", 1.0, budget=TaskBudget(effect_share=0.5), detections=lambda out: out)
    assert task.score([CPU, CPU], [CPU, CPU], "case").passed  # 6 of 6 (a reference of 1.0 allows no miss)
    missing = task.score([CPU, found((0, 0, 10, 10, 1))], [CPU, CPU], "case")
    assert (missing.right, missing.gate.samples, missing.passed) == (4, 6, False)
    with pytest.raises(InvalidArgument, match="case: task detection_agreement: 1 detection sets on the target for 2"):
        task.score([CPU], [CPU, CPU], "case")


# A device that computes the model right except for the first `seed` samples, whose top-1 class
# it moves one class on: a planted defect of a known number of samples.
CONFTEST = """
import torch
from mluverify import Backend, Execution, hookimpl

class Flip(Backend):
    name = "flip"
    modes = {"x": "cnnl"}

    def execute(self, fn, args, kwargs, *, case):
        out = fn(*args, **kwargs).clone()
        out[:case.seed] = out[:case.seed].roll(1, dims=1)
        return Execution(out)

@hookimpl
def mluverify_add_backends(registry):
    registry.add(Flip())
"""
# 40 samples, reference 0.95: the gate passes from 36 right (hand-computed above).
SUITE = """
import pytest
import torch
from mluverify import Task, TaskBudget

LABELS = torch.arange(40) % 10
BUDGET = TaskBudget(effect_share=0.25)

def model(x):
    return torch.nn.functional.one_hot(LABELS, 10).float() * 5 + x  # right on every sample

@pytest.mark.mlu_tolerance(1.0)
@pytest.mark.parametrize("flipped", [4, 5])
def test_accuracy(verify, flipped):
    verify(model, torch.zeros(40, 10), op="net", seed=flipped, task=Task("accuracy", 0.95, labels=LABELS, budget=BUDGET))

@pytest.mark.mlu_tolerance(1.0)
def test_agreement(verify):
    verify(model, torch.zeros(40, 10), op="net", seed=5, task=Task("top1_agreement", 0.95, budget=BUDGET))

@pytest.mark.mlu_tolerance(1.0)
def test_too_few(verify):
    verify(model, torch.zeros(40, 10), op="net", seed=0, task=Task("accuracy", 0.95, labels=LABELS))
"""


def test_a_task_metric_below_its_threshold_fails_the_case_and_the_gate(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_task=SUITE)
    run = pytester.path / "run"
    result = pytester.runpytest_subprocess("-p", "mluverify", f"--mlu-report={run}", "--mlu-target=flip:x",
                                           "--mlu-gate")
    result.assert_outcomes(passed=1, failed=3)
    # the default budget at 0.95: ((1.6449 x 0.2179 + 0.8416 x 0.2366) / 0.0095)^2 = 3445
    result.stdout.fnmatch_lines(["*40 samples are too few for its error budget*at least 3445 are needed*"])
    records = pq.read_table(run / "records.parquet").to_pandas().set_index("case_id")
    passing, failing = records.loc["test_task.py::test_accuracy[flip:x-4]"], records.loc["test_task.py::test_accuracy[flip:x-5]"]
    assert (passing["status"], passing["task_value"], passing["task_threshold"]) == ("passed", 36 / 40, 0.9)
    assert (failing["status"], failing["task_value"], failing["task_samples"]) == ("failed", 35 / 40, 40)
    assert records.loc["test_task.py::test_agreement[flip:x]", "task_value"] == 35 / 40
    result.stdout.fnmatch_lines(["*failed: task accuracy 0.8750 < threshold 0.9000 over 40 samples: one-sided exact binomial test*"])
    tasks = (run / "summary.md").read_text().split("## Task metrics", 1)[1].split("\n## ", 1)[0]
    assert tasks.count("| failed |") == 2 and tasks.count("| passed |") == 1  # the too-few case has no task row
    assert "| accuracy | 0.875 | 0.95 | 0.9 | 40 | 0.05 | 0.2 | 0.237 |" in tasks
    gate = (run / "gate.md").read_text()
    assert gate.count("task below threshold") == 2
    assert ("accuracy 0.8750 < threshold 0.9000 over 40 samples (reference 0.9500; one-sided exact binomial "
            "test at alpha 0.05, power 0.8 against a drop of 0.2375)") in gate


def test_a_run_written_before_task_metrics_still_loads_and_gates(tmp_path):
    import pyarrow.parquet as pq

    from mluverify.report.gate import evaluate_gate
    from mluverify.report.loading import load
    from mluverify.report.records import to_table

    row = {"run_id": "r", "case_id": "t[a]", "target": "mlu:cnnl", "op": "add", "metric": "rel_mse",
           "value": 1e-4, "bound": 3e-3, "passed": True, "status": "passed", "waived": False}
    task_columns = ["task_metric", "task_value", "task_reference", "task_threshold", "task_samples", "task_alpha",
                    "task_beta", "task_effect"]
    (tmp_path / "run").mkdir()
    pq.write_table(to_table([row], {"schema_version": 4}).drop_columns(task_columns), tmp_path / "run" / "records.parquet")
    loaded = load(tmp_path / "run")
    assert loaded[task_columns].isna().all(axis=None) and loaded.loc[0, "value"] == 1e-4
    assert evaluate_gate(loaded).passed
