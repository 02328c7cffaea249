"""The real int8 runtimes side by side: ``ort:int8`` (onnxruntime's quantizer) and ``openvino:int8``
(NNCF), per network and scheme, against float32, in one run.

1. Accuracy: rel_mse of each int8 model's output against the float CPU model (torchvision, random
   weights seeded 0, BatchNorm statistics estimated on 16 other random images: with the default
   ones MobileNetV3's activations vanish, its outputs ~1e-9; calibrated on ``--calibration``
   random images, judged on another one), per runtime and scheme (onnxruntime: QDQ s8s8 per tensor, its default; QDQ u8s8 per channel;
   QOperator s8s8 per tensor. NNCF: performance per channel, its default; performance per
   tensor; mixed per channel).
2. Time: each runtime's default int8 model against its own float32 model (onnxruntime: the
   ``ort:cpu`` export; OpenVINO: the converted model, f32 inference precision), warm, batch 1,
   medians of alternating runs: what the float layers cost.

Run: PYTHONPATH=. .venv/bin/python benchmarks/int8_runtimes.py [--size 64] [--calibration 20]
     [--repeats 20] [--networks resnet18 mobilenet_v3_small]
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Callable

import openvino
import onnxruntime
import torch

from benchmarks.quant_resnet50 import network, paired_medians
from mluverify.core.case import Case, Target
from mluverify.judge import metrics
from mluverify.plugins.openvino_int8_backend import FLOAT32, OpenVinoQuantization, quantize
from mluverify.plugins.ort_int8_backend import OrtQuantization, export_float, save_int8

ORT_SCHEMES = ({}, {"scheme": "u8s8", "granularity": "per-channel"}, {"format": "QOperator"})
OPENVINO_SCHEMES = ({}, {"granularity": "per-tensor"}, {"preset": "mixed"})


def with_batch_statistics(net: torch.nn.Module, images: torch.Tensor) -> torch.nn.Module:
    """``net`` with its BatchNorm running statistics those of ``images`` (one train-mode pass,
    cumulative averages), back in eval mode."""
    for layer in net.modules():
        if isinstance(layer, torch.nn.modules.batchnorm._BatchNorm):
            layer.reset_running_stats()
            layer.momentum = None
    with torch.no_grad():
        net.train()(images)
    return net.eval()


def ort_runs(net: torch.nn.Module, image: torch.Tensor, calibration: tuple, directory: Path) -> list[tuple[str, Callable]]:
    """(scheme, run) per onnxruntime scheme, the float32 export last; each run: image -> output."""
    runs = []
    for number, options in enumerate(ORT_SCHEMES):
        quantization = OrtQuantization(**options, calibration=calibration)
        path = save_int8(net, (image,), directory / f"int8-{number}.onnx", quantization=quantization)
        runs.append((quantization.describe(), _ort_session(path)))
    float_path = directory / "float.onnx"
    export_float(net, (image,), {}, float_path, Case("float", "net", Target("ort", "cpu")))
    return [*runs, ("float32", _ort_session(float_path))]


def openvino_runs(net: torch.nn.Module, image: torch.Tensor, calibration: tuple) -> list[tuple[str, Callable]]:
    """(scheme, run) per NNCF scheme, the float32 model last."""
    runs, quantized = [], None
    for options in OPENVINO_SCHEMES:
        quantization = OpenVinoQuantization(**options, calibration=calibration)
        quantized = quantize(net, (image,), quantization=quantization)
        runs.append((quantization.describe(), _openvino_request(quantized.model)))
    return [*runs, ("float32", _openvino_request(quantized.float_model))]


def _ort_session(path: Path) -> Callable:
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return lambda image: torch.from_numpy(session.run(None, {"input0": image.numpy()})[0])


def _openvino_request(model) -> Callable:
    request = openvino.Core().compile_model(model, "CPU", FLOAT32).create_infer_request()

    def run(image: torch.Tensor) -> torch.Tensor:
        request.infer([image.numpy()])
        return torch.from_numpy(request.get_output_tensor(0).data.copy())

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--calibration", type=int, default=20, help="calibration images (per channel needs 19)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--networks", nargs="+", default=["resnet18", "mobilenet_v3_small"])
    args = parser.parse_args()
    generator = torch.Generator().manual_seed(1)
    image, *calibration = [torch.randn(1, 3, args.size, args.size, generator=generator)
                           for _ in range(1 + args.calibration)]
    accuracy, latency = [], []
    with tempfile.TemporaryDirectory() as directory:
        for name in args.networks:
            net = with_batch_statistics(network(name), torch.randn(16, 3, args.size, args.size, generator=generator))
            with torch.no_grad():
                expected = net(image)
            for runtime, runs in (("onnxruntime", ort_runs(net, image, tuple(calibration), Path(directory))),
                                  ("openvino", openvino_runs(net, image, tuple(calibration)))):
                for scheme, run in runs[:-1]:
                    scores = metrics(run(image), expected)
                    accuracy.append(f"| {name} | {runtime} | {scheme} | {scores['rel_mse']:.4f} | "
                                    f"{scores['sqnr_db']:.1f} | {scores['cosine']:.5f} |")
                float_s, int8_s = paired_medians(lambda: runs[-1][1](image), lambda: runs[0][1](image), args.repeats)
                latency.append(f"| {name} | {runtime} | {float_s * 1e3:.2f} | {int8_s * 1e3:.2f} | "
                               f"{float_s / int8_s:.2f}x |")
    print(f"1x3x{args.size}x{args.size}, calibrated on {args.calibration} images, judged on another one\n")
    print("| network | runtime | scheme | rel_mse | sqnr_db | cosine |\n| --- | --- | --- | --- | --- | --- |")
    print("\n".join(accuracy))
    print(f"\nwarm latency, batch 1, medians of {args.repeats} alternating runs (int8: the runtime's default scheme)\n")
    print("| network | runtime | float32 ms | int8 ms | int8 speed-up |\n| --- | --- | --- | --- | --- |")
    print("\n".join(latency))


if __name__ == "__main__":
    main()
