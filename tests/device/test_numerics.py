"""Each row of the numerics tables (docs/device.md, "Numerics") against an independent computation.

References come from ``numerics_reference`` (numpy: int64 products, float64 sums, written from
the documented rules) or float64 torch on values rounded by numpy. Where the device's
accumulation order is the CPU kernel's, the check is a proven bound on any order's rounding
(Higham's gamma), never a claim about this CPU's BLAS.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import numerics_reference as ref
from mluverify.device import mlu_model, numerics
import mluverify.device as md
from mluverify.device.numerics import numerics_settings


def tf32_reference(a: np.ndarray) -> np.ndarray:
    """Round to 10 explicit mantissa bits, ties to even, via frexp (mantissa in [0.5, 1))."""
    mantissa, exponent = np.frexp(a.astype(np.float64))
    return np.ldexp(np.round(mantissa * 2.0**11) / 2.0**11, exponent)


def rel_l2(actual, expected) -> float:
    actual, expected = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    return float(np.linalg.norm(actual - expected) / np.linalg.norm(expected))


def on_mlu(fn, *tensors):
    return fn(*(t.to("mlu") for t in tensors)).cpu()


def randn(*shape, gen, dtype=torch.float32):
    return torch.randn(*shape, generator=gen).to(dtype)


# --- settings ------------------------------------------------------------------------------


@pytest.mark.parametrize("setter, value, valid", [
    (numerics.set_core_version, "MLU100", "'MLU270', 'MLU370'"),
    (numerics.set_core_number, 2, "1, 4, 16"),
    (numerics.set_core_number, True, "1, 4, 16"),
    (numerics.set_matmul_precision, "int4", "'float', 'int16', 'int31', 'int8'"),
])
def test_unknown_settings_raise_listing_the_valid_values(setter, value, valid):
    before = numerics.active_settings()
    with pytest.raises(ValueError, match=valid):
        setter(value)
    assert numerics.active_settings() == before


def test_settings_block_restores_and_validates_before_changing_anything():
    before = numerics.active_settings()
    with numerics_settings(core_version="MLU370", core_number=16, matmul_precision="int8") as inside:
        assert (mlu_model.get_core_version(), mlu_model.get_core_number(), mlu_model.get_matmul_precision()) == (
            "MLU370", 16, "int8") == (inside.core_version, inside.core_number, inside.matmul_precision)
        assert (numerics.cores_for("cnml"), numerics.cores_for("cnnl")) == (16, numerics.LAYER_BY_LAYER_CORES)
    assert numerics.active_settings() == before
    with pytest.raises(ValueError, match="1, 4, 16"), numerics_settings(core_version="MLU370", core_number=3):
        pass
    assert numerics.active_settings() == before


def test_matmul_precision_comes_from_the_environment():
    import os
    import subprocess
    import sys

    script = "from mluverify.device import mlu_model\nprint(mlu_model.get_matmul_precision())\n"

    def run(value: str) -> subprocess.CompletedProcess:
        env = {**os.environ, numerics.MATMUL_PRECISION_ENV: value}
        return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)

    chosen = run("int8")
    assert chosen.stdout.strip().splitlines()[-1] == "int8", chosen.stderr
    unknown = run("int4")
    assert unknown.returncode != 0 and "'float', 'int16', 'int31', 'int8'" in unknown.stderr


# --- the rounding helper itself -----------------------------------------------------------------


def test_round_mantissa_matches_frexp_reference_including_ties(seeded):
    x = randn(40_000, gen=seeded) * 1e3  # more than one thread's share of the extension's loop
    bits = x.view(torch.int32)
    ties = (bits & ~0x1FFF) | 0x1000  # exactly half way between two TF32 values
    values = torch.cat([x, ties.view(torch.float32)])
    got = numerics.round_mantissa(values, 10).double().numpy()
    np.testing.assert_array_equal(got, tf32_reference(values.numpy()))


def test_round_mantissa_keeps_inf_and_nan():
    payload_nan = torch.tensor([0x7F800001], dtype=torch.int32).view(torch.float32)
    special = torch.cat([torch.tensor([float("inf"), -float("inf"), float("nan")]), payload_nan])
    got = numerics.round_mantissa(special, 10)
    assert torch.isinf(got[:2]).all() and torch.isnan(got[2:]).all()


# --- MLU270: quantized by default -------------------------------------------------------------
#
# Each op: (torch call on device tensors, exact int64 contraction, products per output, bias axis).

def _conv2d(x, w, b):
    return F.conv2d(x, w, b, stride=2, padding=1, dilation=2, groups=2)


def _conv_transpose2d(x, w, b):
    return F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1, groups=2)


def _conv1d(x, w, b):
    return F.conv1d(x, w, b, padding=2)


OPS = {
    # name: (device call, int64 contraction, (x shape, w shape, bias length), products per output, bias axis)
    "conv2d": (_conv2d, lambda a, b: ref.conv_int64(a, b, (2, 2), (1, 1), (2, 2), 2),
               ((2, 8, 11, 9), (6, 4, 3, 3), 6), 4 * 9, 1),
    "conv_transpose2d": (_conv_transpose2d,
                         lambda a, b: ref.conv_transpose_int64(a, b, (2, 2), (1, 1), (1, 1), (1, 1), 2),
                         ((2, 6, 5, 4), (6, 3, 3, 3), 6), 3 * 9, 1),
    "conv1d": (_conv1d, lambda a, b: ref.conv_int64(a, b, (1,), (2,), (1,), 1), ((3, 5, 20), (7, 5, 5), 7), 25, 1),
    "linear": (F.linear, lambda a, b: a @ b.T, ((12, 300), (9, 300), 9), 300, -1),
    "mm": (lambda x, w, b: torch.mm(x, w.T), lambda a, b: a @ b.T, ((10, 257), (13, 257), 0), 257, -1),
    "bmm": (lambda x, w, b: torch.bmm(x, w.transpose(1, 2)), lambda a, b: a @ b.transpose(0, 2, 1),
            ((3, 7, 40), (3, 5, 40), 0), 40, -1),
}


def _inputs(name, dtype, gen):
    _, _, (x_shape, w_shape, bias), _, _ = OPS[name]
    x = randn(*x_shape, gen=gen, dtype=dtype)
    w = randn(*w_shape, gen=gen, dtype=dtype) * 0.3
    b = randn(bias, gen=gen, dtype=dtype) if bias else None
    return x, w, b


def quantized_reference(name, x, w, b, precision, accumulation_unit):
    """The op's exact-integer result (float32) and, per element, how far a device whose
    accumulation rounds with ``accumulation_unit`` may be from it (0 where exact is required)."""
    _, contract, _, terms, axis = OPS[name]
    qmax = ref.QMAX[precision]
    x32, w32 = x.float().numpy(), w.float().numpy()
    qx, sx = ref.quantize(x32, qmax)
    qw, sw = ref.quantize(w32, qmax)
    acc = ref.exactly(contract, qx, qw)
    y = ref.dequantize(acc, sx, sw)
    shape = [1] * y.ndim
    shape[axis] = -1
    bias = np.zeros(1, np.float32) if b is None else b.float().numpy().reshape(shape)
    y = y + bias
    if not accumulation_unit:
        return y, np.zeros_like(y, dtype=np.float64)
    sums = ref.exactly(contract, np.abs(qx), np.abs(qw)).astype(np.float64)
    denominator = np.float64(np.float32(np.float64(sx) * np.float64(sw)))
    # Accumulation in any order, plus one float32 rounding of each operand (int16 multiplies
    # dequantized operands) or of the accumulator (int8 / int31), plus the final roundings.
    tolerance = ((ref.accumulation_bound(sums, terms, accumulation_unit) + 2 * ref.U32 * sums) / denominator
                 + 4 * ref.U32 * (np.abs(y) + np.abs(bias)))
    return y, tolerance


def _run(name, x, w, b):
    call = OPS[name][0]
    if b is None:
        return on_mlu(lambda x_, w_: call(x_, w_, None), x, w)
    return on_mlu(call, x, w, b)


def _unquantized(name, x, w, b):
    return OPS[name][0](x.double(), w.double(), None if b is None else b.double())


@pytest.mark.parametrize("name", sorted(OPS))
def test_int8_is_the_exact_integer_result_bit_for_bit(name, seeded):
    """int8 products of at most 1040 terms keep every partial sum below 2**24: float32 is exact."""
    x, w, b = _inputs(name, torch.float32, seeded)
    expected, _ = quantized_reference(name, x, w, b, "int8", 0)
    with numerics_settings(core_version="MLU270", matmul_precision="int8"):
        got = _run(name, x, w, b)
    np.testing.assert_array_equal(got.numpy(), expected)
    assert rel_l2(got, _unquantized(name, x, w, b)) > 1e-3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("precision, unit", [("int16", ref.U32), ("int31", ref.U64)])
@pytest.mark.parametrize("name", sorted(OPS))
def test_int16_and_int31_are_the_integer_result_within_the_accumulation_rounding(name, precision, unit, dtype,
                                                                                 seeded):
    """int16 accumulates in float32, int31 in float64: within gamma * sum |qx qw| of the exact
    integers; float16 results are that, rounded to float16 once."""
    x, w, b = _inputs(name, dtype, seeded)
    expected, tolerance = quantized_reference(name, x, w, b, precision, unit)
    with numerics_settings(core_version="MLU270", matmul_precision=precision):
        got = _run(name, x, w, b)
    assert got.dtype == dtype
    if dtype == torch.float16:
        larger = np.maximum(np.abs(expected), np.abs(got.float().numpy())).astype(np.float16)
        tolerance = tolerance + np.spacing(larger).astype(np.float64) / 2
    assert np.all(np.abs(got.double().numpy() - expected) <= tolerance)
    if precision == "int16" and dtype == torch.float32:
        assert rel_l2(got, _unquantized(name, x, w, b)) > 1e-6, "the inputs were quantized"


def test_float_precision_keeps_float32_inputs(seeded):
    a, b = randn(64, 256, gen=seeded), randn(256, 48, gen=seeded)
    with numerics_settings(core_version="MLU270", matmul_precision="float"):
        got = on_mlu(torch.mm, a, b)
    assert rel_l2(got, torch.mm(a.double(), b.double())) < 2e-6


def test_an_operand_holding_inf_computes_unquantized(seeded):
    a, b = randn(6, 16, gen=seeded), randn(16, 5, gen=seeded)
    a[2, 3] = float("inf")
    with numerics_settings(core_version="MLU270", matmul_precision="int16"):
        got = on_mlu(torch.mm, a, b)
    expected = torch.mm(a, b)
    assert torch.equal(torch.isfinite(got), torch.isfinite(expected))
    finite = torch.isfinite(expected)
    assert rel_l2(got[finite], torch.mm(a.double(), b.double())[finite]) < 2e-6


def test_a_layer_quantized_by_the_tool_keeps_its_own_parameters(seeded):
    """MLUConv2d / MLULinear run their calibrated scales (per channel here): the device does not
    quantize their inputs again, so the matmul precision setting changes nothing."""
    from mluverify.device.quantization import quantize_dynamic_mlu

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 5)).eval()
    x = torch.rand(2, 3, 8, 8, generator=seeded)
    quantized = quantize_dynamic_mlu(model, {"per_channel": True}, dtype="int8", gen_quant=True)
    with torch.no_grad():
        quantized(x)  # calibration
        outputs = []
        for precision in ("int16", "int8", "int31", "float"):
            with numerics_settings(core_version="MLU270", matmul_precision=precision):
                outputs.append(quantized.to("mlu")(x.to("mlu")).cpu())
            quantized.cpu()
        float_output = model(x)
    assert all(torch.equal(outputs[0], other) for other in outputs[1:])
    assert 1e-4 < rel_l2(outputs[0], float_output) < 0.05  # int8 per channel, not int16 or float


# --- MLU370: TF32-like float32 products, reduced dim split across the cores --------------------


@pytest.mark.parametrize("op", ["mm", "conv2d"])
@pytest.mark.parametrize("cores", [1, 4, 16])
def test_mlu370_float32_matmul_is_tf32_then_per_core_float32_accumulation(op, cores, seeded):
    if op == "mm":
        a, b = randn(64, 256, gen=seeded), randn(256, 48, gen=seeded)
        fn, terms = torch.mm, 256
    else:
        a, b = randn(2, 16, 12, 12, gen=seeded), randn(8, 16, 3, 3, gen=seeded)
        fn, terms = F.conv2d, 16 * 9
    mode = "cnnl" if cores == numerics.LAYER_BY_LAYER_CORES else "cnml"
    from mluverify.device import kernel_mode

    with numerics_settings(core_version="MLU370", core_number=cores if mode == "cnml" else 1), kernel_mode(mode):
        got = on_mlu(fn, a, b)
    rounded_a, rounded_b = torch.from_numpy(tf32_reference(a.numpy())), torch.from_numpy(tf32_reference(b.numpy()))
    tf32 = fn(rounded_a, rounded_b)
    bound = ref.accumulation_bound(fn(rounded_a.abs(), rounded_b.abs()).numpy(), terms, ref.U32)
    assert np.all(np.abs(got.double().numpy() - tf32.numpy()) <= bound + ref.U32 * np.abs(tf32.numpy()))
    deviation = rel_l2(got, fn(a.double(), b.double()))
    assert 2e-5 < deviation < 2.0**-10, f"deviation from exact float32 inputs: {deviation}"
    assert torch.equal(got, on_mlu_again(fn, a, b, cores, mode)), "deterministic"


def on_mlu_again(fn, a, b, cores, mode):
    from mluverify.device import kernel_mode

    with numerics_settings(core_version="MLU370", core_number=cores if mode == "cnml" else 1), kernel_mode(mode):
        return on_mlu(fn, a, b)


def test_tf32_weight_cache_follows_in_place_weight_updates(seeded):
    x, w = randn(8, 64, gen=seeded), randn(16, 64, gen=seeded)
    with numerics_settings(core_version="MLU370"):
        x_mlu, w_mlu = x.to("mlu"), w.to("mlu")
        first = F.linear(x_mlu, w_mlu).cpu()
        w_mlu.mul_(3.0)  # written on the device: the cached TF32 copy must not be reused
        second = F.linear(x_mlu, w_mlu).cpu()

    def ref_(weights):
        return torch.from_numpy(tf32_reference(x.numpy())) @ torch.from_numpy(tf32_reference(weights.numpy())).T

    assert rel_l2(first, ref_(w)) < 2e-6
    assert rel_l2(second, ref_(w * 3.0)) < 2e-6


def test_quantized_weight_cache_follows_in_place_weight_updates(seeded):
    x, w = randn(8, 64, gen=seeded), randn(16, 64, gen=seeded)
    with numerics_settings(core_version="MLU270", matmul_precision="int8"):
        x_mlu, w_mlu = x.to("mlu"), w.to("mlu")
        F.linear(x_mlu, w_mlu)
        w_mlu[0, 0] = 100.0  # a new absmax: a new scale for the whole weight
        got = F.linear(x_mlu, w_mlu).cpu()
    changed = w.clone()
    changed[0, 0] = 100.0
    expected, _ = quantized_reference("linear", x, changed, None, "int8", 0)
    np.testing.assert_array_equal(got.numpy(), expected)


# --- float16 matmul on MLU370: float32 accumulation, one rounding --------------------------------


def _fp16_ulps(actual: torch.Tensor, expected: np.ndarray) -> np.ndarray:
    a = actual.numpy().astype(np.float16).view(np.int16).astype(np.int64)
    e = expected.astype(np.float16).view(np.int16).astype(np.int64)
    return np.abs(a - e)


def test_float16_matmul_accumulates_in_float32_and_rounds_once(seeded):
    """The result is fl16(s) with s within float32 accumulation rounding of the exact product:
    |got - exact| <= gamma_K sum|a b| + half a float16 ulp of got. Accumulating in float16
    instead would miss by far more."""
    a, b = randn(64, 512, gen=seeded, dtype=torch.float16), randn(512, 32, gen=seeded, dtype=torch.float16)
    with numerics_settings(core_version="MLU370"):
        got = on_mlu(torch.mm, a, b)
    assert got.dtype == torch.float16
    a64, b64 = a.numpy().astype(np.float64), b.numpy().astype(np.float64)
    exact = a64 @ b64
    bound = ref.accumulation_bound(np.abs(a64) @ np.abs(b64), 512, ref.U32)
    half_ulp = np.spacing(np.abs(got.numpy())).astype(np.float64) / 2
    error = np.abs(got.numpy().astype(np.float64) - exact)
    assert np.all(error <= bound + half_ulp)
    sequential = np.zeros_like(exact, dtype=np.float16)
    for k in range(512):
        sequential = (sequential + (a64[:, k:k + 1] * b64[k:k + 1, :]).astype(np.float16)).astype(np.float16)
    assert np.abs(sequential.astype(np.float64) - exact).mean() > 10 * error.mean()


def test_float16_conv_rounds_result_to_float16(seeded):
    x = randn(1, 8, 10, 10, gen=seeded, dtype=torch.float16)
    w = randn(4, 8, 3, 3, gen=seeded, dtype=torch.float16)
    with numerics_settings(core_version="MLU370"):
        got = on_mlu(F.conv2d, x, w)
    exact = F.conv2d(x.double(), w.double()).numpy()
    bound = ref.accumulation_bound(F.conv2d(x.double().abs(), w.double().abs()).numpy(), 72, ref.U32)
    half_ulp = np.spacing(np.abs(got.numpy())).astype(np.float64) / 2
    assert got.dtype == torch.float16
    assert np.all(np.abs(got.numpy().astype(np.float64) - exact) <= bound + half_ulp)


# --- elementwise: the storage precision, correctly rounded ----------------------------------
# (the exact and IEEE-rounded ops as the CPU computes them; transcendental ones in float64)


@pytest.mark.parametrize("name, fn, npfn", [
    ("add", torch.add, np.add), ("mul", torch.mul, np.multiply), ("sub", torch.sub, np.subtract),
])
def test_float16_elementwise_is_correctly_rounded_per_op(name, fn, npfn, seeded):
    a, b = randn(4096, gen=seeded, dtype=torch.float16), randn(4096, gen=seeded, dtype=torch.float16)
    got = on_mlu(fn, a, b)
    expected = npfn(a.numpy().astype(np.float64), b.numpy().astype(np.float64)).astype(np.float16)
    np.testing.assert_array_equal(got.numpy(), expected)


def _np_gelu(x: np.ndarray) -> np.ndarray:
    import math

    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


TRANSCENDENTAL = [
    ("exp", torch.exp, np.exp), ("log", torch.log, np.log), ("sqrt", torch.sqrt, np.sqrt),
    ("rsqrt", torch.rsqrt, lambda a: 1 / np.sqrt(a)), ("tanh", torch.tanh, np.tanh),
    ("sigmoid", torch.sigmoid, lambda a: 1 / (1 + np.exp(-a))), ("gelu", F.gelu, _np_gelu),
    ("silu", F.silu, lambda a: a / (1 + np.exp(-a))), ("pow", lambda t: torch.pow(t, 1.7), lambda a: a ** 1.7),
    # the activations computed the same way (builtin_kernels.ACTIVATIONS)
    ("hardswish", F.hardswish, lambda a: a * np.clip(a + 3, 0, 6) / 6),
    ("hardsigmoid", F.hardsigmoid, lambda a: np.clip(a + 3, 0, 6) / 6),
    ("glu", lambda t: F.glu(t, 0), lambda a: a[:5000] / (1 + np.exp(-a[5000:]))),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name, fn, npfn", TRANSCENDENTAL, ids=[t[0] for t in TRANSCENDENTAL])
def test_transcendental_ops_are_correctly_rounded(name, fn, npfn, dtype, seeded):
    """Computed in float64 and rounded once: numpy's float64 result rounded to the dtype."""
    x = randn(10_000, gen=seeded).abs().add(0.01).to(dtype) if name in ("log", "sqrt", "rsqrt", "pow") \
        else (randn(10_000, gen=seeded) * 3).to(dtype)
    got = on_mlu(fn, x)
    expected = npfn(x.numpy().astype(np.float64)).astype(x.numpy().dtype)
    np.testing.assert_array_equal(got.numpy(), expected)


