"""The Dumper on the emulated MLU: same layout as on the CPU, and a planted wrong kernel
(overridden through ``mluverify_device_kernels``) named as the first offender."""
import pytest
import torch
import torch.nn.functional as F

from mluverify import hookimpl
from mluverify.dump import Dumper, dump_diff, load

md = pytest.importorskip("mluverify.device")

# conv (ones 2x2 kernel, bias -30) -> + 1.5 -> relu on 1..16, on the CPU (the device's
# convolution may round its inputs, see docs/device.md: the dump shows what it computed).
RELU = [0, 0, 0, 1.5, 5.5, 9.5, 17.5, 21.5, 25.5]


def test_small_network_on_mlu_has_the_cpu_layout_and_values(tmp_path):
    x = torch.arange(1.0, 17.0).reshape(1, 1, 4, 4).to("mlu")
    w, b = torch.ones(1, 1, 2, 2).to("mlu"), torch.tensor([-30.0]).to("mlu")
    undumped = torch.relu(F.conv2d(x, w, b) + 1.5).cpu().reshape(-1)
    with Dumper(tmp_path / "dump", use_cpu=True) as dumper:
        torch.relu(F.conv2d(x, w, b) + 1.5)
    dirs = sorted(p.relative_to(dumper.path).as_posix() for p in dumper.path.rglob("*")
                  if p.is_dir())
    assert dirs == ["1_conv2d", "1_conv2d/1_convolution", "2_add", "3_relu"]
    relu = (dumper.path / "3_relu" / "cnnl_result").read_text().splitlines()
    assert relu[0] == ("Tensor : Type = Float : Shape = [1, 1, 3, 3] : Stride = [9, 9, 3, 1] : "
                       "Dumped = 9")
    assert relu[1:] == [f"{v:g}" for v in undumped.tolist()]  # dumping changes no value
    assert undumped.tolist() == pytest.approx(RELU, abs=1e-3)
    assert (dumper.path / "3_relu" / "cpu_result").read_text().splitlines()[1:] == relu[1:]


class WrongAddKernel:
    """A device kernel for aten::add.Tensor that is 5 % off."""

    @hookimpl
    def mluverify_device_kernels(self, registry):
        registry.register("aten::add.Tensor",
                          lambda self, other, alpha=1: torch.add(self, other, alpha=alpha) * 1.05,
                          mode="cnnl")


@pytest.fixture
def wrong_add():
    from mluverify.core.plugin_manager import configured_plugin_manager

    with configured_plugin_manager([WrongAddKernel()], entry_points=False):
        yield


def test_planted_wrong_kernel_is_the_first_offender(tmp_path, wrong_add):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 3), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(64, 10)).eval().to("mlu")
    x = torch.randn(1, 3, 8, 8).to("mlu")
    with torch.no_grad(), Dumper(tmp_path / "dump", use_cpu=True) as dumper:
        h = net[1](net[0](x)) + 0.5
        net[5](net[4](net[3](net[2](h))))
    diff = dump_diff(dumper.path)
    by_path = diff.table.set_index("path")
    assert by_path.loc["3_add", "seq"] == diff.first_offender
    assert by_path.loc["3_add", "own_rel_mse"] == pytest.approx(0.05, rel=0.02)
    assert by_path.loc["4_conv2d/1_convolution", "inherited_rel_mse"] > diff.bound
    after = diff.table[diff.table["seq"] > diff.first_offender]
    assert after["own_passed"].dropna().all()


def test_views_of_device_memory_dump_their_own_values(tmp_path):
    grid = torch.arange(24.0).reshape(4, 6).to("mlu")
    with Dumper(tmp_path / "dump", level=1, layout="index") as level_1:
        torch.abs(grid[1:])                      # contiguous, from storage offset 6
        torch.abs(torch._neg_view(grid[2]))      # memory holds 12..17, the view -12..-17
    with Dumper(tmp_path / "dump0", layout="index") as level_0:
        torch.abs(grid[1:])
        torch.abs(torch._neg_view(grid[2]))
    inputs_1 = load(level_1.path).query("name == 'abs' and arg == 'mlu_self'")
    assert inputs_1["min"].tolist() == [6.0, -17.0] and inputs_1["max"].tolist() == [23.0, -12.0]
    assert inputs_1["abs_sum"].tolist() == [sum(range(6, 24)), sum(range(12, 18))]
    heads = load(level_0.path).query("name == 'abs' and arg == 'mlu_self'")["head"].map(list).tolist()
    assert heads == [[6.0, 7, 8, 9, 10, 11, 12, 13, 14, 15], [-12.0, -13, -14, -15, -16, -17]]
