"""The parity matrix: cases x targets, gaps where the reference passes and another does not."""
import pandas as pd
import pytest

from mluverify.errors import InvalidArgument
from mluverify.report.parity import filtered, gap_line, parity, parity_html

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


def records(statuses=STATUSES):
    return pd.DataFrame([{"case_id": f"t.py::test_op[{target}-MLU270-{case}]", "target": target, "status": status}
                         for case, row in statuses.items() for target, status in zip(TARGETS, row) if status])


def test_three_targets_gap_counts_are_the_hand_counted_ones():
    result = parity(records(), "mlu:cnnl")
    assert result.gaps.to_dict() == {"cpu:inductor": 3, "mlu:cnml": 2}
    rows = result.matrix.set_index("case")
    assert list(rows.index) == [f"t.py::test_op[{{target}}-MLU270-{case}]" for case in "abcdef"]
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
