"""Offline models: a fused model saved to a file and run without the fusion compiler.

The seeds (001, 003) run inference three ways, kept in step: online layer by layer, online
fused, and offline: "离线推理指序列化已编译好的算子到离线文件，生成离线模型" (offline inference
serializes the compiled ops to an offline file, the offline model). Two ways to save one:

- ``save_as_cambricon("name")`` (the seeds' ``ct.save_as_cambricon``) before a fused run
  (``torch.jit.trace`` + ``.to("mlu")``), ``save_as_cambricon("")`` after: the run's fused
  program is saved as ``name.cambricon``;
- ``save(model, example_inputs, path)``; ``input_format=1`` / ``2`` (the seeds' genoff.py
  parameter) saves an image model for RGBA / ARGB input (``with_input_format``; the demo's
  pre-processing is ``to_input_format``).

``load(path)`` gives a module that runs the saved fusion groups exactly as ``mlu:cnml`` does
(the target ``mlu:offline`` saves and loads each case), in a process that needs neither the
model's code nor the fusion compiler. See docs/fusion.md ("Offline models").
"""
from __future__ import annotations

from mluverify.device.fusion.errors import OfflineModelError
from mluverify.device.offline._artifact import Manifest
from mluverify.device.offline._input_format import to_input_format, with_input_format
from mluverify.device.offline._load import OfflineModel, load
from mluverify.device.offline._save import save, save_as_cambricon, saving_as

__all__ = ["Manifest", "OfflineModel", "OfflineModelError", "load", "save", "save_as_cambricon", "saving_as",
           "to_input_format", "with_input_format"]
