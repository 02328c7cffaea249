"""report.html (and the dump-diff page it links to) in a real browser: headless Chromium driven
by Selenium. Records are built by hand, with every status; every expectation below is derived
from the values written here."""
import io
import math
import os

import numpy as np
import pytest

import browser
from mluverify.core.config import Settings
from mluverify.report import finish_run
from mluverify.report.records import ShardWriter
from mluverify.report.tables import STATUSES

from report_records import make_record, write_run

MISSING = browser.missing()
# CI installs the browser (.ci/run), so there a missing one is a failure, not a skip.
if MISSING and os.environ.get("CI") == "true":
    pytest.fail(f"CI must drive a real browser: {MISSING}", pytrace=False)
pytestmark = [pytest.mark.skipif(bool(MISSING), reason=MISSING), pytest.mark.e2e]  # end to end, seconds a test: make test-e2e

OPS = ("add", "mul", "conv2d", "matmul", "softmax")
# status -> (value as a fraction of the bound, extra record fields)
SPECIAL = {
    "failed": (2.5, {}),
    "errored": (math.nan, {"error": "RuntimeError: kernel exploded", "passed": False}),
    "waived": (1.5, {"waived": True}),
    "not_on_device": (0.2, {"status": "not_on_device", "fallback_ops": "aten::softmax.int", "op_on_cpu": True}),
    "not_fused": (0.3, {"status": "not_fused", "executed_as": "layer-by-layer", "not_fused_reason": "graph break"}),
    "nondeterministic": (0.1, {"status": "nondeterministic"}),
}
DUMPED = "test_ops.py::test_mul[mlu:cnnl-dumped]"


def records(run_dir):
    """60 passing cases (5 ops x 2 targets x 6, seeded lognormal values under the bound), one of
    each other status per target, and a failing mul case dumped into ``dumps/``."""
    rng = np.random.default_rng(7)
    rows = []
    for target, bound in (("mlu:cnnl", 0.003), ("mlu:cnml", 0.02)):
        for op in OPS:
            for i, ratio in enumerate(np.clip(rng.lognormal(-2.0, 1.0, 6), 1e-4, 0.9)):
                rows.append(make_record(f"test_ops.py::test_{op}[{target}-{i}]", float(ratio * bound), op=op,
                                        target=target, bound=bound, dtype=("float32", "float16")[i % 2]))
        for status, (ratio, extra) in SPECIAL.items():
            rows.append(make_record(f"test_ops.py::test_softmax[{target}-{status}]", ratio * bound, op="softmax",
                                    target=target, bound=bound, **extra))
    rows.append(make_record(DUMPED, 0.009, op="mul", reproducer=f"pytest '{DUMPED}'; dump: {run_dir}/dumps/mul_dumped"))
    return rows


def cpu_dump(path):
    """A real use_cpu dump of a few CPU ops (the harness's copies among them): nothing in it
    explains a failure."""
    import torch

    from mluverify.dump import Dumper

    with torch.no_grad(), Dumper(path, level=1, use_cpu=True):
        x = torch.linspace(-1, 1, 8).clone()
        (torch.relu(x) * 1.5).detach()


@pytest.fixture(scope="module")
def run(tmp_path_factory, report_pm_module):
    root = tmp_path_factory.mktemp("browser")
    run_dir = root / "run"
    rows = records(run_dir)
    writer = ShardWriter(run_dir)
    for row in rows:
        writer.write(row)
    writer.close()
    cpu_dump(run_dir / "dumps" / "mul_dumped")
    # the baseline: the same cases, every one passing at half its value
    baseline = write_run(root / "baseline", [dict(r, value=r["value"] / 2 if r["value"] == r["value"] else 0.001,
                                                   passed=True, status="passed", error="", waived=False)
                                              for r in rows])
    status = finish_run(run_dir, pm=report_pm_module, settings=Settings(noise_floor=0.0), baseline=baseline,
                        gate=True, terminal_write=lambda line: None)
    assert status == 1  # the failures fail the gate
    return run_dir, rows


@pytest.fixture(scope="module")
def report_pm_module():
    import pluggy

    from mluverify.core import hookspecs
    from mluverify.plugins import report_writers

    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(report_writers)
    return pm


@pytest.fixture(scope="module")
def driver():
    chromium = browser.start()
    yield chromium
    chromium.quit()


@pytest.fixture
def page(driver, run):
    driver.set_window_size(*browser.WINDOW)
    driver.get((run[0] / "report.html").as_uri())
    return driver


