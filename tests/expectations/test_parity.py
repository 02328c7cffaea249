"""The parity matrix: cases x targets, gaps where the reference passes and another does not;
runs of several machines lined up by the case without its target and core version."""
import pandas as pd
import pandas.core.arrays.arrow.extension_types  # noqa: F401  loaded before pytester snapshots sys.modules
import pytest

from mluverify.cli import main

from mluverify.errors import InvalidArgument
from mluverify.report.parity import family_parity, filtered, gap_line, parity, parity_html
from tests.fuzz.test_fuzz_ort import ort_available  # noqa: F401  (a fixture: skips, or fails in CI, without onnxruntime)

# case -> (mlu:cnnl, mlu:cnml, cpu:inductor); None: that target did not run the case
STATUSES = {
    "a": ("passed", "passed", "passed"),
    "b": ("passed", "failed", "passed"),            # gap on cnml
    "c": ("passed", "errored", "not_on_device"),   # gaps on cnml and inductor
    "d": ("failed", "failed", "passed"),           # reference fails: no gap
    "e": ("passed", None, "waived"),               # cnml did not run it: no gap; inductor waived: gap
    "f": ("passed", "passed", "failed"),           # gap on inductor
}
TARGETS = ("mlu:cnnl", "mlu:cnml", "cpu:inductor")
# Hand count: cnml gaps b, c = 2; inductor gaps c, e, f = 3.


def records(statuses=STATUSES, version="MLU270"):
    """As the records say it: the MLU's case ids and ``core_version`` carry the core version,
    ``cpu:inductor``'s carry none."""
    return pd.DataFrame([{"case_id": f"t.py::test_op[{target}{'-' + version if mlu else ''}-{case}]",
                          "target": target, "core_version": version if mlu else None, "status": status}
                         for case, row in statuses.items() for target, status in zip(TARGETS, row) if status
                         for mlu in [target.startswith("mlu:")]])


def test_three_targets_gap_counts_are_the_hand_counted_ones():
    result = parity(records(), "mlu:cnnl")
    assert result.gaps.to_dict() == {"cpu:inductor": 3, "mlu:cnml": 2}
    rows = result.matrix.set_index("case")
    assert list(rows.index) == [f"t.py::test_op[{{target}}-{case}]" for case in "abcdef"]
    assert set(rows["core_version"]) == {"MLU270"}
    assert rows["gap"].tolist() == ["", "mlu:cnml", "cpu:inductor, mlu:cnml", "", "cpu:inductor", "cpu:inductor"]
    assert rows["mlu:cnml"].tolist() == ["passed", "failed", "errored", "failed", "", "passed"]
    assert gap_line(result) == "parity against mlu:cnnl (6 cases): gaps cpu:inductor 3, mlu:cnml 2"


def test_several_records_of_a_case_take_the_most_severe_status_and_runs_merge():
    # the same case from two machines' runs: one example passed, one failed on cnml
    merged = pd.concat([records({"b": ("passed", "passed", None)}), records({"b": ("passed", "failed", None)})])
    assert parity(merged, "mlu:cnnl").gaps.to_dict() == {"mlu:cnml": 1}


def test_filters_and_the_html_table():
    result = parity(records(), "mlu:cnnl")
    assert len(filtered(result, gaps_only=True)) == 4
    assert filtered(result, statuses=["errored"])["case"].str.endswith("-c]").all()
    assert len(filtered(result, contains="-a]")) == 1
    html = parity_html(result)
    assert 'id="parity"' in html and "gaps cpu:inductor 3, mlu:cnml 2" in html


def test_an_unknown_reference_is_an_error_naming_the_targets():
    with pytest.raises(InvalidArgument, match="'cuda:eager' ran no case here; targets: cpu:inductor, mlu:cnml"):
        parity(records(), "cuda:eager")


def test_the_report_section_appears_only_with_two_targets_or_more():
    from mluverify.report.parity import parity_sections

    assert parity_sections(records({"a": ("passed", None, None)})) == []
    (heading, html), = parity_sections(records())
    assert heading == "Parity across targets" and "gaps cpu:inductor 3, mlu:cnml 2" in html


def test_a_target_without_variants_stands_beside_each_core_version():
    # mlu:cnnl passes on MLU270 and fails on MLU370; cpu:inductor (no variant) fails once
    both = pd.concat([records({"g": ("passed", None, "failed")}, "MLU270"),
                      records({"g": ("failed", None, None)}, "MLU370")])
    result = parity(both, "mlu:cnnl")
    rows = result.matrix.set_index("core_version")
    assert list(result.matrix["case"].unique()) == ["t.py::test_op[{target}-g]"]
    assert rows["cpu:inductor"].to_dict() == {"MLU270": "failed", "MLU370": "failed"}
    assert rows["gap"].to_dict() == {"MLU270": "cpu:inductor", "MLU370": ""}  # the reference fails on MLU370
    assert gap_line(result) == "parity against mlu:cnnl (1 cases, 2 with their core versions): gaps cpu:inductor 1"


TWO_MACHINES = """
import torch

def copy_into(x, y):
    return x.clone().copy_(y)

def test_linear(verify):
    torch.manual_seed(0)
    verify(torch.nn.Linear(8, 4), torch.randn(2, 8), op="linear")

def test_copy(verify):  # no ONNX form of aten::copy: errors on ort:cpu
    verify(copy_into, torch.zeros(7), torch.linspace(-3, 3, 7), op="copy_")
"""


