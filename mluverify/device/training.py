"""The seeds' training API on the emulated MLU (seed 001, "训练快速入门").

Reached as ``torch_mlu.core.mlu_model.set_cnml_enabled`` / ``.to`` / ``.manual_seed`` (re-exported
by ``mluverify.device.mlu_model``):

* ``set_cnml_enabled(flag)``: ``False`` selects training (the CNNL library: ops run layer by
  layer with the CNNL kernels, traced modules are not fused); ``True`` selects inference (CNML:
  its kernels for eager ops, fusion allowed).
* ``to(optimizer, device)``: moves an optimizer's state (momentum buffers, Adam moments) onto
  the device its parameters live on, so ``optimizer.step()`` runs there.
* ``manual_seed(seed)`` and friends: the device's own random generator, which draws dropout
  masks on ``mlu``. It is separate from the CPU's (device random ops never advance
  ``torch.default_generator``) but uses the CPU's algorithm, so a CPU run seeded alike draws the
  same masks: training on ``mlu`` can be compared with training on the CPU step by step.

See docs/training.md.
"""
from __future__ import annotations

from typing import Any

import torch

from mluverify.device import _fusion_switch, kernels
from mluverify.errors import InvalidArgument

DEVICE_TYPES: tuple[str, ...] = ("cpu", "mlu")


# ---------------------------------------------------------------------------------------------
# set_cnml_enabled
# ---------------------------------------------------------------------------------------------


def set_cnml_enabled(flag: bool) -> None:
    """``False``: training mode (CNNL kernels, layer by layer, no fusion); ``True``: inference
    (CNML kernels for eager ops where they differ, fusion allowed). For the whole process:
    autograd's backward threads see it too.

    The seeds: "``ct.set_cnml_enabled(False)`` 设置为运行训练模式，该设置必须添加".
    """
    if not isinstance(flag, bool):
        raise InvalidArgument(f"set_cnml_enabled(flag): 'flag' must be True (inference, CNML) or False "
                              f"(training, CNNL layer by layer); got {flag!r} (type={type(flag).__name__})")
    kernels.set_default_mode("cnml" if flag else "cnnl")
    # Fusion is CNML's: without it, traced modules run op by op on the CNNL kernels.
    _fusion_switch._jit_override_can_fuse_on_mlu(flag)


def get_cnml_enabled() -> bool:
    """Whether inference mode (CNML, fusion) is selected; ``set_cnml_enabled(False)`` clears it."""
    return _fusion_switch._jit_can_fuse_on_mlu()


# ---------------------------------------------------------------------------------------------
# ct.to(optimizer, device)
# ---------------------------------------------------------------------------------------------


def to(optimizer: torch.optim.Optimizer, device: Any) -> torch.optim.Optimizer:
    """Move ``optimizer``'s state onto ``device`` (where its parameters must already be); returns it.

    The seeds: ``optimizer = ct.to(optimizer_orig, torch.device("mlu"))``. State tensors follow
    torch's own loading policy (``Optimizer.load_state_dict``): floating state takes each
    parameter's device and dtype, step counters stay where torch keeps them.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise InvalidArgument(
            f"ct.to(optimizer, device): 'optimizer' must be a torch.optim.Optimizer such as "
            f"optim.SGD(model.parameters(), lr); got {optimizer!r} (type={type(optimizer).__name__}). "
            "Move models and tensors with .to(ct.mlu_device()) instead")
    target = _device_of(device)
    for group_index, group in enumerate(optimizer.param_groups):
        for param_index, param in enumerate(group["params"]):
            if param.device.type != target.type:
                raise InvalidArgument(
                    f"ct.to(optimizer, {str(target)!r}): parameter {param_index} of param group "
                    f"{group_index} is on {param.device}; move the model to {target.type} first "
                    f"(net.to(ct.mlu_device())) and build the optimizer from its parameters")
    optimizer.load_state_dict(optimizer.state_dict())
    return optimizer


def _device_of(device: Any) -> torch.device:
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        parsed = None
    if parsed is None or parsed.type not in DEVICE_TYPES:
        raise InvalidArgument(f"ct.to(optimizer, device): 'device' must be one of {DEVICE_TYPES} "
                              f"(e.g. torch.device('mlu') or ct.mlu_device()); got {device!r}")
    return parsed


# ---------------------------------------------------------------------------------------------
# the device's random generator
# ---------------------------------------------------------------------------------------------


class _DeviceRandom:
    """The emulated device's generator. Device state, like torch's own default generators: one
    per process, read by the kernels on whichever thread runs them (autograd's included)."""

    generator = torch.Generator()  # CPU algorithm (mt19937), torch's default seed


def default_generator() -> torch.Generator:
    """The generator device random ops draw from (a CPU ``torch.Generator`` object)."""
    return _DeviceRandom.generator


def manual_seed(seed: int) -> None:
    """Seed the device's generator (``torch.manual_seed`` seeds it too, through ``torch.mlu``)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidArgument(f"manual_seed(seed): 'seed' must be an int; got {seed!r} (type={type(seed).__name__})")
    _DeviceRandom.generator.manual_seed(seed)


def initial_seed() -> int:
    return _DeviceRandom.generator.initial_seed()


def get_rng_state() -> torch.Tensor:
    """The device generator's state (a CPU ``uint8`` tensor, as ``torch.cuda.get_rng_state``)."""
    return _DeviceRandom.generator.get_state()


def set_rng_state(state: torch.Tensor) -> None:
    _DeviceRandom.generator.set_state(state)
