"""An example mluverify plugin: one metric, one tolerance, one back end."""
from __future__ import annotations

import numpy as np

from mluverify import Tolerance, hookimpl
from mluverify.plugins.torch_devices import TorchDeviceBackend


@hookimpl
def mluverify_metrics():
    return {"mean_abs_error": lambda actual, expected: float(np.abs(actual - expected).mean())}


@hookimpl
def mluverify_tolerance(case):
    if case.op == "example_noisy_op":
        return Tolerance("rel_mse", 0.05, "example-plugin")
    return None


@hookimpl
def mluverify_add_backends(registry):
    registry.add(TorchDeviceBackend("halfcpu", "cpu", compute_dtype="bfloat16"))