def test_the_docs_two_machine_example_lines_up_mlu_and_ort_runs(pytester, capsys, ort_available):
    """One machine runs mlu:cnnl (both core versions), another ort:cpu: ``mluverify parity``
    over both runs lines the cases up and counts the errored one as a gap."""
    pytester.makepyfile(test_two=TWO_MACHINES)
    runs = {"mlu": pytester.path / "mlu", "ort": pytester.path / "ort"}
    pytester.runpytest_subprocess("-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=mlu:cnnl",
                                  "--mlu-core-version=MLU270", "--mlu-core-version=MLU370",
                                  f"--mlu-report={runs['mlu']}").assert_outcomes(passed=4)
    pytester.runpytest_subprocess("-p", "mluverify", "-p", "no:cacheprovider", "--mlu-target=ort:cpu",
                                  f"--mlu-report={runs['ort']}").assert_outcomes(passed=1, failed=1)
    capsys.readouterr()  # the runs' own output
    assert main(["parity", str(runs["mlu"]), str(runs["ort"]), "--reference", "mlu:cnnl", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "parity against mlu:cnnl (2 cases, 4 with their core versions): gaps ort:cpu 2"
    rows = [line.split() for line in lines[2:]]
    assert rows == [["test_two.py::test_copy[{target}]", "MLU270", "passed", "errored", "ort:cpu"],
                    ["test_two.py::test_copy[{target}]", "MLU370", "passed", "errored", "ort:cpu"],
                    ["test_two.py::test_linear[{target}]", "MLU270", "passed", "passed"],
                    ["test_two.py::test_linear[{target}]", "MLU370", "passed", "passed"]]


def family_records():
    """Three targets of three back ends over an op suite case, two OpInfo samples and a network."""
    rows = [  # (case id without target, suite, op, {target: status})
        ("suites/ops/test_conv.py::test_conv[{t}-conv2d]", "ops", "conv2d",
         {"cpu:inductor": "passed", "ort:cpu": "failed", "openvino:cpu": "failed"}),   # shared by ort and openvino
        ("suites/opinfo/test_opinfo.py::test_opinfo_sample[{t}-nn.functional.max_pool2d-0]", "opinfo",
         "nn.functional.max_pool2d", {"cpu:inductor": "passed", "ort:cpu": "passed", "openvino:cpu": "failed"}),
        ("suites/opinfo/test_opinfo.py::test_opinfo_sample[{t}-sigmoid-0]", "opinfo", "sigmoid",
         {"cpu:inductor": "failed", "ort:cpu": "errored", "openvino:cpu": "passed"}),  # an error is no deviation
        ("suites/opinfo/test_opinfo.py::test_opinfo_sample[{t}-linalg.vector_norm-0]", "opinfo", "linalg.vector_norm",
         {"cpu:inductor": "passed", "ort:cpu": "passed"}),                            # openvino did not run it
        ("suites/networks/test_networks.py::test_network[{t}-vgg]", "networks", "vgg",
         {"cpu:inductor": "failed", "ort:cpu": "passed", "openvino:cpu": "failed"}),  # shared by inductor and openvino
    ]
    return pd.DataFrame([{"case_id": case.format(t=target), "suite": suite, "op": op, "target": target,
                          "core_version": None, "status": status}
                         for case, suite, op, statuses in rows for target, status in statuses.items()])


def test_the_family_view_over_three_targets_counts_passes_and_names_shared_deviations():
    families = family_parity(family_records())
    # hand count per family: conv (the op suite's module), pool and pointwise and linalg (by op name), networks
    assert families.table.loc["conv"].to_dict() == {"cpu:inductor": "1/1", "openvino:cpu": "0/1", "ort:cpu": "0/1"}
    assert families.table.loc["pool"].to_dict() == {"cpu:inductor": "1/1", "openvino:cpu": "0/1", "ort:cpu": "1/1"}
    assert families.table.loc["pointwise"].to_dict() == {"cpu:inductor": "0/1", "openvino:cpu": "1/1", "ort:cpu": "0/1"}
    assert families.table.loc["linalg"].to_dict() == {"cpu:inductor": "1/1", "openvino:cpu": "", "ort:cpu": "1/1"}
    assert families.table.loc["networks"].to_dict() == {"cpu:inductor": "0/1", "openvino:cpu": "0/1", "ort:cpu": "1/1"}
    assert families.shared[["family", "targets"]].values.tolist() == [
        ["conv", "openvino:cpu, ort:cpu"], ["networks", "cpu:inductor, openvino:cpu"]]


def test_two_modes_of_one_back_end_failing_together_are_not_a_shared_deviation():
    records = pd.DataFrame([{"case_id": f"suites/ops/test_conv.py::test_conv[{t}-conv2d]", "suite": "ops", "op": "conv2d",
                             "target": t, "core_version": None, "status": "failed"} for t in ("ort:cpu", "ort:dynamo")])
    assert family_parity(records).shared.empty


def test_parity_by_family_on_the_command_line(tmp_path, capsys):
    from mluverify.report.records import SCHEMA_VERSION, to_table, write_records

    run = tmp_path / "run"
    run.mkdir()
    metadata = {"schema_version": SCHEMA_VERSION}
    write_records(run, to_table(family_records().to_dict("records"), metadata), metadata)
    assert main(["parity", str(run), "--by-family"]) == 0
    out = capsys.readouterr().out
    assert "conv" in out and "0/1" in out and "openvino:cpu, ort:cpu" in out
