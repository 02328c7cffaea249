"""Offline models: saved from a fused run, loaded in a fresh process without the fusion
compiler, bit for bit ``mlu:cnml``; broken files and foreign versions refused by name."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from fusion_models import WithCumsum, make_test_model, quantized_on_mlu
from mluverify import __version__
from mluverify.core.case import Case, Target
from mluverify.judge import compare
from mluverify.device import mlu_model, numerics, offline
from mluverify.device.fusion import fuse
from mluverify.plugins.mlu_backend import MluBackend

REPO = Path(__file__).resolve().parents[2]
PRECISIONS = [("float32", ""), ("float16", ""), ("float32", "int8"), ("float16", "int16")]
X = torch.rand(1, 3, 32, 32, generator=torch.Generator().manual_seed(5))


def seeds_test_model(dtype: str, quant: str) -> torch.nn.Module:
    """The seeds' TestModel on mlu in one of its four precisions (weights int8 / int16 through
    the seeds' quantization flow)."""
    model = quantized_on_mlu(make_test_model(), quant, X) if quant else make_test_model().to("mlu")
    return model.half() if dtype == "float16" else model


def on_mlu(dtype: str) -> torch.Tensor:
    return X.to(getattr(torch, dtype)).to("mlu")


@pytest.mark.parametrize("dtype, quant", PRECISIONS)
def test_the_offline_target_is_cnml_bit_for_bit_within_the_cnml_bound(dtype, quant):
    model, backend = make_test_model(), MluBackend()
    results = {
        mode: backend.execute(model, (X.to(getattr(torch, dtype)),), {},
                              case=Case(f"offline::{mode}", "TestModel", Target("mlu", mode), dtype=dtype, quant=quant))
        for mode in ("cnml", "offline")
    }
    assert torch.equal(results["offline"].output, results["cnml"].output)
    assert results["offline"].executed_as == "fused"
    verdict = compare(results["offline"].output.float(), model(X), mode="cnml")
    assert verdict.passed, verdict.reason


LOAD_AND_RUN = """
import sys, torch
from mluverify.device import offline
for name in sys.argv[1:]:
    model = offline.load(name + ".cambricon")
    torch.save(model(torch.load(name + ".input").to("mlu")).cpu(), name + ".offline")
compiler = ("torch.export._trace", "torch._export.converter", "torch.fx.passes.infra.partitioner",
            "mluverify.device.fusion.capture", "mluverify.device.fusion.partition",
            "mluverify.device.fusion.program", "mluverify.device.fusion.runtime")
print("loaded:", sorted(m for m in compiler if m in sys.modules))
"""


def test_offline_models_run_in_a_fresh_process_without_the_compiler_bit_for_bit(tmp_path):
    names = []
    for dtype, quant in PRECISIONS:
        name = str(tmp_path / f"test_model_{dtype}{quant}")
        model, x = seeds_test_model(dtype, quant), on_mlu(dtype)
        offline.save(model, (x,), name + ".cambricon")
        torch.save(x.cpu(), name + ".input")
        torch.save(fuse(model, (x,))(x).cpu(), name + ".cnml")
        names.append(name)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", LOAD_AND_RUN, *names], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "loaded: []"
    for name in names:
        assert torch.equal(torch.load(name + ".offline"), torch.load(name + ".cnml")), name


def test_save_as_cambricon_around_the_seeds_fused_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = make_test_model()
    mlu_model.save_as_cambricon("test_model")  # the seeds' spelling: ct.save_as_cambricon
    try:
        traced = torch.jit.trace(model, X, check_trace=False)
        traced.to(mlu_model.mlu_device())
        online = traced(X.to("mlu")).cpu()
    finally:
        mlu_model.save_as_cambricon("")
    assert offline.saving_as() is None
    loaded = offline.load(tmp_path / "test_model.cambricon")
    assert torch.equal(loaded(X.to("mlu")).cpu(), online)
    assert (loaded.manifest.numerics["core_version"], loaded.manifest.model) == ("MLU270", "TopLevelTracedModule")


