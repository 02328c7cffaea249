"""Render report.html in headless Chromium and check the plots are there and not blank."""
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from mluverify.plugins.report_writers import mluverify_report

from report_records import as_frame, make_record

CHROMIUM = shutil.which("chromium")
# CI installs chromium (.ci/run), so there a missing browser is a failure, not a skip.
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and os.environ.get("CI") != "true",
    reason="chromium is not installed (Debian package `chromium`; .ci/run installs it)")

# Appended to a copy of the page only: the report itself has no scripts. Once the page has
# loaded, it writes every image's decoded size and position into the DOM that --dump-dom prints.
PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images].map(i => ({id: i.id, complete: i.complete,
    width: i.naturalWidth, height: i.naturalHeight, rect: i.getBoundingClientRect().toJSON()}));
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(images);
  document.body.appendChild(out);
});
</script>"""


def chromium(tmp_path, *args):
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--hide-scrollbars", "--force-device-scale-factor=1", f"--user-data-dir={tmp_path / 'profile'}",
               *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


@pytest.fixture
def report(tmp_path):
    rng = np.random.default_rng(7)
    rows = []
    for op in ("add", "mul", "conv2d", "matmul", "softmax"):
        for target, bound in (("mlu:cnnl", 0.003), ("mlu:cnml", 0.02)):
            for i, value in enumerate(bound * rng.lognormal(-2.0, 1.0, 20)):
                rows.append(make_record(f"test_{op}[{target}-{i}]", float(value), op=op, target=target, bound=bound))
    mluverify_report(as_frame(rows), tmp_path)
    return tmp_path / "report.html"


def test_plots_render_and_are_not_blank(report, tmp_path):
    probe_page = tmp_path / "probe.html"
    probe_page.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium(tmp_path, "--window-size=1400,1000", "--dump-dom", probe_page.as_uri()).stdout
    images = json.loads(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"'))

    assert [i["id"] for i in images] == ["error-distribution", "pass-heatmap"]
    for image in images:
        assert image["complete"] and image["width"] > 100 and image["height"] > 100, image

    bottom = int(max(i["rect"]["bottom"] for i in images)) + 50
    screenshot = tmp_path / "report.png"
    chromium(tmp_path, f"--window-size=1400,{bottom}", f"--screenshot={screenshot}", report.as_uri())
    import matplotlib.image

    pixels = matplotlib.image.imread(screenshot)[..., :3]
    for image in images:
        r = image["rect"]
        region = pixels[int(r["top"]):int(r["bottom"]), int(r["left"]):int(r["right"])]
        assert region.shape[0] > 100 and region.shape[1] > 100, (image["id"], region.shape)
        not_white = (region < 0.9).any(axis=-1).mean()
        # plots have axes, labels and data: well above a few stray pixels, well below a filled box
        assert 0.02 < not_white < 0.9, (image["id"], not_white)
        assert region.std() > 0.05, (image["id"], region.std())
