"""Tuning by a task metric: the seeds' MNIST ``Net`` trained on scikit-learn's digits
(``suites/networks/digits_task.py``), int8 on ``mlu:cnnl``. By rel_mse at the cnnl policy's
0.3 % it needs layers kept in int16; by top-1 agreement with the float model (the task gate,
reference 1.0: every test image) it needs nothing. Both facts are computed here directly,
outside the tuner, and the tuner must agree with them.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "suites" / "networks"))
from digits_task import deployed, digits, top1, trained_net  # noqa: E402

from mluverify import Task  # noqa: E402
from mluverify.judge import rel_mse  # noqa: E402
from mluverify.tune import tune_inference  # noqa: E402

CNNL_BOUND = 0.003
# the seed's Net applies Dropout2d to the 2-D output of fc1, which torch deprecates
pytestmark = pytest.mark.filterwarnings("ignore:dropout2d:UserWarning")


@pytest.fixture(scope="module")
def digits_net():
    import mluverify.device  # noqa: F401  (registers "mlu")

    train_images, train_labels, test_images, _ = digits()
    return trained_net(train_images, train_labels), train_images, test_images


def test_top1_agreement_needs_no_change_where_rel_mse_needs_some(digits_net):
    net, train_images, test_images = digits_net
    int8 = deployed(net, train_images, "int8")
    with torch.no_grad():
        device_logits = int8.to("mlu")(test_images.to("mlu")).cpu()
        cpu_logits = net(test_images)
    # computed directly: every test image keeps its top-1 class, yet the logits miss 0.3 %
    assert torch.equal(top1(int8, test_images, "mlu"), top1(net, test_images))
    assert rel_mse(device_logits.double().numpy().ravel(), cpu_logits.double().numpy().ravel()) > CNNL_BOUND

    by_task = tune_inference(net, [train_images], test_images, mode="layer", budget=8,
                             task=Task("top1_agreement", reference=1.0))
    assert by_task.search.status == "within-bound" and by_task.changes == {}
    assert by_task.message.startswith("already within the bound as deployed (1 - top1_agreement 0 <= 0)")
    by_rel_mse = tune_inference(net, [train_images], test_images, mode="layer", budget=8, bound=CNNL_BOUND)
    assert by_rel_mse.search.status == "tuned" and by_rel_mse.changes


def test_too_few_samples_for_the_task_gate_is_an_error_naming_how_many(digits_net):
    from mluverify.errors import InvalidArgument

    net, train_images, test_images = digits_net
    with pytest.raises(InvalidArgument, match=r"10 samples are too few for its error budget.*at least \d+ are needed"):
        tune_inference(net, [train_images], test_images[:10], mode="layer",
                       task=Task("top1_agreement", reference=0.99))
