"""mluverify fuzz finding 3e1335b4683e: error on ort:dynamo.

TargetError: BackendError: case fuzz[logical_xor-stack]: onnxruntime cannot run the exported graph: Fail: [ONNXRuntimeError] : 1 : FAIL : Type Error: Type parameter (T) of Optype (Concat) bound to different types (tensor(bool) and tensor(float) in node (node_stack).
Re-run: python 3e1335b4683e.py  (exit status 1 and MISMATCH lines while the target is wrong)
"""
from math import inf

import torch

INPUTS = [
    torch.tensor([1.0]).reshape([1, 1, 1, 1]),
    torch.tensor([1.0139291286468506, -0.0, -0.0, -0.699999988079071, 0.6000000238418579, 0.41825881600379944, -0.10000000149011612, -1.3945600986480713, -0.30000001192092896, 1.8496992588043213, 0.003000000026077032, -1.7622489929199219, 0.3299127221107483, 0.10000000149011612, 0.20000000298023224, -0.30000001192092896, -2.7894465923309326, -1.7669645547866821, -1.0, 2.299999952316284, 1.100000023841858, 0.699999988079071, -1.1990457773208618, 0.0, 0.0, 0.6000000238418579, 0.6000000238418579, 2.299999952316284, -0.699999988079071, 0.699999988079071, 1.100000023841858, -1.100000023841858, 0.10000000149011612, -0.7696526646614075, 0.20000000298023224, 1.0]).reshape([2, 3, 2, 3]),
    torch.tensor([inf, inf, inf, 1.3205007314682007, -1.4285714626312256, 0.3333333432674408, 3.3333332538604736, 10.0, 0.43478262424468994, -1.4285714626312256, 2.039567232131958, 5.0, 2.0, 0.5123130679130554, 0.3333333432674408, 0.43478262424468994, 0.6227228045463562, 1.0034798383712769, 2.189516544342041, 0.36641252040863037, -0.3430612087249756, 3.3333332538604736, 1.1111111640930176, -3.3333332538604736, -0.6685804724693298, 3.3333332538604736, 0.5059791803359985, 0.7461876273155212, 2.0, -inf, -inf, -inf, 1.5726884603500366, 5.310715675354004, 2.0, 2.0]).reshape([2, 3, 2, 3]),
]


def program(x0, x1, x2):
    v0 = torch.logical_xor(x2, x0)
    v1 = torch.stack([v0, x1], dim=3)
    return (v1,)


def program_float64(x0, x1, x2):
    v0 = torch.logical_xor(x2, x0)
    v1 = torch.stack([v0, x1], dim=3)
    return (v1,)


def on_target(fn, args):
    import onnxruntime  # torch, onnxscript (the exporter) and onnxruntime only

    class Program(torch.nn.Module):
        def forward(self, *xs):
            return fn(*xs)

    model = torch.onnx.export(Program(), tuple(a.clone() for a in args), dynamo=True, opset_version=20,
                              input_names=[f"x{i}" for i in range(len(args))], verbose=False
                              ).model_proto.SerializeToString()
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
        print(f"output {index} {tuple(e.shape)} {e.dtype} (ort:dynamo: {tuple(a.shape)} {a.dtype}): ort:dynamo vs float64 rel_mse {rel_mse(a, g):.3g}, "
              f"CPU vs float64 {rel_mse(e, g):.3g}, ort:dynamo vs CPU {rel_mse(a, e):.3g}")
        why = wrong(a, e, g)
        if why:
            print(f"MISMATCH output {index} on ort:dynamo: {why}")
            mismatches += 1
    raise SystemExit(1 if mismatches else 0)