def visible_rows(driver, table):
    from selenium.webdriver.common.by import By

    return [[td.text for td in tr.find_elements(By.TAG_NAME, "td")]
            for tr in driver.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")]


def column(driver, table, name):
    from selenium.webdriver.common.by import By

    headers = [th.text.replace("\n", "") for th in driver.find_elements(By.CSS_SELECTOR, f"#{table} thead th")]
    return headers.index(name)


def as_number(text):
    return math.inf if text == "inf" else float(text)


def test_banner_comes_first_with_the_verdict_and_every_status(page, run):
    from selenium.webdriver.common.by import By

    first = page.find_element(By.CSS_SELECTOR, "main > *")
    assert first.get_attribute("id") == "banner"
    # gate: 2 failed + 2 errored + 2 not_on_device + 2 not_fused + 2 nondeterministic + the
    # dumped failure, each blocking (waived ones are not)
    assert "gate FAILED" in first.text
    counts = {chip.get_attribute("data-value"): int(chip.find_element(By.TAG_NAME, "b").text)
              for chip in first.find_elements(By.CSS_SELECTOR, ".chip")}
    assert counts == {**dict.fromkeys(STATUSES, 2), "passed": 60, "failed": 3}
    assert "since the baseline:" in first.text and "new failure" in first.text


def test_run_metadata_is_listed(page):
    from selenium.webdriver.common.by import By

    facts = page.find_element(By.CSS_SELECTOR, "#s-0 dl").text
    for label in ("targets", "core versions", "duration", "seeds"):
        assert label in facts
    assert "mlu:cnml, mlu:cnnl" in facts


def test_failures_come_first_and_are_highlighted(page):
    from selenium.webdriver.common.by import By

    rows = page.find_elements(By.CSS_SELECTOR, "#cases tbody tr")
    statuses = [r.find_element(By.CSS_SELECTOR, ".badge").text for r in rows]
    assert statuses == sorted(statuses, key=STATUSES.index)
    assert statuses[:2] == ["errored", "errored"]
    red = rows[0].find_element(By.TAG_NAME, "td").value_of_css_property("background-color")
    white = rows[-1].find_element(By.TAG_NAME, "td").value_of_css_property("background-color")
    assert red != white and rows[0].get_attribute("class").split()[0] == "bad"


def test_clicking_a_header_sorts_by_that_column(page):
    from selenium.webdriver.common.by import By

    index = column(page, "cases", "value")
    header = page.find_elements(By.CSS_SELECTOR, "#cases thead th")[index]
    header.click()
    values = [row[index] for row in visible_rows(page, "cases")]
    numbers = [as_number(v) for v in values if v]
    # 60 passing, 5 other valued statuses per target, the dumped case; the 2 errored have no value: last
    assert numbers == sorted(numbers) and len(numbers) == 71 and values[-2:] == ["", ""]
    header.click()
    values = [row[index] for row in visible_rows(page, "cases")]
    assert [as_number(v) for v in values if v] == sorted(numbers, reverse=True) and values[-2:] == ["", ""]


def test_typing_a_filter_shows_the_matching_rows(page, run):
    from selenium.webdriver.common.by import By

    box = page.find_element(By.CSS_SELECTOR, "#cases input[type=search]")
    box.send_keys("test_mul[mlu:cnml")
    rows = visible_rows(page, "cases")
    assert len(rows) == 6 and all("test_mul[mlu:cnml" in " ".join(r) for r in rows)
    assert page.find_element(By.CSS_SELECTOR, "#cases .mv-count").text == f"6 of {len(run[1])} rows"
    # a status chip narrows the same rows further
    box.clear()
    box.send_keys("softmax")
    page.find_element(By.CSS_SELECTOR, '#cases .mv-values .chip[data-value="not_fused"]').click()
    assert {r[1] for r in visible_rows(page, "cases")} == {"test_ops.py::test_softmax[mlu:cnnl-not_fused]",
                                                           "test_ops.py::test_softmax[mlu:cnml-not_fused]"}


def test_a_banner_chip_filters_the_case_list(page):
    from selenium.webdriver.common.by import By

    everything = len(visible_rows(page, "cases"))
    chip = page.find_element(By.CSS_SELECTOR, '#banner .chip[data-value="waived"]')
    chip.click()
    rows = visible_rows(page, "cases")
    assert len(rows) == 2 and {r[0] for r in rows} == {"waived"}
    assert "on" in chip.get_attribute("class").split()
    chip.click()  # a second click toggles it off, like the table's own chips
    assert len(visible_rows(page, "cases")) == everything > 2
    assert "on" not in chip.get_attribute("class").split()


def test_clicking_the_long_case_id_cell_opens_the_detail_view(page):
    from selenium.webdriver.common.by import By

    page.find_element(By.CSS_SELECTOR, "#cases input[type=search]").send_keys("[mlu:cnnl-not_on_device]")
    page.find_element(By.CSS_SELECTOR, "#cases tbody tr td.long .fold").click()
    dialog = page.find_element(By.ID, "mv-detail")
    assert dialog.is_displayed() and "test_ops.py::test_softmax[mlu:cnnl-not_on_device]" in dialog.text


def test_a_case_opens_its_detail_view_with_a_reproducer_to_copy(page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page.find_element(By.CSS_SELECTOR, "#cases input[type=search]").send_keys("[mlu:cnnl-not_on_device]")
    page.find_element(By.CSS_SELECTOR, "#cases tbody tr").click()
    dialog = page.find_element(By.ID, "mv-detail")
    assert dialog.is_displayed()
    text = dialog.text
    for expected in ("not_on_device", "Judgement", "headroom", "Fallback ops (ran on the CPU)", "aten::softmax.int",
                     "Provenance", "Reproducer"):
        assert expected in text, expected
    assert dialog.find_element(By.CSS_SELECTOR, "pre.code").text == "pytest 'test_ops.py::test_softmax[mlu:cnnl-not_on_device]'"
    dialog.find_element(By.CSS_SELECTOR, ".mv-copy").click()
    dialog.find_element(By.CSS_SELECTOR, ".mv-close").click()
    box = page.find_element(By.CSS_SELECTOR, "#summary input[type=search]")
    box.send_keys(Keys.CONTROL, "v")
    assert box.get_attribute("value") == "pytest 'test_ops.py::test_softmax[mlu:cnnl-not_on_device]'"


def test_a_dumped_case_links_to_its_dump_and_its_dump_diff_page(page, run):
    from selenium.webdriver.common.by import By

    page.find_element(By.CSS_SELECTOR, "#cases input[type=search]").send_keys("dumped")
    page.find_element(By.CSS_SELECTOR, "#cases tbody tr").click()
    links = {a.text: a for a in page.find_elements(By.CSS_SELECTOR, "#mv-detail a")}
    assert set(links) == {"dumps/mul_dumped", "dumps/mul_dumped/dump_diff.html"}
    style = page.find_element(By.TAG_NAME, "style").get_attribute("textContent")
    links["dumps/mul_dumped/dump_diff.html"].click()
    assert page.title == "mluverify dump-diff: mul_dumped"
    banner = page.find_element(By.ID, "banner").text
    # the case failed at 3x its bound, yet every dumped op is exact on the CPU
    assert banner.startswith("unexplained: the case failed (rel_mse 9e-3 > bound 3e-3)")
    assert page.find_element(By.TAG_NAME, "style").get_attribute("textContent") == style  # one look
    ops = [r[2] for r in visible_rows(page, "ops")]
    assert ops == ["aten::linspace", "aten::relu", "aten::mul.Tensor"]  # clone and detach are the harness's
    page.find_element(By.CSS_SELECTOR, "#ops input.mv-hide").click()
    assert {"aten::clone", "aten::detach"} <= {r[2] for r in visible_rows(page, "ops")}
    page.get((run[0] / "report.html").as_uri())
    page.find_element(By.CSS_SELECTOR, "#cases input[type=search]").send_keys("dumped")
    page.find_element(By.CSS_SELECTOR, "#cases tbody tr").click()
    page.find_element(By.LINK_TEXT, "dumps/mul_dumped").click()
    assert "index.parquet" in page.find_element(By.TAG_NAME, "body").text  # the dump's own files


def test_every_plot_is_drawn_and_not_blank(page):
    from matplotlib.image import imread
    from selenium.webdriver.common.by import By

    plots = page.find_elements(By.CSS_SELECTOR, "img.plot")
    assert [p.get_attribute("id") for p in plots] == ["error-vs-bound", "pass-heatmap", "change"]
    for plot in plots:
        assert page.execute_script("return arguments[0].complete && arguments[0].naturalWidth", plot) > 300
        page.execute_script("arguments[0].scrollIntoView()", plot)
        pixels = imread(io.BytesIO(plot.screenshot_as_png))[..., :3]
        assert pixels.shape[0] > 150 and pixels.shape[1] > 300, (plot.get_attribute("id"), pixels.shape)
        not_white = (pixels < 0.9).any(axis=-1).mean()
        # axes, labels and data: well above a few stray pixels, well below a filled box
        assert 0.02 < not_white < 0.9, (plot.get_attribute("id"), not_white)
        assert pixels.std() > 0.05


def test_the_case_table_fits_a_1400_pixel_window(page):
    from selenium.webdriver.common.by import By

    scroll = page.find_element(By.CSS_SELECTOR, "#cases .mv-scroll")
    width, visible = page.execute_script("return [arguments[0].scrollWidth, arguments[0].clientWidth]", scroll)
    assert width <= visible
