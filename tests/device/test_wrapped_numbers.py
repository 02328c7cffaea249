"""Python numbers as operands: promoted as torch promotes a number, not as a 0-dim float64 tensor."""
from __future__ import annotations

import operator

import pytest
import torch
from hypothesis import given, strategies as st

NUMBERS = st.one_of(st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, 1.0, 1.5, 2.5, -0.25]),
                    st.just(1 + 2j))


def test_the_reported_cases_keep_float32():
    # torch's rule (hand-derived): a Python float is a "wrapped number" of the float category;
    # a float32 tensor, even 0-dim, already has that category, so the result stays float32.
    x = torch.tensor(0.3).to("mlu")
    for result in (x * 1.0, x + 1.5, x * 2.5, 1.0 * x, 1.5 - x):
        assert result.dtype == torch.float32
    assert torch.equal((x * 2.5).cpu(), torch.tensor(0.3) * 2.5)


@pytest.mark.parametrize("dtype, number, expected", [
    (torch.float16, 2.5, torch.float16),    # a float number does not widen a float tensor
    (torch.int64, 1.5, torch.float32),      # an int tensor meets a float number: the default float dtype
    (torch.int32, 3, torch.int32),          # an int number does not widen an int tensor
    (torch.bool, 2, torch.int64),           # a bool tensor meets an int number: int64
    (torch.float32, 1j, torch.complex64),   # a complex number: the complex dtype of the default float
])
def test_zero_dim_promotion_follows_the_number_rule(dtype, number, expected):
    x = torch.ones((), dtype=dtype).to("mlu")
    assert (x * number).dtype == expected


def test_an_op_without_an_mlu_kernel_promotes_the_number_too():
    # remainder has no MLU kernel: the CPU fallback gets the number back as a wrapped number.
    x = torch.tensor([5, 7, 9], dtype=torch.int32).to("mlu")
    assert (x % 4).dtype == torch.int32
    assert torch.equal((x % 4).cpu(), torch.tensor([1, 3, 1], dtype=torch.int32))
    assert (torch.tensor(2.0).to("mlu") ** 2).dtype == torch.float32


@given(op=st.sampled_from([operator.add, operator.sub, operator.mul, operator.truediv, operator.mod,
                           operator.pow, operator.eq, operator.lt]),
       dtype=st.sampled_from([torch.float32, torch.float16, torch.int64, torch.int16, torch.bool]),
       number=NUMBERS, zero_dim=st.booleans(), reflected=st.booleans())
def test_number_operands_match_the_cpu(op, dtype, number, zero_dim, reflected):
    cpu = torch.ones(() if zero_dim else (3,), dtype=dtype) * (2 if dtype != torch.bool else 1)
    call = (lambda t: op(number, t)) if reflected else (lambda t: op(t, number))
    try:
        expected = call(cpu)
    except (RuntimeError, TypeError, ZeroDivisionError) as error:  # the CPU refuses: so must the device
        with pytest.raises(type(error)):
            call(cpu.to("mlu"))
        return
    got = call(cpu.to("mlu"))
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got.cpu(), expected, equal_nan=True, rtol=0, atol=0)
