"""The zoo's pure parts: the expected-status check in both directions, the expectations file's
own checks, the dashboard's pass rates, and an unknown model name."""
from pathlib import Path

import pytest
from zoo.zoo_status import (FAIL_ACCURACY, FAIL_TO_RUN, PASS, SKIPPED, ZooRow, case_status, expected_status,
                            gate_message, load_expected, markdown, pass_rates)

from mluverify.errors import ConfigError

HEADER = '[expectations]\ncase_ids = { "" = "suites/zoo/test_zoo.py::{key}" }\n[waivers]\n'


def _write(tmp_path: Path, entries: str) -> Path:
    path = tmp_path / "expected.toml"
    path.write_text(HEADER + entries, encoding="utf-8")
    return path


def test_the_gate_fails_a_change_in_either_direction():
    assert gate_message(PASS, PASS, "") is None
    assert gate_message(FAIL_ACCURACY, FAIL_ACCURACY, "rel_mse 0.1 > 0.003") is None
    assert gate_message(PASS, FAIL_ACCURACY, "rel_mse 0.1 > 0.003") == "new failure: fail_accuracy: rel_mse 0.1 > 0.003"
    assert gate_message(FAIL_ACCURACY, PASS, "").startswith("improved: expected fail_accuracy, now pass")
    assert gate_message(FAIL_ACCURACY, FAIL_TO_RUN, "boom").startswith("changed: expected fail_accuracy, now fail_to_run")


def test_expected_statuses_are_read_from_the_expectations_format(tmp_path):
    path = _write(tmp_path, '"test_zoo_model[float16-mlu:cnml-*-hf_bert]" = { reason = "fail_accuracy: fp16 '
                            'softmax", until = "2099-01-01", category = "dtype range", max = 0.1 }\n')
    expected = load_expected(path)
    case = "suites/zoo/test_zoo.py::test_zoo_model[float16-mlu:cnml-MLU370-hf_bert]"
    assert expected_status(case, expected)[0] == FAIL_ACCURACY
    assert expected_status(case.replace("float16", "float32"), expected) == (PASS, None)


def test_an_expectation_must_name_its_status(tmp_path):
    path = _write(tmp_path, '"test_zoo_model[*-hf_bert]" = { reason = "slow softmax", until = "2099-01-01" }\n')
    with pytest.raises(ConfigError, match=r"expected\.toml: waiver 'test_zoo_model\[\*-hf_bert\]'.*fail_accuracy"):
        load_expected(path)


def test_a_waived_record_keeps_what_it_was():
    waived_error = {"status": "waived", "error": "RuntimeError: no kernel", "passed": False}
    waived_value = {"status": "waived", "error": "", "passed": False, "reason": "rel_mse 0.1 > 0.02"}
    assert case_status([waived_value])[0] == FAIL_ACCURACY
    assert case_status([{"status": "passed", "passed": True, "reason": "ok"}, waived_error]) == \
        (FAIL_TO_RUN, "RuntimeError: no kernel")


def _row(model: str, family: str, target: str, status: str) -> ZooRow:
    return ZooRow(f"{model}-{target}", model, family, "images", target, "MLU370", "float32", "eval", status,
                  seconds=2.0)


def test_pass_rates_per_target_and_family_leave_skips_out():
    rows = [_row("a", "timm", "mlu:cnnl", PASS), _row("b", "timm", "mlu:cnnl", FAIL_ACCURACY),
            _row("c", "hf encoder", "mlu:cnnl", PASS), _row("d", "timm", "mlu:cnnl", SKIPPED)]
    rates = {(rate.target, rate.family): (rate.passed, rate.total) for rate in pass_rates(rows)}
    assert rates == {("mlu:cnnl", "all"): (2, 3), ("mlu:cnnl", "hf encoder"): (1, 1), ("mlu:cnnl", "timm"): (1, 2)}
    assert "| mlu:cnnl | timm | 1 | 2 | 50% | 2.0 | fail_accuracy 1 |" in markdown(rows)


def test_an_unknown_model_names_close_matches():
    pytest.importorskip("torch")
    from zoo.zoo_models import find_models

    with pytest.raises(ValueError, match=r"'hf_brt': did you mean hf_bert"):
        find_models(["hf_bert", "hf_brt"])


def test_op_coverage_lists_the_pairs_the_op_suites_never_test():
    from zoo.op_coverage import base_name, report

    assert [base_name(op) for op in ("aten::native_layer_norm.default", "aten::add_.Tensor", "aten::_to_copy")] == \
        ["layer_norm", "add", "to_copy"]
    pairs = {("convolution", "float32"): (3, "timm/a.py:1"), ("hardswish", "float32"): (2, "timm/b.py:2"),
             ("gelu", "float16"): (1, "hf/c.py:3"), ("view", "float32"): (4, "hf/d.py:4")}
    text = report(pairs, {("conv2d", "float32"), ("gelu", "float32")})
    assert "| hardswish | float32 | no | 2 | timm/b.py:2 |" in text
    assert "| gelu | float16 | yes | 1 | hf/c.py:3 |" in text  # tested, in float32 only
    assert "convolution" not in text  # tested as conv2d
    assert text.index("Layout ops") < text.index("| view | float32 |")


def test_a_verify_that_raises_before_judging_anything_is_fail_to_run_in_its_own_words():
    import torch
    from zoo.test_zoo import _outcome
    from zoo.zoo_models import Outputs, ZooModel

    model = ZooModel("tiny", "timm", "images", lambda: Outputs(torch.nn.Linear(2, 2), lambda m, x: (m(x),)),
                     lambda: (torch.ones(1, 2),))

    def verify(*args, **kwargs):
        raise RuntimeError("fused program of Outputs failed")

    status, reason, raised = _outcome(verify, [], model, "float32", "int8")
    assert (status, reason) == (FAIL_TO_RUN, "RuntimeError: fused program of Outputs failed")
    assert isinstance(raised, RuntimeError)


def test_a_model_whose_output_vanished_is_fail_to_run_not_a_pass():
    import torch
    from zoo.test_zoo import _outcome
    from zoo.zoo_models import Outputs, ZooModel

    # MobileViT at its default init: the logits are 0, so any device "agrees" with the CPU
    vanished = ZooModel("tiny", "hf vision", "images",
                        lambda: Outputs(torch.nn.Linear(2, 2), lambda m, x: (m(x) * 1e-9,)), lambda: (torch.ones(1, 2),))
    judged = []
    status, reason, _ = _outcome(lambda *args, **kwargs: judged.append(args), [], vanished, "float32", "eval")
    assert status == FAIL_TO_RUN and not judged
    assert reason.startswith("eager CPU run failed: ValueError: every floating output is below 1e-06 in magnitude")
