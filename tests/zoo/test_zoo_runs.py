"""The zoo end to end, in pytest subprocesses over ``suites/zoo``: three small models of three
kinds (a timm CNN, a RoBERTa encoder, a GPT-2 decoder with its KV-cache step) pass on two targets
and a model whose eager CPU run raises is ``fail_to_run``; a wrong GELU planted through the
public kernel hook fails the model that uses it, names the op, and meets the expected-status
gate in both directions; an unknown name is a usage error; ``make verify`` leaves the zoo out.
"""
from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest
from zoo.zoo_status import FAIL_ACCURACY, FAIL_TO_RUN, PASS, read_rows

REPO = Path(__file__).resolve().parents[2]
# The extra's packages (out of the default install): without them these tests skip.
ZOO_MISSING = [name for name in ("timm", "transformers") if importlib.util.find_spec(name) is None]
INSTALL = "pip install 'mluverify[zoo]'"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(ZOO_MISSING), reason=f"{ZOO_MISSING} missing: {INSTALL}")]

PLANTED = Path(__file__).with_name("zoo_planted_kernels.py")
# a BERT-style encoder (RoBERTa), a decoder with its KV-cache step, a timm CNN
KINDS = {"mnasnet_100": ("timm", "images"), "hf_roberta": ("hf encoder", "tokens"), "hf_gpt2": ("hf decoder", "tokens")}
NOT_IN_TIMM = "gluon_xception65"  # in PyTorch's timm list, gone from timm 1.0.31: eager raises
TARGETS = ("mlu:cnnl", "mlu:cnml")


def _run_zoo(pytester: pytest.Pytester, report: Path, models, targets, *args: str):
    shutil.copy(PLANTED, pytester.path / PLANTED.name)
    result = pytester.runpytest_subprocess(
        "-p", "mluverify", str(REPO / "suites" / "zoo" / "test_zoo.py"), "--rootdir", str(REPO),
        "-c", str(REPO / "pyproject.toml"), *(f"--mlu-target={target}" for target in targets),
        *(f"--mlu-zoo-model={model}" for model in models), "-k", "test_zoo_model and float32",
        "--mlu-core-version", "MLU370", "--mlu-report", str(report), "-p", "no:cacheprovider", "-p", "no:randomly",
        "-q", *args)
    return result, {(row.model, row.target): row for row in read_rows(report)}


def test_three_kinds_of_model_on_two_targets_and_an_eager_failure(pytester, tmp_path):
    nothing_expected = tmp_path / "expected.toml"  # not the shipped file: every failure is new
    nothing_expected.write_text('[waivers]\n', encoding="utf-8")
    result, rows = _run_zoo(pytester, tmp_path / "run", [*KINDS, NOT_IN_TIMM], TARGETS,
                            f"--mlu-zoo-expected={nothing_expected}")
    result.assert_outcomes(passed=6, failed=2)
    for model, (family, kind) in KINDS.items():
        for target in TARGETS:
            row = rows[(model, target)]
            assert (row.status, row.family, row.input_kind, row.dtype, row.mode) == (PASS, family, kind, "float32", "eval")
    for target in TARGETS:  # the model's own failure, not the device's: no comparison was made
        row = rows[(NOT_IN_TIMM, target)]
        assert row.status == FAIL_TO_RUN and row.reason.startswith("eager CPU run failed: RuntimeError: Unknown model")
    result.stdout.fnmatch_lines(["*new failure: fail_to_run: eager CPU run failed*"])
    records = pd.read_parquet(tmp_path / "run" / "records.parquet")
    judged = records[records["op"].isin(KINDS)]
    assert set(zip(judged["op"], judged["target"])) == {(m, t) for m in KINDS for t in TARGETS}
    assert (judged["status"] == "passed").all() and NOT_IN_TIMM not in set(records["op"])
    assert "| mlu:cnnl | all | 3 | 4 | 75% |" in (tmp_path / "run" / "zoo.md").read_text()


def test_a_planted_wrong_gelu_fails_its_model_names_the_op_and_meets_the_gate(pytester, tmp_path):
    expected = tmp_path / "expected.toml"
    expected.write_text(
        '[expectations]\ncase_ids = { "" = "suites/zoo/test_zoo.py::{key}" }\n[waivers]\n'
        '"test_zoo_model[float32-mlu:cnnl-*-hf_bert]" = { reason = "fail_accuracy: the planted gelu", '
        'until = "2099-01-01", category = "device bug", max = 10.0 }\n'
        '"test_zoo_model[float32-mlu:cnnl-*-mnasnet_100]" = { reason = "fail_accuracy: uses no gelu", '
        'until = "2099-01-01", category = "device bug", max = 10.0 }\n', encoding="utf-8")
    result, rows = _run_zoo(pytester, tmp_path / "run", ["mnasnet_100", "hf_bert", "hf_gpt2"], ["mlu:cnnl"],
                            "-p", "zoo_planted_kernels",
                            "--mlu-dump=fail", f"--mlu-zoo-expected={expected}")
    bert = rows[("hf_bert", "mlu:cnnl")]
    assert bert.status == FAIL_ACCURACY and bert.first_bad_op.startswith("aten::gelu"), bert
    assert rows[("hf_gpt2", "mlu:cnnl")].status == PASS  # GPT-2's tanh GELU is not aten::gelu
    # expected and failing: xfailed; expected to fail but passing: "improved", failed
    result.assert_outcomes(passed=1, xfailed=1, failed=1)
    result.stdout.fnmatch_lines(["*improved: expected fail_accuracy, now pass*"])


def test_an_unknown_model_is_a_usage_error_naming_close_matches(pytester):
    result = pytester.runpytest_subprocess("-p", "mluverify", str(REPO / "suites" / "zoo"), "--rootdir", str(REPO),
                                           "-c", str(REPO / "pyproject.toml"), "--mlu-zoo-model=hf_brt",
                                           "--collect-only", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED  # 2, as the CLI's usage errors: nothing ran
    result.stdout.fnmatch_lines(["*--mlu-zoo-model: unknown zoo model(s): 'hf_brt': did you mean hf_bert*"])


def test_a_run_of_the_suites_leaves_the_zoo_out_unless_asked(pytester):
    others = [f"--ignore={path}" for path in (REPO / "suites").iterdir() if path.is_dir() and path.name != "zoo"]
    common = ("-p", "mluverify", str(REPO / "suites"), "--rootdir", str(REPO), "-c", str(REPO / "pyproject.toml"),
              *others, "--collect-only", "-q", "-p", "no:cacheprovider", "--mlu-zoo-model=hf_bert")
    assert "test_zoo_model" not in pytester.runpytest_subprocess(*common).stdout.str()
    pytester.runpytest_subprocess(*common, "--mlu-zoo").stdout.fnmatch_lines(["*test_zoo_model*hf_bert*"])
