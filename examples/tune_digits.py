"""A model script for `mluverify tune` (docs/tuning.md): the seeds' MNIST ``Net`` trained on
scikit-learn's digits, as the task suite trains it (``suites/networks/digits_task.py``),
calibrated on the training images and judged on the 899 test images.

    .venv/bin/mluverify tune examples/tune_digits.py --target mlu:cnnl --bound 0.003 --out tune_rel_mse
    .venv/bin/mluverify tune examples/tune_digits.py --target mlu:cnnl --task top1_agreement:1.0 --out tune_top1
"""
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "suites" / "networks"))
from digits_task import digits, trained_net  # noqa: E402

# the seed's Net applies Dropout2d to the 2-D output of fc1, which torch deprecates
warnings.filterwarnings("ignore", "dropout2d", UserWarning)
TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS = digits()


def model():
    return trained_net(TRAIN_IMAGES, TRAIN_LABELS)


def calibration_inputs():
    return [TRAIN_IMAGES]


def eval_inputs():
    return TEST_IMAGES


def eval_labels():
    return TEST_LABELS
