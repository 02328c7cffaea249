"""capture(): unique cases and counts of a small model (small_model.py: run twice under
no_grad), inputs kept or as recipes, backward, a program that raises."""
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from mluverify.dump import capture, read_cases, read_replay_cases
from mluverify.dump._cases import CASES_FILE

import small_model
from small_model import EXPECTED, FORWARD_LINE, small_net


def captured(tmp_path, max_bytes=None, forwards=2):
    net, x = small_net()
    with torch.no_grad(), capture(tmp_path / "cases", model="small", max_bytes=max_bytes) as c:
        for _ in range(forwards):
            net(x)
    return net, x, c


def tensors_of(row):
    return [(t["dtype"], list(t["shape"]), list(t["stride"])) for t in row["tensors"]]


def test_unique_cases_and_counts_match_the_hand_derived_list(tmp_path):
    _, _, c = captured(tmp_path)
    meta, rows = read_cases(c.path)
    assert [(row["op"], row["count"], tensors_of(row)) for row in rows] == EXPECTED
    assert [row["name"] for row in rows] == ["convolution-1", "relu-1", "convolution-2", "view-1",
                                            "t-1", "addmm-1"]
    assert (c.cases, c.ops) == (6, 18) and meta.ops == 18 and meta.complete and meta.model == "small"
    assert {row["backward"] for row in rows} == {False}


def test_non_tensor_arguments_and_first_call_site(tmp_path):
    _, _, c = captured(tmp_path)
    _, rows = read_cases(c.path)
    conv = rows[0]
    assert conv["arguments"] == ("input=float32[1, 3, 8, 8], weight=float32[4, 3, 3, 3], "
                                 "bias=float32[4], stride=[1, 1], padding=[1, 1], dilation=[1, 1], "
                                 "transposed=False, output_padding=[0, 0], groups=1")
    assert rows[5]["arguments"] == ("self=float32[10], mat1=float32[1, 256], "
                                    "mat2=float32[256, 10] stride [1, 256]")
    line = open(small_model.__file__).read().splitlines().index(FORWARD_LINE) + 1
    assert rows[5]["call_site"] == f"tests/capture/small_model.py:{line} in forward"
    assert rows[3]["call_site"] == rows[5]["call_site"]  # flatten is on the same line


def test_kept_values_are_the_real_inputs_and_replay_the_op(tmp_path):
    net, x, c = captured(tmp_path)
    _, cases = read_replay_cases(c.path)
    assert {t["source"] for case in cases for t in case.tensors} == {"values"}
    replay = cases[0].build()
    conv = net.convs[0]
    for rebuilt, original in zip(replay.args, (x, conv.weight, conv.bias)):
        assert torch.equal(rebuilt, original)
    assert torch.equal(replay.fn(*replay.args), F.conv2d(x, conv.weight, conv.bias, padding=1))
    addmm = cases[5].build()
    assert addmm.args[2].stride() == (1, 256)  # the transposed weight stays transposed
    assert torch.equal(addmm.args[2], net.head.weight.t())


def test_an_unchanged_tensor_is_written_once(tmp_path):
    x = torch.arange(6.0).reshape(2, 3)
    with capture(tmp_path / "cases", max_bytes=None) as c:
        x + 1
        x * 2
    _, rows = read_cases(c.path)
    add, mul = (row["tensors"][0] for row in rows)
    assert (add["offset"], add["nbytes"]) == (mul["offset"], mul["nbytes"]) == (0, 24)
    assert (c.path / "values.bin").stat().st_size == 24


def test_the_budget_switches_to_recipes(tmp_path):
    net, x = small_net()
    first_case_bytes = (1 * 3 * 8 * 8 + 4 * 3 * 3 * 3 + 4) * 4
    _, _, c = captured(tmp_path, max_bytes=first_case_bytes)
    _, rows = read_cases(c.path)
    assert [t["source"] for t in rows[0]["tensors"]] == ["values"] * 3
    assert all(t["source"] == "recipe" for row in rows[1:] for t in row["tensors"])
    assert (c.path / "values.bin").stat().st_size == first_case_bytes
    # relu-1's input is the first convolution's output: its recipe, from numpy.
    conv = net.convs[0]
    with torch.no_grad():
        relu_input = F.conv2d(x, conv.weight, conv.bias, padding=1).numpy().astype(np.float64)
    recipe = rows[1]["tensors"][0]
    assert recipe["min"] == pytest.approx(relu_input.min(), rel=1e-6)
    assert recipe["max"] == pytest.approx(relu_input.max(), rel=1e-6)
    assert recipe["mean"] == pytest.approx(relu_input.mean(), rel=1e-5, abs=1e-7)
    assert recipe["std"] == pytest.approx(relu_input.std(), rel=1e-5)
    assert (recipe["nan_share"], recipe["posinf_share"], recipe["neginf_share"]) == (0, 0, 0)


