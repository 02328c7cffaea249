"""The ``fuzz`` page: a corpus's findings, open and fixed, with their graphs and reproducers."""
import html
import json
import re

from test_fuzz_corpus import _finding

from mluverify.cli import main
from mluverify.cli.fuzz import page_rows
from mluverify.fuzz.corpus import keep, retire
from mluverify.report.fuzz_page import FUZZ_PAGE


def _table(page: str) -> dict:
    """The findings table's data as the page embeds it."""
    payload = re.search(r'id="fuzz-findings"><script type="application/json" class="mv-data">(.*?)</script>',
                        page).group(1)
    return json.loads(payload)


def test_the_page_lists_each_finding_with_its_graph_and_reproducers(tmp_path):
    corpus = tmp_path / "corpus"
    open_one, _ = keep(corpus, _finding(ops=("relu", "softmax")))
    fixed_one, _ = keep(corpus, _finding(target="mlu:cnml", ops=("exp", "softmax")))
    retire(corpus, fixed_one)
    assert main(["fuzz", "--merge", str(corpus), "--out", str(tmp_path / "out")]) == 0
    page = (tmp_path / "out" / FUZZ_PAGE).read_text()
    # The merge keeps only the open finding; the page of the source corpus shows both.
    assert "1 open finding in" in page
    table = _table(_page(corpus, tmp_path))
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    assert [(r["signature"], r["state"], r["target"], r["ops"]) for r in rows] == [
        (open_one.signature, "still failing", "cpu:inductor", "relu -> softmax"),
        (fixed_one.signature, "fixed", "mlu:cnml", "exp -> softmax")]
    assert rows[0]["reproducer"] == f"mluverify fuzz --replay {corpus / open_one.signature}.json"
    assert rows[1]["script"] == f"python {corpus / 'fixed' / fixed_one.signature}.py"
    assert "v0 = torch.relu(x0)\n    v1 = torch.softmax(v0, dim=0)" in rows[0]["graph"]


def _page(corpus, tmp_path) -> str:
    from mluverify.report.fuzz_page import write_fuzz_page

    return write_fuzz_page(page_rows(corpus), str(corpus), tmp_path / "both").read_text()


def test_the_minimal_graphs_are_shown_as_code(tmp_path):
    finding, _ = keep(tmp_path, _finding(ops=("relu", "softmax")))
    page = _page(tmp_path, tmp_path)
    assert f"{finding.signature} (still failing, cpu:inductor, deviation)" in page
    assert html.escape(finding.program.source()) in page
