"""The seeds' MNIST flow judged by the results users care about: accuracy on a data set, and
top-1 agreement with the CPU.

The seeds' MNIST ``Net`` is trained briefly on scikit-learn's digits (``digits_task.py``), then
run as the quickstart runs it (float32, and int8 / int16 through calibrate -> checkpoint ->
load) on the emulated MLU over the 899 test images. Each case judges the output against the CPU
as usual, and its task metric against the reference registered for its dtype x quantization
(``task_references.toml``): below the threshold that file's error budget gives for 899 samples,
the case fails (``mluverify.core.task``).
"""
from __future__ import annotations

import pytest

from mluverify import TaskReferences

from digits_task import MODEL, REFERENCES, deployed, digits, one_thread, trained_net

PRECISIONS = (("float32", ""), ("float32", "int8"), ("float32", "int16"))
QUANT_BOUNDS = {"": None, "int8": 0.02, "int16": 0.003}  # as quantization/test_quantization.py: the documents' bounds


@pytest.fixture(scope="module")
def trained():
    """The data and the trained network, once per process."""
    train_images, train_labels, test_images, test_labels = digits()
    return trained_net(train_images, train_labels), train_images, test_images, test_labels


@pytest.mark.filterwarnings("ignore:dropout2d:UserWarning")  # the seed's Net applies Dropout2d to 2-D input
@pytest.mark.mlu_targets("mlu:cnnl")
@pytest.mark.parametrize("metric", ("accuracy", "top1_agreement"))
@pytest.mark.parametrize("dtype, quant", PRECISIONS, ids=[f"{d}-{q or 'float'}" for d, q in PRECISIONS])
def test_digits_task(verify, trained, dtype: str, quant: str, metric: str) -> None:
    net, train_images, test_images, test_labels = trained
    with one_thread():
        runnable = deployed(net, train_images, quant)
    labels = test_labels if metric == "accuracy" else None  # agreement: the CPU's top-1 is the label
    task = TaskReferences.load(REFERENCES).task(MODEL, dtype, quant, metric=metric, labels=labels)
    with one_thread():
        verify(runnable, test_images, op=MODEL, dtype=dtype, quant=quant, tolerance=QUANT_BOUNDS[quant], seed=0,
               task=task)
