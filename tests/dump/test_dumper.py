"""The Dumper on the CPU: layout and file format against hand-written expectations.

The small network is conv (ones 2x2 kernel, bias -30) -> + 1.5 -> relu on the 4x4 input
1..16, so every value is derived by hand: a 2x2 window at (r, c) sums to 16r + 4c + 14.
"""
import os

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from mluverify.dump import Dumper, load, load_values
from mluverify.errors import InvalidArgument

X = torch.arange(1.0, 17.0).reshape(1, 1, 4, 4)
W = torch.ones(1, 1, 2, 2)
B = torch.tensor([-30.0])
CONV = [-16, -12, -8, 0, 4, 8, 16, 20, 24]
ADDED = [-14.5, -10.5, -6.5, 1.5, 5.5, 9.5, 17.5, 21.5, 25.5]
RELU = [0, 0, 0, 1.5, 5.5, 9.5, 17.5, 21.5, 25.5]


def small_network(x=X):
    return torch.relu(F.conv2d(x, W, B) + 1.5)


def lines(path):
    with open(path) as file:
        return file.read().splitlines()


def header(shape, stride, dumped, type_name="Float"):
    return (f"Tensor : Type = {type_name} : Shape = {shape} : Stride = {stride} : "
            f"Dumped = {dumped}")


def tree(root):
    return sorted(os.path.relpath(os.path.join(d, f), root)
                  for d, dirs, files in os.walk(root) for f in files)


CONV_ARGS = ["mlu_bias", "mlu_dilation", "mlu_groups", "mlu_input", "mlu_output_padding",
             "mlu_padding", "mlu_stride", "mlu_transposed", "mlu_weight"]


def test_layout_of_the_small_network(tmp_path):
    with Dumper(tmp_path / "dump") as dumper:
        small_network()
    expected = sorted(
        [f"1_conv2d/1_convolution/{name}" for name in CONV_ARGS + ["cnnl_result"]]
        + ["2_add/cnnl_result", "2_add/mlu_alpha", "2_add/mlu_other", "2_add/mlu_self",
           "3_relu/cnnl_result", "3_relu/mlu_self", "dump.json", "index.parquet"])
    assert tree(dumper.path) == expected


def test_level_0_files(tmp_path):
    with Dumper(tmp_path / "dump", level=0) as dumper:
        small_network()
    conv = dumper.path / "1_conv2d/1_convolution"
    assert lines(conv / "mlu_input") == [header([1, 1, 4, 4], [16, 16, 4, 1], 10)] + \
        [str(v) for v in range(1, 11)]
    assert lines(conv / "mlu_bias") == ["Optional : ", header([1], [1], 1), "-30"]
    assert lines(conv / "mlu_stride") == ["List : Size = 2", "1", "1"]
    assert lines(conv / "mlu_transposed") == ["Scalar : Type = Bool", "0"]
    assert lines(conv / "mlu_groups") == ["Scalar : Type = Long", "1"]
    assert lines(conv / "cnnl_result") == [header([1, 1, 3, 3], [9, 9, 3, 1], 9)] + \
        [str(v) for v in CONV]
    assert lines(dumper.path / "2_add/mlu_other") == ["Scalar : Type = Double", "1.5"]
    assert lines(dumper.path / "2_add/mlu_alpha") == ["Scalar : Type = Long", "1"]
    assert lines(dumper.path / "2_add/cnnl_result")[1:] == [f"{v:g}" for v in ADDED]
    assert lines(dumper.path / "3_relu/cnnl_result")[1:] == [f"{v:g}" for v in RELU]


def test_level_1_writes_the_sum_of_absolute_values(tmp_path):
    with Dumper(tmp_path / "dump", level=1) as dumper:
        small_network()
    conv = dumper.path / "1_conv2d/1_convolution"
    assert lines(conv / "mlu_input") == [header([1, 1, 4, 4], [16, 16, 4, 1], 1), "136"]
    assert lines(conv / "cnnl_result")[1:] == ["108"]
    assert lines(dumper.path / "2_add/cnnl_result")[1:] == ["112.5"]
    assert lines(dumper.path / "3_relu/cnnl_result") == \
        [header([1, 1, 3, 3], [9, 9, 3, 1], 1), "81"]


