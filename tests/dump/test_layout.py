"""Pure layout decisions: directory suffixes, op numbering under calls, argument binding."""
import torch

from mluverify.dump._layout import OpTree, bind_arguments, call_name, op_info, resolve_dump_dir


def test_existing_dump_dir_gets_the_next_free_suffix(tmp_path):
    (tmp_path / "dump").mkdir()
    (tmp_path / "dump_1").mkdir()
    assert resolve_dump_dir(tmp_path / "dump") == tmp_path / "dump_2"
    assert resolve_dump_dir(tmp_path / "fresh") == tmp_path / "fresh"


def test_call_is_parent_of_its_aten_ops_and_counters_are_per_parent():
    tree = OpTree()
    tree.enter_call("conv2d")
    assert tree.place_op("convolution") == ("1_conv2d/1_convolution", "conv2d")
    tree.exit_call()
    tree.enter_call("linear")
    assert tree.place_op("t") == ("2_linear/1_t", "linear")
    assert tree.place_op("addmm") == ("2_linear/2_addmm", "linear")
    tree.exit_call()
    assert tree.place_op("relu") == ("3_relu", "")


def test_call_whose_first_op_has_its_name_is_that_op_and_holds_later_ones():
    tree = OpTree()
    tree.enter_call("add")
    assert tree.place_op("add") == ("1_add", "add")
    assert tree.place_op("fill_") == ("1_add/1_fill_", "add")
    tree.exit_call()


def test_call_without_aten_ops_takes_no_number():
    tree = OpTree()
    tree.enter_call("dim")
    tree.exit_call()
    assert tree.place_op("relu") == ("1_relu", "")


def test_call_names():
    assert call_name(torch.conv2d) == "conv2d"
    assert call_name(torch.Tensor.__add__) == "add"
    assert call_name(torch.Tensor.add_) == "add_"


def bound(func, args, kwargs=None):
    return [(parameter.label, value)
            for parameter, value in bind_arguments(op_info(func), args, kwargs or {})]


def test_arguments_named_from_schema_with_defaults_and_without_out():
    x = torch.ones(2)
    assert bound(torch.ops.aten.add.Tensor, (x, 2))[1:] == [("mlu_other", 2), ("mlu_alpha", 1)]
    assert [label for label, _ in bound(torch.ops.aten.add.out, (x, x), {"out": x})] == \
        ["mlu_self", "mlu_other", "mlu_alpha"]
    assert bound(torch.ops.aten.sum.dim_IntList, (x, [0]), {"keepdim": True})[2] == \
        ("mlu_keepdim", True)
    mask = op_info(torch.ops.aten.native_batch_norm_backward.default).parameters[-1]
    assert (mask.label, mask.fixed_size) == ("mlu_output_mask", 3)


def test_op_info_names_and_kinds():
    info = op_info(torch.ops.aten.add_.Tensor)
    assert (info.name, info.qualified, info.writes_inputs) == ("add_", "aten::add_.Tensor", True)
    assert op_info(torch.ops.aten.copy_.default).excluded
    assert op_info(torch.ops.aten.empty.memory_format).uninitialised
