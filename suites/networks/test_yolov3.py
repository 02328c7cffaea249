"""The seeds' YOLOv3 offline multicore demo as a network case: ``yolov3_offline_multicore`` run
with ``-offlinemodel yolov3.cambricon ... -input_format 0`` (seed 003).

YOLOv3 (``yolov3.py``: Darknet-53, the upsampling neck, three heads; random seeded weights) on
a batch of scikit-image's sample images, saved as an offline model and run on ``mlu:offline``
(and fused on ``mlu:cnml``, which computes what the offline model computes, bit for bit; the
default targets have it, so ``make verify`` runs these cases there) under the demo's settings:
the core number (``ct.set_core_number``: 1, 4 or 16, "core_num仅有三种数值可选：1、4、16") and
the input format (0 RGB, 1 RGBA, 2 ARGB: the model's first convolution padded for the alpha
channel, ``mluverify.device.offline.with_input_format``; the images converted as the demo's
pre-processing converts them, ``to_input_format``). Each case judges the three raw head outputs
by the ``cnml`` policy and the detections (decode + NMS, ``yolov3.detect``) by the task gate
``detection_agreement`` against the CPU's (``task_references.toml``).

Default selection: the 160 x 160, width-0.25 network at (core number, input format) (1, RGB)
and (16, ARGB); the rest of the grid and the full-size network (416 x 416, width 1.0) are
``mlu_heavy`` (``make verify-offline`` runs them all on ``mlu:offline``).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import pytest

import mluverify.device.mlu_model as ct
from mluverify import TaskReferences
from mluverify.device import offline

from digits_task import REFERENCES
from yolov3 import SEED, detect, sample_images, yolov3

FORMATS = ("RGB", "RGBA", "ARGB")  # the demo's -input_format 0, 1, 2
# (core number, input format) in the default selection: the extremes, about 5 s of CPU a case
DEFAULT = ((1, 0), (16, 2))
FULL_SIZE = 416


def _params() -> list:
    return [pytest.param(cores, fmt, id=f"cores{cores}-{FORMATS[fmt]}",
                         marks=[] if (cores, fmt) in DEFAULT else [pytest.mark.mlu_heavy])
            for cores in ct.CORE_NUMBERS for fmt in range(len(FORMATS))]


@contextlib.contextmanager
def core_number(cores: int) -> Iterator[None]:
    """``ct.set_core_number(cores)`` for the block (the saved model keeps it), then the previous one."""
    previous = ct.get_core_number()
    ct.set_core_number(cores)
    try:
        yield
    finally:
        ct.set_core_number(previous)


def _verify_yolov3(verify, model_name: str, width: float, size: int, cores: int, input_format: int) -> None:
    images = sample_images(size=size)
    model = yolov3(images, width)
    task = TaskReferences.load(REFERENCES).task(model_name, metric="detection_agreement",
                                                detections=lambda outputs: detect(outputs, size))
    with core_number(cores):
        verify(offline.with_input_format(model, images, input_format), offline.to_input_format(images, input_format),
               op=model_name, seed=SEED, task=task)


@pytest.mark.mlu_targets("mlu:offline", "mlu:cnml")
@pytest.mark.parametrize("cores, input_format", _params())
def test_yolov3(verify, cores: int, input_format: int) -> None:
    _verify_yolov3(verify, "yolov3_small", 0.25, 160, cores, input_format)


@pytest.mark.mlu_heavy
@pytest.mark.mlu_targets("mlu:offline", "mlu:cnml")
def test_yolov3_full_size(verify) -> None:
    _verify_yolov3(verify, "yolov3", 1.0, FULL_SIZE, 4, 0)
