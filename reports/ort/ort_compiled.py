"""What the ONNX Runtime reproducers beside this file share: a torch module exported to ONNX as
mluverify's ort:cpu (the TorchScript exporter, ``dynamo=False``, opset 17) or ort:dynamo (the
dynamo exporter, ``dynamo=True``, opset 20, onnxscript's lowerings) exports it, run by
onnxruntime's CPU execution provider; needing only torch and the ort / ort-dynamo extras. Each
reproducer compares ONNX Runtime's result with torch's eager one and exits non-zero while the
deviation is there."""
import io
import sys

import onnxruntime
import torch

EXPORTERS = {"ort:cpu": {"dynamo": False, "opset_version": 17}, "ort:dynamo": {"dynamo": True, "opset_version": 20}}


def run(module: torch.nn.Module, *args: torch.Tensor, target: str = "ort:dynamo") -> torch.Tensor:
    """``module(*args)`` exported as ``target`` exports it and computed by onnxruntime."""
    exporter = EXPORTERS[target]
    if exporter["dynamo"]:
        model = torch.onnx.export(module, args, verbose=False, **exporter).model_proto.SerializeToString()
    else:
        buffer = io.BytesIO()
        torch.onnx.export(module, args, buffer, **exporter)
        model = buffer.getvalue()
    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
    feeds = {given.name: a.numpy() for given, a in zip(session.get_inputs(), args)}
    return torch.from_numpy(session.run(None, feeds)[0])


def check(module: torch.nn.Module, *args: torch.Tensor, targets: tuple = tuple(EXPORTERS)) -> None:
    """Print torch's and each target's results; exit 1 unless every one equals torch's within
    float32's rounding (NaN where torch has NaN, infinities of the same sign)."""
    expected = module(*args)
    print(f"torch:      {expected.flatten().tolist()}")
    differs = []
    for target in targets:
        got = run(module, *args, target=target)
        print(f"{target + ':':11} {got.flatten().tolist()}")
        try:  # float32's default tolerances; NaN and each infinity must sit where torch's do
            torch.testing.assert_close(got, expected, equal_nan=True)
        except AssertionError:
            differs.append(target)
    print(f"DEVIATION on {', '.join(differs)}" if differs else "agrees with torch")
    sys.exit(1 if differs else 0)