def test_synthesised_inputs_follow_their_recipe(tmp_path):
    torch.manual_seed(1)
    x = torch.randn(50, 40) * 3 + 2
    x[0, :5] = math.nan
    x[1, :2] = math.inf
    x[2, :1] = -math.inf
    with capture(tmp_path / "cases", max_bytes=0) as c:
        torch.exp(x)
    (case,), = [read_replay_cases(c.path)[1]]
    spec = case.tensors[0]
    finite = x[torch.isfinite(x)].double().numpy()
    assert (spec["nan_share"], spec["posinf_share"], spec["neginf_share"]) == (5 / 2000, 2 / 2000,
                                                                              1 / 2000)
    assert spec["min"] == pytest.approx(finite.min()) and spec["max"] == pytest.approx(finite.max())
    synthetic = case.build().args[0]
    assert synthetic.shape == (50, 40) and synthetic.dtype == torch.float32
    assert (int(synthetic.isnan().sum()), int((synthetic == math.inf).sum()),
            int((synthetic == -math.inf).sum())) == (5, 2, 1)
    values = synthetic[torch.isfinite(synthetic)].double()
    assert float(values.min()) == pytest.approx(finite.min(), rel=1e-6)
    assert float(values.max()) == pytest.approx(finite.max(), rel=1e-6)
    assert float(values.mean()) == pytest.approx(finite.mean(), abs=0.2)  # 1992 draws of std 3
    assert float(values.std()) == pytest.approx(finite.std(), rel=0.1)
    assert torch.equal(case.build().args[0].nan_to_num(), synthetic.nan_to_num())  # seeded


def test_backward_ops_are_captured_with_their_autograd_node(tmp_path):
    torch.manual_seed(0)
    linear = nn.Linear(4, 3)
    x = torch.randn(2, 4)
    with capture(tmp_path / "cases", max_bytes=None) as c:
        linear(x).sum().backward()
    _, cases = read_replay_cases(c.path)
    backward = {case.op: case.backward for case in cases}
    # derivatives.yaml: sum's backward expands the gradient; addmm's gives the bias's gradient
    # as a sum over the batch and, mat2 being the transposed weight, the weight's gradient
    # dL/dW = grad^T x as one mm.
    assert {op: backward[op] for op in ("aten::addmm", "aten::sum", "aten::expand", "aten::mm",
                                        "aten::sum.dim_IntList")} == {
        "aten::addmm": False, "aten::sum": False, "aten::expand": True, "aten::mm": True,
        "aten::sum.dim_IntList": True}
    mm = next(case for case in cases if case.op == "aten::mm")
    assert mm.call_site.endswith("[AddmmBackward0]")
    replay = mm.build()
    grad = torch.ones(2, 3)  # of sum()
    assert torch.equal(replay.args[0], grad.t()) and torch.equal(replay.args[1], x)
    assert torch.allclose(replay.fn(*replay.args), grad.t() @ x)


def test_a_program_that_raises_keeps_what_it_recorded(tmp_path):
    x = torch.ones(3)
    with pytest.raises(ValueError, match="model broke"):
        with capture(tmp_path / "cases") as c:
            x + 1
            raise ValueError("model broke")
    meta, rows = read_cases(c.path)
    assert not meta.complete
    assert meta.error.startswith("ValueError: model broke (at tests/capture/test_capture.py:")
    assert [row["op"] for row in rows] == ["aten::add.Tensor"]


def test_an_existing_directory_is_never_overwritten(tmp_path):
    (tmp_path / "cases").mkdir()
    with capture(tmp_path / "cases") as c:
        torch.ones(2) + 1
    assert c.path == tmp_path / "cases_1" and (c.path / CASES_FILE).exists()


def test_rows_read_back_as_a_table(tmp_path):
    _, _, c = captured(tmp_path)
    table = pd.read_parquet(c.path / CASES_FILE)
    assert list(table["count"]) == [count for _, count, _ in EXPECTED]


def test_a_full_disk_turns_the_rest_into_recipes_and_leaves_the_result_alone(tmp_path):
    # RLIMIT_FSIZE makes the kernel refuse writes past 64 KiB (EFBIG), as a full disk would;
    # the network's 8 convolutions (each its own case) have weights of about 36 KiB.
    code = f"""
    import json, resource, signal, warnings
    import torch
    from mluverify.dump import capture, read_cases
    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Conv2d(32 + i, 33 + i, 3, padding=1)
                                for i in range(8)]).eval()
    x = torch.randn(1, 32, 4, 4)
    with torch.no_grad():
        expected = net(x)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, resource.RLIM_INFINITY))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad(), capture({str(tmp_path / 'cases')!r}, max_bytes=None) as c:
            out = net(x)
    _, rows = read_cases(c.path)
    print(json.dumps({{"same": torch.equal(out, expected),
                      "warnings": [str(w.message) for w in caught],
                      "sources": [[t["source"] for t in row["tensors"]] for row in rows]}}))
    """
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(Path(__file__).parents[2])))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["same"]
    assert len(report["warnings"]) == 1 and "could not write input values" in report["warnings"][0]
    sources = report["sources"]
    assert len(sources) == 8 and sources[0] == ["values"] * 3 and sources[-1] == ["recipe"] * 3