def test_level_2_writes_every_value_and_exact_values_to_the_sidecar(tmp_path):
    with Dumper(tmp_path / "dump", level=2) as dumper:
        out = small_network()
    conv = dumper.path / "1_conv2d/1_convolution"
    assert lines(conv / "mlu_input")[1:] == [str(v) for v in range(1, 17)]
    index = load(dumper.path)
    relu = index[(index["path"] == "3_relu") & (index["arg"] == "cnnl_result")].iloc[0]
    assert load_values(dumper.path, relu).tolist() == out.tolist()
    assert relu["abs_sum"] == 81 and relu["min"] == 0 and relu["max"] == 25.5


def test_an_output_reused_as_input_is_hard_linked_at_level_2(tmp_path):
    with Dumper(tmp_path / "dump", level=2) as dumper:
        small_network()
    produced = dumper.path / "1_conv2d/1_convolution/cnnl_result"
    consumed = dumper.path / "2_add/mlu_self"
    assert os.path.samefile(produced, consumed)


def test_views_and_dtypes_print_their_strides_and_values(tmp_path):
    # After Cambricon's own dumptool test: a strided int view and a bool result.
    ints = torch.tensor([[-1, 2, 3], [2, 3, 4], [-3, 0, 0]], dtype=torch.int32)
    with Dumper(tmp_path / "dump", level=1) as dumper:
        column = ints[:, 0]
        positive = column > 0
    assert [p.name for p in sorted(dumper.path.iterdir()) if p.is_dir()] == \
        ["1_getitem", "2_gt"]
    assert lines(dumper.path / "2_gt/mlu_self") == [header([3], [3], 1, "Int"), "6"]
    assert lines(dumper.path / "2_gt/cnnl_result") == [header([3], [1], 1, "Bool"), "1"]
    assert positive.tolist() == [False, True, False]


def test_nesting_of_a_torch_call_running_several_aten_ops(tmp_path):
    linear, x = torch.nn.Linear(3, 2), torch.ones(1, 3)
    with torch.no_grad(), Dumper(tmp_path / "dump") as dumper:
        linear(x)
    assert sorted(p.relative_to(dumper.path).as_posix() for p in dumper.path.glob("*/*")
                  if p.is_dir()) == ["1_linear/1_t", "1_linear/2_addmm"]


def test_tuple_result(tmp_path):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    with Dumper(tmp_path / "dump") as dumper:
        torch.max(x, dim=0, keepdim=True)
    assert lines(dumper.path / "1_max/cnnl_result") == [
        "Tuple : Size = 2", header([1], [1], 1), "4", header([1], [1], 1, "Long"), "3"]


def test_in_place_op_dumps_its_input_before_it_runs_and_is_not_rerun(tmp_path):
    x = torch.tensor([1.0, 2.0, 3.0])
    with Dumper(tmp_path / "dump", level=2, use_cpu=True) as dumper:
        x.add_(1)
    assert x.tolist() == [2.0, 3.0, 4.0]  # ran exactly once, CPU comparison included
    assert lines(dumper.path / "1_add_/mlu_self")[1:] == ["1", "2", "3"]
    assert lines(dumper.path / "1_add_/cnnl_result")[1:] == ["2", "3", "4"]
    assert not (dumper.path / "1_add_/cpu_result").exists()


def test_copy_is_not_dumped(tmp_path):
    y, ones = torch.zeros(3), torch.ones(3)
    with Dumper(tmp_path / "dump") as dumper:
        y.copy_(ones)
        torch.relu(y)
    assert [p.name for p in dumper.path.iterdir() if p.is_dir()] == ["1_relu"]
    assert lines(dumper.path / "1_relu/mlu_self")[1:] == ["1", "1", "1"]