def test_float32_elementwise_is_exact_float32(seeded):
    a, b = randn(4096, gen=seeded), randn(4096, gen=seeded)
    np.testing.assert_array_equal(on_mlu(torch.add, a, b).numpy(), (a.numpy() + b.numpy()).astype(np.float32))


# --- empty inputs: nothing to accumulate ------------------------------------------------------


EMPTY_REDUCTIONS = {
    "sum_dim": (lambda x: x.sum(-1), (3, 0)),
    "mean_all": (torch.mean, (0, 4)),
    "var": (lambda x: x.var(0), (0, 4)),
    "softmax": (lambda x: torch.softmax(x, 0), (0, 4)),
    "layer_norm": (lambda x: F.layer_norm(x, (5,)), (0, 5)),
    "group_norm": (lambda x: F.group_norm(x, 2), (0, 4, 3)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2), (0, 1, 4, 4, 4)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, 2), (0, 2, 3, 3, 3)),
}


@pytest.mark.parametrize("name", EMPTY_REDUCTIONS)
def test_reductions_of_empty_inputs_give_the_ops_definition(name):
    """A reduction over no elements (an empty result, the sum's 0, the mean's NaN) as the CPU
    defines it, instead of an error from the per-core split."""
    fn, shape = EMPTY_REDUCTIONS[name]
    x = torch.empty(shape)
    expected = fn(x)
    got = on_mlu(fn, x)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)


