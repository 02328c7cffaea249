"""mluverify fuzz finding daff2fb9e239: deviation on executorch:xnnpack.

output [0]: dtype mismatch: actual int64 vs expected int16; dtype mismatch: actual int64 vs expected int16
Re-run: python daff2fb9e239.py  (exit status 1 and MISMATCH lines while the target is wrong)
"""
from math import inf

import torch

INPUTS = [
    torch.tensor([0.0]).reshape([]),
]


def program(x0):
    v0 = x0.float().mul(1.0).clamp(-32768.0, 32767.0).to(torch.int16)
    v1 = torch.relu(v0)
    v2 = torch.remainder(v1, torch.where(v1 > 0, v1, v1 - 2))
    return (v2,)


def program_float64(x0):
    v0 = x0.float().mul(1.0).clamp(-32768.0, 32767.0).to(torch.int16)
    v1 = torch.relu(v0)
    v2 = torch.remainder(v1, torch.where(v1 > 0, v1, v1 - 2))
    return (v2,)


def on_target(fn, args):
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from executorch.runtime import Runtime  # torch and executorch only

    class Program(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    with torch.no_grad():
        exported = torch.export.export(Program(), tuple(a.clone() for a in args))
    lowered = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])
    method = Runtime.get().load_program(lowered.to_executorch().buffer).load_method("forward")
    return [t.clone() for t in method.execute([a.clone() for a in args])]


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
        print(f"output {index} {tuple(e.shape)} {e.dtype} (executorch:xnnpack: {tuple(a.shape)} {a.dtype}): executorch:xnnpack vs float64 rel_mse {rel_mse(a, g):.3g}, "
              f"CPU vs float64 {rel_mse(e, g):.3g}, executorch:xnnpack vs CPU {rel_mse(a, e):.3g}")
        why = wrong(a, e, g)
        if why:
            print(f"MISMATCH output {index} on executorch:xnnpack: {why}")
            mismatches += 1
    raise SystemExit(1 if mismatches else 0)
