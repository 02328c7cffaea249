"""mluverify fuzz finding 7158e0341c6a: deviation on executorch:xnnpack.

output [0]: rel_mse 0.3473 > bound 0.02 (policy:cnml); golden: device rel_mse 0.3473 > k x reference 0 + floor = 1.192e-07 (k = 3, floor = 1.19e-07; policy:golden)
Re-run: python 7158e0341c6a.py  (exit status 1 and MISMATCH lines while the target is wrong)
"""
from math import inf

import torch

INPUTS = [
    torch.tensor([-0.30000001192092896, -0.0, 0.20000000298023224, 1.8746588230133057]).reshape([4]),
    torch.tensor([0.0, 0.07119441777467728, 0.0, 0.07652169466018677, 0.0, 0.08452802896499634, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.09999997168779373, 0.007522888481616974, 2.9802322387695312e-08, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.09999997913837433, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 3.832642025506466e-33, 1.1920928955078125e-07, 0.03995387256145477, 0.018062181770801544, 0.0, 0.0, 0.0, 0.015454672276973724, 0.0, 0.0, 0.09999997168779373, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.06720378249883652, 0.0, 0.0, 0.0, 0.0, 0.05890975147485733, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.07861699163913727, 5.960464477539063e-08, 0.0, 0.0, 0.0, 0.0, 0.0, 0.08861588686704636, 0.07405906915664673, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.047203414142131805, 0.0, 0.056739456951618195, 0.0677938237786293, 0.08227255940437317, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.03889098018407822, 0.0020202621817588806, 0.0, 0.0, 0.0, 0.09999996423721313, 0.01208525151014328, 0.0, 0.0006325393915176392, 0.0, 0.0, 0.0, 0.0, 0.0469827875494957, 0.0, 0.0022654086351394653, 0.09999997913837433, 0.0, 0.0, 0.0, 0.09999998658895493, 0.0, 0.0, 1.1920928955078125e-07, 0.0, 5.8989753073699e-31, 0.0, 0.06632869690656662, 0.0, 0.0, 0.045587338507175446, 0.0, 0.0, 0.07101622223854065, 0.03414447605609894, 0.0, 0.0, 0.0, 0.0032966062426567078, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -0.0, 0.029775194823741913, 0.0, 0.08494594693183899, 0.0, -0.0, 0.0, 0.09999997913837433, 0.0, 0.0, 0.09999991953372955, 0.09999997913837433, -0.0, 7.450580596923828e-09, 0.0, 0.0, 2.220446049250313e-16, 5.495404925216348e-38, 0.0, 0.07090015709400177, 0.0, 0.09214501827955246, 0.0, -0.0, 0.0, 0.09999999403953552, 7.450580596923828e-09, 0.0, 0.03292500227689743, -0.0, 0.09999998658895493, -0.0, 0.07449180632829666, 7.450580596923828e-09, 7.450580596923828e-09, 0.09999998658895493, 0.0, 0.0, -0.0, -0.0, 0.04507988691329956, 1.4901161193847656e-08, -0.0, 0.0, 0.0, 0.09999996423721313, -0.0, 0.0, 0.0, 0.0, 0.040276966989040375, 0.0, 0.09888532012701035, 0.09999991953372955, 0.0, 1.4901161193847656e-08, 7.450580596923828e-09, 0.09999991953372955, 0.0, 0.0, -0.0, 0.0, 1.4901161193847656e-08, 0.0, 0.0, 0.0, 0.09999998658895493, 0.0, 0.0, 0.0, 0.09999998658895493, 0.06948251277208328, 7.450580596923828e-09, 0.0, 0.0, 9.686591511126608e-07, 0.0, 0.014843322336673737, 0.012026100419461727, 0.0, 0.0, 9.999999747378752e-06, 0.019979581236839294, 7.450580596923828e-09, 0.0, 0.05627819895744324, 0.0, 2.220446049250313e-16, 1.4901161193847656e-08, 0.0, -0.0, 0.09999991953372955, -0.0, 0.09999998658895493, 0.07231145352125168, 1.1754943508222875e-38, 7.450580596923828e-09, 0.09122014045715332, 0.0, 0.09999997168779373, 0.09999999403953552, 0.0850626528263092, 0.0, 0.014977030456066132, 1.4901161193847656e-08, 0.0, 0.0, 0.0, 0.09999997168779373, 7.450580596923828e-09]).reshape([4, 4, 4, 4]),
]


def program(x0, x1):
    v0 = torch.floor_divide(x1, torch.where(x0 > 0, x0, x0 - 2))
    v1 = torch.squeeze(v0, 0)
    v2 = torch.remainder(v1, torch.where(v1 > 0, v1, v1 - 2))
    v3 = torch.atan2(v2, v2)
    return (v3,)


def program_float64(x0, x1):
    v0 = torch.floor_divide(x1, torch.where(x0 > 0, x0, x0 - 2))
    v1 = torch.squeeze(v0, 0)
    v2 = torch.remainder(v1, torch.where(v1 > 0, v1, v1 - 2))
    v3 = torch.atan2(v2, v2)
    return (v3,)


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
