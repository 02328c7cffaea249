"""mluverify fuzz finding 7465e77ef164: deviation on ort:cpu.

output [0]: dtype mismatch: actual int64 vs expected float32; dtype mismatch: actual int64 vs expected float32
Re-run: python 7465e77ef164.py  (exit status 1 and MISMATCH lines while the target is wrong)
"""
from math import inf

import torch

INPUTS = [
    torch.tensor([0.0]).reshape([1]),
    torch.tensor([0.0]).reshape([1]),
]


def program(x0, x1):
    v0 = torch.argmin(x1, dim=0, keepdim=True)
    v1 = torch.clamp(v0, min=x0)
    return (v1,)


def program_float64(x0, x1):
    v0 = torch.argmin(x1, dim=0, keepdim=True)
    v1 = torch.clamp(v0, min=x0)
    return (v1,)


def on_target(fn, args):
    import io
    import onnxruntime  # torch and onnxruntime only

    class Program(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    buffer = io.BytesIO()
    torch.onnx.export(Program(), tuple(a.clone() for a in args), buffer, dynamo=False, opset_version=17,
                      input_names=[f"x{i}" for i in range(len(args))])
    model = buffer.getvalue()
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    feeds = {f"x{i}": a.numpy() for i, a in enumerate(args) if f"x{i}" in wanted}
    return [torch.from_numpy(value) for value in session.run(None, feeds)]


def rel_mse(actual, expected):
    actual, expected = actual.double(), expected.double()
    return float(((actual - expected) ** 2).sum().sqrt() / expected.pow(2).sum().sqrt().clamp_min(1e-30))


def wrong(actual, reference, golden):
    """Why the target's output is wrong ("" if it is not): another shape or dtype than the CPU's,
    a NaN, or an infinity other than the CPU's (the answer where the CPU's float32 and float64
    runs agree on it: signs must match), an integer or bool element other than the CPU's where
    the CPU's are the float64 run's (integers all the way: exact), or an error against float64
    beyond twice the CPU's own plus 1e-3 (the golden rule, simplified; integers cast from
    computed floats too)."""
    if actual.shape != reference.shape or actual.dtype != reference.dtype:
        return f"{tuple(actual.shape)} {actual.dtype} instead of {tuple(reference.shape)} {reference.dtype}"
    if reference.is_floating_point():
        special = torch.isinf(reference)
        if not torch.equal(~torch.isfinite(actual), special) or not torch.equal(actual[special], reference[special]):
            return f"NaN/Inf other than the CPU's: {actual[~torch.isfinite(actual) | special].tolist()} where the CPU has {reference[~torch.isfinite(actual) | special].tolist()}"
        actual, reference, golden = actual[~special], reference[~special], golden[~special]
    if not reference.is_floating_point() and torch.equal(reference, golden.to(reference.dtype)):
        differ = int((actual != reference).sum())
        return f"{differ} of {reference.numel()} elements differ from the CPU's (exact)" if differ else ""
    if rel_mse(actual, golden) > 2 * rel_mse(reference, golden) + 1e-3:
        return f"rel_mse {rel_mse(actual, golden):.3g} against float64, the CPU's {rel_mse(reference, golden):.3g}"
    return ""


if __name__ == "__main__":
    reference = program(*(x.clone() for x in INPUTS))
    golden = program_float64(*(x.double() for x in INPUTS))
    actual = on_target(program, [x.clone() for x in INPUTS])
    mismatches = 0
    for index, (a, e, g) in enumerate(zip(actual, reference, golden)):
        print(f"output {index} {tuple(e.shape)} {e.dtype} (ort:cpu: {tuple(a.shape)} {a.dtype}): ort:cpu vs float64 rel_mse {rel_mse(a, g):.3g}, "
              f"CPU vs float64 {rel_mse(e, g):.3g}, ort:cpu vs CPU {rel_mse(a, e):.3g}")
        why = wrong(a, e, g)
        if why:
            print(f"MISMATCH output {index} on ort:cpu: {why}")
            mismatches += 1
    raise SystemExit(1 if mismatches else 0)