def test_use_cpu_writes_cpu_result_and_zero_own_error_on_the_cpu(tmp_path):
    with Dumper(tmp_path / "dump", use_cpu=True) as dumper:
        small_network()
    assert lines(dumper.path / "3_relu/cpu_result")[1:] == [f"{v:g}" for v in RELU]
    results = load(dumper.path).query("role == 'result'")
    assert results["rel_mse"].tolist() == [0.0, 0.0, 0.0]


def test_existing_dump_dir_is_never_overwritten(tmp_path):
    paths = []
    for _ in range(3):
        with Dumper(tmp_path / "dump") as dumper:
            torch.relu(X)
        paths.append(dumper.path.name)
    assert paths == ["dump", "dump_1", "dump_2"]


def test_enable_false_writes_nothing(tmp_path):
    with Dumper(tmp_path / "dump", enable=False) as dumper:
        out = small_network()
    assert out.flatten().tolist() == RELU
    assert dumper.path is None and list(tmp_path.iterdir()) == []


def test_index_layout_writes_no_per_op_files(tmp_path):
    with Dumper(tmp_path / "dump", level=2, layout="index") as dumper:
        small_network()
    assert tree(dumper.path) == ["dump.json", "index.parquet", "values.bin"]
    index = load(dumper.path)
    assert index["file"].isna().all()
    assert index.query("path == '2_add' and arg == 'cnnl_result'")["head"].iloc[0].tolist() == ADDED


def test_index_rows_name_ops_arguments_and_parents(tmp_path):
    with Dumper(tmp_path / "dump", level=1) as dumper:
        small_network()
    index = load(dumper.path)
    conv = index[index["seq"] == 1]
    assert set(conv["op"]) == {"aten::convolution"} and set(conv["parent"]) == {"conv2d"}
    tensors = conv.set_index("arg")
    assert tensors.loc["mlu_weight", "shape"].tolist() == [1, 1, 2, 2]
    assert tensors.loc["cnnl_result", "abs_sum"] == 108
    assert tensors.loc["cnnl_result", "mean"] == pytest.approx(sum(CONV) / 9)
    assert index[index["seq"] == 2]["op"].iloc[0] == "aten::add.Tensor"
    # One row per tensor; the other arguments are the op's text, in schema order.
    assert list(conv["arg"]) == ["mlu_input", "mlu_weight", "mlu_bias", "cnnl_result"]
    assert set(conv["non_tensors"]) == {
        "mlu_stride=[1, 1], mlu_padding=[0, 0], mlu_dilation=[1, 1], mlu_transposed=False, "
        "mlu_output_padding=[0, 0], mlu_groups=1"}
    assert set(index[index["seq"] == 2]["non_tensors"]) == {"mlu_other=1.5, mlu_alpha=1"}


def test_empty_tensors_are_dumped_at_the_level_asked(tmp_path):
    x = torch.ones(0, 3)
    for level in (0, 1):
        with Dumper(tmp_path / "dump", level=level) as dumper:
            torch.relu(x)
        result = load(dumper.path).query("role == 'result'").iloc[0]
        assert (result["numel"], result["level"], result["shape"].tolist()) == (0, level, [0, 3])
        assert result["head"] is None and pd.isna(result["abs_sum"])
        assert lines(dumper.path / "1_relu/cnnl_result") == ["Tensor : Type = Empty"]


def test_nan_and_inf_are_counted(tmp_path):
    x = torch.tensor([1.0, float("nan"), float("inf"), float("-inf")])
    with Dumper(tmp_path / "dump", level=1) as dumper:
        x * 2
    result = load(dumper.path).query("role == 'result'").iloc[0]
    assert (result["nan"], result["inf"]) == (1, 2)


def test_max_bytes_degrades_level_2_to_level_1(tmp_path):
    small, big = torch.ones(4), torch.ones(1000)
    with Dumper(tmp_path / "dump", level=2, max_bytes=5000) as dumper:
        torch.relu(small)
        torch.relu(big)
    index = load(dumper.path)
    assert index["level"].tolist() == [2, 2, 1, 1]
    assert index["degraded"].tolist() == [False, False, True, True]
    assert lines(dumper.path / "2_relu/cnnl_result") == [header([1000], [1], 1), "1000"]


