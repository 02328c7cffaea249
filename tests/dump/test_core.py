"""The C++ index core (_core.cpp) writes the index the Python dumper writes, row for row.

Index-layout dumps at levels 0 and 1 run each op's dumping in C++; everything else, and any
op that runs while another mode is on, stays in Python. Each case runs the same program under
both and compares every column of the two indexes."""
import pytest
import torch
import torch.nn.functional as F

from mluverify.dump import Dumper, load
from mluverify.dump import _dumper, _summary

md = pytest.importorskip("mluverify.device")


def program(x, conv, norm):
    """Ops of every kind the index holds: tensor lists, tuple and integer results, empty
    tensors, in-place and strided views, bool / bfloat16 / complex values, a negative view, a
    number result, and an op that raises."""
    y = torch.relu_(norm(conv(x)))                       # tuple result with empty tensors
    pooled, indices = F.max_pool2d(y, 2, return_indices=True)
    joined = torch.cat([pooled, pooled * 2], 1)          # a tensor list
    moved = joined.permute(0, 2, 3, 1).add(1.5, alpha=2)  # dense, not contiguous
    wide = joined[:, :1].expand(1, 4, 5, 5).sum()        # overlapping memory
    (moved > 0).float().sum()
    moved.to(torch.bfloat16).neg()
    torch.view_as_complex(moved[..., :2].contiguous()).abs()
    torch.abs(torch._neg_view(joined[0, 0]))
    moved.sum().item()                                   # a number result
    with pytest.raises(RuntimeError):
        torch.mm(moved.reshape(-1, 8), moved.reshape(8, -1)[:3])
    return wide


def dump(path, x, conv, norm, level, core):
    if core:
        with torch.no_grad(), Dumper(path, level=level, layout="index") as dumper:
            assert dumper._session._core is not None
            program(x, conv, norm)
        return load(dumper.path)
    original = _dumper._index_core
    _dumper._index_core = lambda settings: None
    try:
        with torch.no_grad(), Dumper(path, level=level, layout="index") as dumper:
            program(x, conv, norm)
    finally:
        _dumper._index_core = original
    return load(dumper.path)


@pytest.mark.parametrize("device", ["cpu", "mlu"])
@pytest.mark.parametrize("level", [0, 1])
def test_the_core_writes_the_python_dumper_s_index(tmp_path, device, level):
    torch.manual_seed(0)
    conv, norm = torch.nn.Conv2d(3, 4, 3).to(device), torch.nn.BatchNorm2d(4).eval().to(device)
    x = torch.randn(1, 3, 12, 12).to(device)
    _summary.forget_shared_summaries()
    in_core = dump(tmp_path / "core", x, conv, norm, level, core=True)
    _summary.forget_shared_summaries()
    in_python = dump(tmp_path / "python", x, conv, norm, level, core=False)
    assert len(in_core) == len(in_python) > 60
    for column in in_python.columns:
        assert in_core[column].equals(in_python[column]), column
    mm = in_core[in_core["name"] == "mm"]
    assert list(mm["role"]) == ["input", "input"], "the op that raised keeps its inputs"
    item = in_core.query("name == '_local_scalar_dense'")["non_tensors"]
    assert len(item) == 1 and item.iloc[0].startswith("cnnl_result=")


def test_the_core_runs_index_dumps_at_levels_0_and_1_only(tmp_path):
    cases = {(0, "index", False): True, (1, "index", False): True, (2, "index", False): False,
             (0, "cambricon", False): False, (1, "index", True): False}
    for (level, layout, use_cpu), in_core in cases.items():
        with Dumper(tmp_path / f"{level}{layout}{use_cpu}", level=level, layout=layout,
                    use_cpu=use_cpu) as dumper:
            assert (dumper._session._core is not None) is in_core, (level, layout, use_cpu)


def test_an_unchanged_tensor_keeps_its_summary_and_a_written_one_is_summarized_again(tmp_path):
    x = torch.ones(4)
    with Dumper(tmp_path / "first", level=1, layout="index"):
        x.neg()
    x.numpy()[:] = 5  # no version bump: the documented blind spot, as in Python
    with Dumper(tmp_path / "second", level=1, layout="index"):
        x.neg()
        x.add_(1)     # in place: the result is summarized afresh
        x.neg()
    second = load(tmp_path / "second").query("arg == 'mlu_self'")
    assert list(second["abs_sum"]) == [4.0, 4.0, 24.0]


def test_inference_tensors_have_no_version_and_are_summarized_each_time(tmp_path):
    with torch.inference_mode():
        x = torch.ones(3)
        with Dumper(tmp_path / "dump", level=1, layout="index") as dumper:
            x.neg()
            x.add_(1)
            x.neg()
    inputs = load(dumper.path).query("arg == 'mlu_self'")
    assert list(inputs["abs_sum"]) == [3.0, 3.0, 6.0]
