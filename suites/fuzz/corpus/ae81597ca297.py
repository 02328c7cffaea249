"""mluverify fuzz finding ae81597ca297: deviation on cpu:inductor.

output [0]: rel_mse 0.6245 > bound 0.02 (policy:cnml); golden: device rel_mse 0.6245 > k x reference 0 + floor = 1.192e-07 (k = 3, floor = 1.19e-07; policy:golden)
Re-run: python ae81597ca297.py  (exit status 1 and MISMATCH lines while the target is wrong)
"""
from math import inf

import torch

INPUTS = [
    torch.tensor([-0.3648407459259033, -2.998568296432495, 2.0612850189208984, 0.0, -0.47617802023887634, 9.999999717180685e-10, -2.220446049250313e-16, 0.0, 0.0, -0.36589929461479187, 0.0, -2.892723798751831, 1.5, 0.0, -2.138866901397705, 0.0, -0.8127255439758301, -1.5, -2.004530906677246, 1.8100305795669556, 0.0, 0.0, 0.0, 0.0, -0.4613557457923889, 2.1549861431121826, 0.0, 2.339045286178589, 0.0, -0.7866100072860718, -1.1200265884399414, 0.6113696098327637, 0.0, 0.0, -1.8954466581344604, -2.8528125286102295, 0.0, 0.0, 0.1117149144411087, 1.100000023841858, 0.0, 0.0, -1.4261726140975952, 0.0, -0.19325628876686096, 1.410419225692749, -0.7194104790687561, 0.3245467245578766, 0.08917831629514694, 0.0, -0.10000000149011612, 0.0, 0.0, 0.0, 1.3914562463760376, 0.0, 0.08461158722639084, -1.6237075328826904, 0.0, 1.2779825925827026, 0.0, 0.5859780311584473, 2.456322431564331, 0.0, -1.5, -2.0932440757751465, 0.20000000298023224, 2.07794189453125, 1.9610724449157715, -1.203024983406067, 0.0, -1.107871413230896, 0.0, -1.6653671264648438, 0.0, 1.5038036108016968, 0.0, 0.699999988079071, 2.422480344772339, 0.0, 9.999999747378752e-06, 0.0, -1.1987639665603638, 0.0, 0.0, 0.0, 2.302198648452759, 2.4866316318511963, -1.9017525911331177, 0.0, 2.299999952316284, 0.0, -2.2075023651123047, 0.0, 0.0, 0.0, -0.7301768064498901, 0.0, -9.999999747378752e-06, -2.185849189758301, -0.5874444246292114, -0.525985598564148, 0.0, -2.74493145942688, -2.264857769012451, -2.871171474456787, -1.695194959640503, 0.8351487517356873, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, -1.7123223543167114, -1.629430890083313, 2.1135854721069336, 0.0, 0.0, 0.0, 1.4007289409637451, 0.0, 2.9518537521362305, -2.1018288135528564, 2.299999952316284, 0.0, 2.299999952316284, 1.6271125078201294, 0.0, 0.0, 0.0, 0.0, 0.2956867814064026, 0.0, 0.0, 0.0, 2.5747900009155273, 0.0, 0.04155711829662323, 0.0, 2.79190993309021, 0.900241494178772, 0.5, -1.899999976158142, 0.0, -0.5633770227432251, 0.0, 0.0, 0.0, -3.0, 0.2756885290145874, 9.999999717180685e-10, 0.4485587775707245, 0.0, 0.0, 0.0, 0.0, -0.23455505073070526, 0.0, 1.0431257486343384, 2.774060010910034, -1.1920928955078125e-07, 0.30000001192092896, 1.8343596458435059, -0.699999988079071, -0.723941445350647, 0.8102459907531738, 0.5, -2.324620485305786, 0.30000001192092896, -0.30000001192092896, 0.30000001192092896, -0.30000001192092896, 0.20000000298023224, -0.10000000149011612, 2.2663090229034424, -0.10000000149011612, -0.10000000149011612, 0.10000000149011612, 0.30000001192092896]).reshape([5, 6, 2, 3]),
    torch.tensor([-0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, 0.0, -0.0, 1.0, 1.0, 0.0, -0.0, -0.0, 0.0, 0.0, 0.0, -0.0, 0.0, -0.0, 1.0, 1.0, -0.0, 0.0, 0.0, -0.0, 1.0, -0.0, 1.0, -0.0, 0.0, 1.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, 1.0, 0.0, 0.0, 1.0, 1.0, -0.0, -0.0, -0.0, 1.0, 1.0, -0.0, 1.0, -0.0, 0.0, -0.0, 1.0, -0.0, -0.0, -0.0, 0.0, -0.0, -0.0, 1.0, 0.0, -0.0, 0.0, 1.0, -0.0, -0.0, 1.0, -0.0, -0.0, -0.0, -0.0, 0.0, -0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, -0.0, -0.0, -0.0, 1.0, -0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, -0.0, 1.0, -0.0, 0.0, -0.0, 0.0, 1.0, -0.0, -0.0, -0.0, 0.0, -0.0, 0.0, -0.0, -0.0, 0.0, -0.0, 0.0, 1.0, 1.0, 1.0, -0.0, -0.0, -0.0, 1.0, 0.0, 1.0, 1.0, 0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, 0.0, -0.0, 1.0, 1.0, 1.0, -0.0, 0.0, 1.0, -0.0, -0.0, -0.0, -0.0, -0.0, 1.0, -0.0, 1.0, 1.0, 1.0, -0.0, -0.0, 0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, -0.0, 1.0, 1.0, 0.0, -0.0, -0.0, 0.0, 1.0, -0.0, 0.0, 1.0, 0.0, 1.0, -0.0, 0.0, -0.0, 0.0, 0.0, -0.0, 1.0, 1.0]).reshape([5, 6, 2, 3]),
]


def program(x0, x1):
    v0 = torch.relu(x1)
    v1 = torch.stack([v0, x0], dim=0)
    v2 = v0.index_fill_(0, torch.tensor([0, 0, 0], device=v0.device), 2.0)
    return (v1, v2,)


def program_float64(x0, x1):
    v0 = torch.relu(x1)
    v1 = torch.stack([v0, x0], dim=0)
    v2 = v0.index_fill_(0, torch.tensor([0, 0, 0], device=v0.device), 2.0)
    return (v1, v2,)


def on_target(fn, args):
    with torch.no_grad():
        return torch.compile(fn, backend="inductor", dynamic=False)(*args)


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
        print(f"output {index} {tuple(e.shape)} {e.dtype} (cpu:inductor: {tuple(a.shape)} {a.dtype}): cpu:inductor vs float64 rel_mse {rel_mse(a, g):.3g}, "
              f"CPU vs float64 {rel_mse(e, g):.3g}, cpu:inductor vs CPU {rel_mse(a, e):.3g}")
        why = wrong(a, e, g)
        if why:
            print(f"MISMATCH output {index} on cpu:inductor: {why}")
            mismatches += 1
    raise SystemExit(1 if mismatches else 0)