def test_unwritable_dump_dir_fails_before_the_block_runs(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    ran = False
    with pytest.raises(InvalidArgument, match="not writable"):
        with Dumper(blocker / "dump"):
            ran = True
    assert not ran


def test_invalid_arguments_are_named():
    with pytest.raises(InvalidArgument, match="level"):
        Dumper(level=3)
    with pytest.raises(InvalidArgument, match="layout"):
        Dumper(layout="json")


def test_repr_reproduces_construction():
    assert repr(Dumper("d", level=2)) == ("Dumper(dump_dir='d', enable=True, use_cpu=False, "
                                          "level=2, layout='cambricon', max_bytes=None)")


def test_half_statistics_do_not_overflow(tmp_path):
    x = torch.full((10000,), 100.0, dtype=torch.float16)  # sum 1e6, past float16's 65504
    with Dumper(tmp_path / "dump", level=1) as dumper:
        torch.neg(x)
    result = load(dumper.path).query("role == 'result'").iloc[0]
    assert (result["abs_sum"], result["mean"]) == (1e6, -100.0)
    assert lines(dumper.path / "1_neg/cnnl_result")[1:] == ["1e+06"]


def test_index_holds_tensors_of_every_dtype_together(tmp_path):
    ints, flags = torch.tensor([3, -4], dtype=torch.int64), torch.tensor([True, False])
    with Dumper(tmp_path / "dump") as dumper:
        torch.neg(ints)
        torch.logical_not(flags)
    results = load(dumper.path).query("role == 'result'").set_index("name")
    assert results.loc["neg", "head"].tolist() == [-3.0, 4.0]
    assert results.loc["logical_not", "head"].tolist() == [0.0, 1.0]
    assert list(results["dtype"]) == ["int64", "bool"]


def test_dtype_arguments_print_their_scalar_type(tmp_path):
    x = torch.tensor([1.5, -2.5])
    with Dumper(tmp_path / "dump") as dumper:
        x.to(torch.float64)
    assert lines(dumper.path / "1_to/1__to_copy/mlu_dtype") == ["Optional : ", "ScalarType : ",
                                                                "Double"]
    assert lines(dumper.path / "1_to/1__to_copy/cnnl_result") == [
        header([2], [1], 2, "Double"), "1.5", "-2.5"]


def test_level_0_head_is_the_first_values_in_logical_order_whatever_the_layout(tmp_path):
    grid = torch.arange(24.0).reshape(4, 6)
    with Dumper(tmp_path / "dump", layout="index") as dumper:
        torch.abs(grid[1:])                            # contiguous, from storage offset 6
        torch.abs(grid.t())                            # transposed: strided reads
        torch.abs(grid.to(torch.bfloat16))             # a dtype numpy lacks
        torch.abs(torch._neg_view(grid[2]))            # a negative-bit view: memory holds +x
    heads = load(dumper.path).query("name == 'abs' and arg == 'mlu_self'")["head"].map(list).tolist()
    assert heads == [
        [6.0, 7, 8, 9, 10, 11, 12, 13, 14, 15],
        [0.0, 6, 12, 18, 1, 7, 13, 19, 2, 8],
        [float(v) for v in range(10)],
        [-12.0, -13, -14, -15, -16, -17],
    ]


def test_the_index_has_the_same_column_types_at_every_level(tmp_path):
    import pyarrow.parquet as pq

    schemas = []
    for level in (0, 1, 2):
        with Dumper(tmp_path / f"dump{level}", level=level, layout="index") as dumper:
            small_network()
        schemas.append(pq.read_schema(dumper.path / "index.parquet"))
    assert schemas[0] == schemas[1] == schemas[2]
    assert str(schemas[0].field("min").type) == "double"
    assert str(schemas[0].field("head").type) == "list<element: double>"