# --- vector products are the matmul class; tensor-bound clamps are exact ops -------------------


@pytest.mark.parametrize("name", ["dot", "mv", "addmv"])
def test_vector_products_are_quantized_like_every_product(name, seeded):
    """``torch.matmul`` of 1-d operands (dot) and matrix-vector products (mv, addmv) are
    products of the matmul class: int8 operands per tensor, the exact integer sum dequantized."""
    matrix, vector, bias = randn(7, 40, gen=seeded), randn(40, gen=seeded), randn(7, gen=seeded)
    left = matrix[0] if name == "dot" else matrix
    q_left, s_left = ref.quantize(left.numpy(), 127)
    q_vector, s_vector = ref.quantize(vector.numpy(), 127)
    expected = ref.dequantize(np.asarray(q_left @ q_vector), s_left, s_vector)
    if name == "addmv":
        expected = expected + bias.numpy()
    fn = {"dot": torch.dot, "mv": torch.mv, "addmv": lambda m, v: torch.addmv(bias.to(m.device), m, v)}[name]
    with numerics_settings(core_version="MLU270", matmul_precision="int8"), md.track_fallbacks() as fallbacks:
        got = on_mlu(fn, left, vector)
    assert not fallbacks.ops, fallbacks.ops
    np.testing.assert_array_equal(got.numpy(), np.asarray(expected, dtype=np.float32))


CLAMPS = {  # name -> (torch form, numpy form)
    "clamp": (lambda x, lo, hi: torch.clamp(x, lo, hi), lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)),
    "clamp_min": (lambda x, lo, hi: torch.clamp_min(x, lo), lambda x, lo, hi: np.maximum(x, lo)),
    "clamp_max": (lambda x, lo, hi: torch.clamp_max(x, hi), lambda x, lo, hi: np.minimum(x, hi)),
    "clamp_": (lambda x, lo, hi: x.clone().clamp_(lo, hi), lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi)),
}


@pytest.mark.parametrize("name", CLAMPS)
def test_clamps_with_tensor_bounds_run_on_the_device_exactly(name, seeded):
    x, low, high = randn(6, 5, gen=seeded), randn(5, gen=seeded) - 1, randn(6, 1, gen=seeded) + 1
    fn, np_fn = CLAMPS[name]
    with md.track_fallbacks() as fallbacks:
        got = on_mlu(fn, x, low, high)
    assert not fallbacks.ops, fallbacks.ops
    np.testing.assert_array_equal(got.numpy(), np_fn(x.numpy(), low.numpy(), high.numpy()))
