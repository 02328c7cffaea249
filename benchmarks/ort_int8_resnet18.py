"""``ort:int8``: a ResNet-18 quantized by onnxruntime's own quantizer, per scheme, against float.

1. Accuracy: rel_mse of the int8 model's output against the float CPU model (torchvision,
   random weights seeded 0, calibrated on random images, judged on another one), per scheme:
   QDQ s8s8 per tensor (the default), QDQ u8s8 per channel, QOperator s8s8 per tensor.
2. Time: the saved int8 model against the float32 ONNX model (``ort:cpu``'s export), warm
   sessions, batch 1, medians of alternating runs.

Run: PYTHONPATH=. .venv/bin/python benchmarks/ort_int8_resnet18.py [--size 64] [--repeats 20]
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import onnxruntime
import torch
import torchvision

from benchmarks.quant_resnet50 import paired_medians
from mluverify.core.case import Case, Target
from mluverify.judge import metrics
from mluverify.plugins.ort_int8_backend import OrtQuantization, export_float, save_int8

SCHEMES = (OrtQuantization(), OrtQuantization(scheme="u8s8", granularity="per-channel"),
           OrtQuantization(format="QOperator"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=64, help="image height and width")
    parser.add_argument("--calibration", type=int, default=2, help="calibration images")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None).eval()
    generator = torch.Generator().manual_seed(1)
    image, *calibration = [torch.randn(1, 3, args.size, args.size, generator=generator)
                           for _ in range(1 + args.calibration)]
    with torch.no_grad():
        expected = net(image)
    with tempfile.TemporaryDirectory() as directory:
        for number, scheme in enumerate(SCHEMES):
            path = save_int8(net, (image,), Path(directory) / f"int8-{number}.onnx",
                             quantization=OrtQuantization(scheme.scheme, scheme.granularity, scheme.format,
                                                          calibration=tuple(calibration)))
            int8 = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            scores = metrics(torch.from_numpy(int8.run(None, {"input0": image.numpy()})[0]), expected)
            print(f"{scheme.describe():40s} rel_mse {scores['rel_mse']:.4f}  sqnr_db {scores['sqnr_db']:.1f}  "
                  f"cosine {scores['cosine']:.5f}")
        float_path = Path(directory) / "float.onnx"
        export_float(net, (image,), {}, float_path, Case("resnet18", "resnet18", Target("ort", "cpu")))
        int8 = onnxruntime.InferenceSession(str(Path(directory) / "int8-0.onnx"), providers=["CPUExecutionProvider"])
        fp32 = onnxruntime.InferenceSession(str(float_path), providers=["CPUExecutionProvider"])
        feed = {"input0": image.numpy()}
        float_s, int8_s = paired_medians(lambda: fp32.run(None, feed), lambda: int8.run(None, feed), args.repeats)
    print(f"ResNet-18 1x3x{args.size}x{args.size}, float32 (ort:cpu export): {float_s * 1e3:7.2f} ms")
    print(f"ResNet-18 1x3x{args.size}x{args.size}, int8 QDQ s8s8 per-tensor:  {int8_s * 1e3:7.2f} ms "
          f"({float_s / int8_s:.2f}x faster)")


if __name__ == "__main__":
    main()
