"""What the OpenVINO reproducers beside this file share: a torch module run by OpenVINO as
mluverify's openvino:cpu / openvino:default run it (``torch.export``, ``openvino.convert_model``,
the CPU plugin; ``INFERENCE_PRECISION_HINT`` f32, or the plugin's default: bf16 on CPUs with
AMX / AVX512-BF16), needing only torch and the openvino extra. Each reproducer compares
OpenVINO's result with torch's eager one and exits non-zero while the deviation is there."""
import openvino
import torch

F32 = {"INFERENCE_PRECISION_HINT": "f32"}  # openvino:cpu; {} is openvino:default


def run(module: torch.nn.Module, *args: torch.Tensor, config: dict = F32, fixed_shapes: bool = False) -> torch.Tensor:
    """``module(*args)`` computed by OpenVINO's CPU plugin compiled with ``config``;
    ``fixed_shapes``: the converted model's inputs fixed to the shapes of ``args``, as the plugin
    does (``convert_model`` leaves them dynamic, and the CPU plugin then takes other paths)."""
    model = openvino.convert_model(torch.export.export(module, args))
    if fixed_shapes:
        model.reshape({i: openvino.PartialShape(list(a.shape)) for i, a in enumerate(args)})
    compiled = openvino.Core().compile_model(model, "CPU", config)
    return torch.from_numpy(compiled([a.numpy() for a in args])[0])


def check(module: torch.nn.Module, *args: torch.Tensor, config: dict = F32) -> None:
    """Print torch's and OpenVINO's results; fail unless they are equal within float32's
    rounding (NaN where torch has NaN)."""
    expected, got = module(*args), run(module, *args, config=config)
    print(f"torch:    {expected.flatten().tolist()}\nopenvino: {got.flatten().tolist()} ({config or 'default precision'})")
    # float32's default tolerances; NaN and each infinity must sit where torch's do
    torch.testing.assert_close(got, expected, equal_nan=True,
                               msg=lambda why: f"OpenVINO's {type(module).__name__} differs from torch's: {why}")