@pytest.mark.parametrize("setting", [{"core_version": "MLU370"}, {"matmul_precision": "int8"}, {"core_number": 16}])
def test_the_offline_model_keeps_the_numerics_it_was_saved_under(tmp_path, setting):
    model, x = make_test_model().to("mlu"), on_mlu("float32")
    with numerics.numerics_settings(**setting):
        path = offline.save(model, (x,), tmp_path / "model.cambricon")
        expected = fuse(model, (x,))(x).cpu()
    if "core_number" not in setting:  # TestModel has no reduction the core number splits
        assert not torch.equal(fuse(model, (x,))(x).cpu(), expected)  # the defaults compute otherwise
    before = numerics.active_settings()
    assert torch.equal(offline.load(path)(x).cpu(), expected)
    assert numerics.active_settings() == before


# --- bad input ------------------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path) -> Path:
    return offline.save(make_test_model().to("mlu"), (on_mlu("float32"),), tmp_path / "model.cambricon")


def _rewrite_manifest(path: Path, **changes) -> None:
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    manifest = {**json.loads(members["manifest.json"]), **changes}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in {**members, "manifest.json": json.dumps(manifest)}.items():
            archive.writestr(name, data)


def test_a_model_from_another_version_is_refused_naming_the_file_and_both_versions(saved):
    _rewrite_manifest(saved, mluverify_version="0.0.9")
    with pytest.raises(offline.OfflineModelError) as caught:
        offline.load(saved)
    message = str(caught.value)
    assert str(saved) in message and "saved by mluverify 0.0.9" in message and f"this is mluverify {__version__}" in message


@pytest.mark.parametrize("damage", ["truncated", "not a zip", "program replaced", "ops differ"])
def test_a_corrupted_model_is_refused_naming_the_file(saved, damage):
    data = saved.read_bytes()
    if damage == "truncated":
        saved.write_bytes(data[: len(data) // 2])
    elif damage == "not a zip":
        saved.write_bytes(b"\x00" * 64)
    elif damage == "program replaced":
        with zipfile.ZipFile(saved) as archive:
            manifest = archive.read("manifest.json")
        with zipfile.ZipFile(saved, "w") as archive:
            archive.writestr("manifest.json", manifest)
            archive.writestr("program.pt2", b"not a program")
    else:
        _rewrite_manifest(saved, ops=["aten::relu"])
    with pytest.raises(offline.OfflineModelError, match="is corrupted or not an offline model") as caught:
        offline.load(saved)
    assert str(saved) in str(caught.value) and f"read by mluverify {__version__}" in str(caught.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(offline.OfflineModelError, match="does not exist"):
        offline.load(tmp_path / "nowhere.cambricon")


def test_a_model_that_does_not_fuse_whole_is_not_saved_and_an_existing_file_is_kept(saved):
    before = saved.read_bytes()
    with pytest.raises(offline.OfflineModelError, match=r"aten::cumsum \(not in the fusible set"):
        offline.save(WithCumsum().eval().to("mlu"), (X.to("mlu"),), saved)
    assert saved.read_bytes() == before
    assert [p.name for p in saved.parent.iterdir()] == [saved.name]  # no partial file left


def test_inputs_the_model_was_not_built_for_are_refused_naming_shapes(saved):
    with pytest.raises(offline.OfflineModelError, match=r"built for inputs \['float32\[1, 3, 32, 32\]'\], "
                                                        r"got \['float32\[2, 3, 32, 32\]'\]"):
        offline.load(saved)(torch.rand(2, 3, 32, 32).to("mlu"))


def test_an_uncapturable_model_is_not_saved(tmp_path):
    from fusion_models import DataDependent

    with pytest.raises(offline.OfflineModelError, match="cannot capture DataDependent"):
        offline.save(copy.deepcopy(DataDependent()).to("mlu"), (X.to("mlu"),), tmp_path / "m.cambricon")
