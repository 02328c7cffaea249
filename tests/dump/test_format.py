"""The text format, against what C++ ``std::ostream <<`` prints (6 significant digits)."""
import numpy as np
import pytest

from mluverify.dump._format import (
    NumbersNode, OptionalNode, OtherNode, ScalarNode, SequenceNode, TensorBlock, render,
)


def text(node):
    return b"".join(render(node)).decode("ascii")


@pytest.mark.parametrize("value, printed", [
    (0.1, "0.1"), (-2.1, "-2.1"), (100.0, "100"), (1e-7, "1e-07"), (123456789.0, "1.23457e+08"),
    (0.000123456, "0.000123456"), (1234567.0, "1.23457e+06"), (float("nan"), "nan"),
    (float("-inf"), "-inf"), (-0.0, "-0"), (3.14159265, "3.14159"),
])
def test_floats_print_like_ostream(value, printed):
    block = TensorBlock("Double", (1,), (1,), 1, np.asarray([value]))
    assert text(block).splitlines()[1] == printed


def test_float32_values_print_their_own_six_digits():
    # float32(0.1) is 0.100000001490116...; six significant digits hide the widening.
    block = TensorBlock("Float", (2,), (1,), 2, np.asarray([0.1, 16777217.0], dtype=np.float32))
    assert text(block).splitlines()[1:] == ["0.1", "1.67772e+07"]


def test_tensor_header_and_values():
    block = TensorBlock("Int", (12,), (3,), 12, np.asarray([-1, 2, -3], dtype=np.int32))
    assert text(block) == ("Tensor : Type = Int : Shape = [12] : Stride = [3] : Dumped = 3\n"
                           "-1\n2\n-3\n")


def test_bools_print_as_integers():
    block = TensorBlock("Bool", (3,), (1,), 3, np.asarray([True, False, True]))
    assert text(block).splitlines()[1:] == ["1", "0", "1"]


def test_empty_tensor_header():
    assert text(TensorBlock("Float", (0, 3), (3, 1), 0, np.empty(0))) == "Tensor : Type = Empty\n"


def test_non_tensor_nodes():
    assert text(ScalarNode("Long", 1)) == "Scalar : Type = Long\n1\n"
    assert text(ScalarNode("Double", 1.5)) == "Scalar : Type = Double\n1.5\n"
    assert text(NumbersNode("List", np.asarray([2, 2]))) == "List : Size = 2\n2\n2\n"
    assert text(NumbersNode("Array", np.asarray([False, True, True]))) == \
        "Array : Size = 3\n0\n1\n1\n"
    assert text(OptionalNode(None)) == "Optional : None\n"
    assert text(OptionalNode(ScalarNode("Long", 4))) == "Optional : \nScalar : Type = Long\n4\n"
    assert text(OtherNode("ScalarType", "Float")) == "ScalarType : \nFloat\n"


def test_tuple_holds_blocks_one_after_another():
    values = TensorBlock("Float", (1,), (1,), 1, np.asarray([4.0], dtype=np.float32))
    indices = TensorBlock("Long", (1,), (1,), 1, np.asarray([3]))
    assert text(SequenceNode("Tuple", (values, indices))) == (
        "Tuple : Size = 2\n"
        "Tensor : Type = Float : Shape = [1] : Stride = [1] : Dumped = 1\n4\n"
        "Tensor : Type = Long : Shape = [1] : Stride = [1] : Dumped = 1\n3\n")


def test_large_arrays_are_chunked_without_losing_values():
    values = np.arange(200_000, dtype=np.int64)
    lines = text(TensorBlock("Long", (200_000,), (1,), 200_000, values)).splitlines()
    assert len(lines) == 200_001 and lines[1] == "0" and lines[-1] == "199999"
