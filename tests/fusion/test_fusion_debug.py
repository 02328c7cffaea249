"""``FUSED_KERNEL_DEBUG``: per-group output files, their reference run and the index."""
from __future__ import annotations

import pandas as pd
import pytest
import torch

from fusion_models import make_test_model
from mluverify.judge import metrics
from mluverify.device.fusion import DebugDirError, fuse
from mluverify.device.fusion.debug import INDEX_NAME

H, W = 30, 34


@pytest.fixture
def x():
    return torch.rand(1, 3, H, W, generator=torch.Generator().manual_seed(11))


@pytest.fixture
def debug_env(monkeypatch, tmp_path):
    """Two groups (the add falls back between them) writing debug files into tmp_path."""
    monkeypatch.setenv("DEBUG_FORCED_FALLBACK_OPS", "aten::add.Tensor")
    monkeypatch.setenv("FUSED_KERNEL_DEBUG_DIR", str(tmp_path))
    return monkeypatch


# Shapes from the model's definition: conv 3x3 without padding -> (1, 16, H-2, W-2); the
# second group pools 2x2 and swaps dims 0 and 3.
GROUP_SHAPES = {
    "MLUFusionGroup0": (1, 16, H - 2, W - 2),
    "MLUFusionGroup1": ((W - 2) // 2, 16, (H - 2) // 2, 1),
}


@pytest.mark.parametrize("mode, prefix", [("cpu", "cpu_jitouttensor"), ("cnnl", "catch_cnnl_jitouttensor")])
def test_debug_files_exist_with_the_group_output_shapes(debug_env, tmp_path, x, mode, prefix):
    debug_env.setenv("FUSED_KERNEL_DEBUG", mode)
    fuse(make_test_model().to("mlu"), (x.to("mlu"),))(x.to("mlu"))
    for group, shape in GROUP_SHAPES.items():
        fused = torch.load(tmp_path / f"mmouttensor_{group}_0")
        reference = torch.load(tmp_path / f"{prefix}_{group}_0")
        assert fused.shape == reference.shape == shape
        assert fused.device.type == reference.device.type == "cpu"
    assert not list(tmp_path.glob("*_MLUFusionGroup2_*"))


def test_index_holds_each_outputs_rel_mse(debug_env, tmp_path, x):
    debug_env.setenv("FUSED_KERNEL_DEBUG", "cpu")
    fuse(make_test_model().to("mlu"), (x.to("mlu"),))(x.to("mlu"))
    index = pd.read_csv(tmp_path / INDEX_NAME)
    assert list(index["group"]) == list(GROUP_SHAPES)
    for row in index.itertuples():
        fused = torch.load(tmp_path / row.fused_file)
        reference = torch.load(tmp_path / row.reference_file)
        assert row.rel_mse == pytest.approx(metrics(fused, reference)["rel_mse"])
        assert row.rel_mse < 0.003  # a float32 group's fused result is close to its unfused one


def test_fused_output_differs_from_its_cpu_reference(debug_env, tmp_path, x):
    debug_env.setenv("FUSED_KERNEL_DEBUG", "cpu")
    fuse(make_test_model().to("mlu"), (x.to("mlu"),))(x.to("mlu"))
    fused = torch.load(tmp_path / "mmouttensor_MLUFusionGroup0_0")
    reference = torch.load(tmp_path / "cpu_jitouttensor_MLUFusionGroup0_0")
    assert not torch.equal(fused, reference)  # conv + batch-norm folded


def test_unwritable_debug_dir_is_a_clear_error(monkeypatch, tmp_path, x):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("FUSED_KERNEL_DEBUG", "cpu")
    monkeypatch.setenv("FUSED_KERNEL_DEBUG_DIR", str(blocker / "debug"))
    with pytest.raises(DebugDirError, match="FUSED_KERNEL_DEBUG_DIR") as error:
        fuse(make_test_model().to("mlu"), (x.to("mlu"),))
    assert str(blocker / "debug") in str(error.value)


def test_unknown_debug_mode_is_rejected(monkeypatch, x):
    monkeypatch.setenv("FUSED_KERNEL_DEBUG", "gpu")
    with pytest.raises(ValueError, match="FUSED_KERNEL_DEBUG.*'gpu'.*'cnnl'"):
        fuse(make_test_model().to("mlu"), (x.to("mlu"),))
