"""Emulated-MLU kernels, by ATen op name and execution mode.

The device installs its built-in set itself (``mluverify.device.builtin_kernels``); the plugins
of a run handed to it (``mluverify.device.use_plugins``) add or override kernels through the
hook ``mluverify_device_kernels(registry)``. Later registrations of the same op and mode win.

Kernel calling convention
-------------------------
A kernel registered for ``"aten::<op>.<overload>"`` is called with exactly the arguments of
that ATen overload (positional as given by the caller, keyword-only by name), except that

* every ``mlu`` tensor (also inside tensor lists) arrives as a **CPU tensor aliasing the device
  memory** (same size, stride, storage offset and dtype: ``mluverify.device.as_cpu``);
* a ``device=`` argument naming ``mlu`` arrives as ``torch.device("cpu")``.

It returns what the overload returns, as CPU tensors:

* a freshly computed tensor is adopted as the ``mlu`` result without a copy, so do not return
  (a view of) an input for an op whose schema returns a new tensor;
* in-place overloads write into the aliasing argument and return it; the caller gets the
  original ``mlu`` tensor back and its storage's write generation is bumped;
* ``out=`` arguments arrive as a fresh empty CPU tensor of the out dtype (CPU ``out=`` ops
  resize it, which must not reallocate device memory); the device ``out`` tensor is then
  resized like a CPU one and filled from it;
* view overloads return a CPU view of the aliasing argument; the caller gets an ``mlu`` view.

Numerics: a kernel reads the active profile with ``mluverify.device.numerics.active_profile()``
and rounds with the helpers there; it must be deterministic. Inputs with a complex dtype never
reach a kernel (they run as counted CPU fallbacks). Other engineers may call kernels directly
on CPU tensors: ``registry.kernel("aten::convolution_overrideable", "cnnl")(x, w, ...)``.
"""
from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass
from typing import Callable, Iterator

from mluverify.errors import InvalidArgument, valid_choice

Kernel = Callable[..., object]
MODES: tuple[str, ...] = ("cnnl", "cnml")
DEFAULT_MODE = "cnnl"


def canonical_op_name(op_name: str) -> str:
    """``"aten::add.Tensor"`` for ``"aten::add.Tensor"``, ``"add.Tensor"``; ``.default`` dropped."""
    if not isinstance(op_name, str) or not op_name:
        raise InvalidArgument(f"op name must be a non-empty string like 'aten::add.Tensor', got {op_name!r}")
    name = op_name if "::" in op_name else f"aten::{op_name}"
    return name.removesuffix(".default")


def resolve_overload(op_name: str):
    """The ``torch.ops`` overload for a canonical op name; InvalidArgument if torch lacks it."""
    import torch

    namespace, _, rest = op_name.partition("::")
    packet_name, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), packet_name)
        return getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        raise InvalidArgument(
            f"no ATen operator {op_name!r}; write 'namespace::op.overload', e.g. 'aten::add.Tensor'"
        ) from None


class KernelRegistry:
    """Kernels keyed by (canonical op name, mode); the last registration of a key wins."""

    def __init__(self) -> None:
        self._kernels: dict[tuple[str, str], Kernel] = {}

    def register(self, op_name: str, fn: Kernel, mode: str = DEFAULT_MODE) -> None:
        """Register ``fn`` for ``op_name`` (e.g. ``"aten::add.Tensor"``) in ``mode``."""
        _check_mode(mode)
        if not callable(fn):
            raise InvalidArgument(f"kernel for {op_name!r} must be callable, got {fn!r} (type={type(fn).__name__})")
        name = canonical_op_name(op_name)
        resolve_overload(name)
        self._kernels[(name, mode)] = fn

    def kernel(self, op_name: str, mode: str = DEFAULT_MODE) -> Kernel | None:
        """The kernel for ``op_name`` in ``mode``, else its ``cnnl`` kernel, else None."""
        name = canonical_op_name(op_name)
        return self._kernels.get((name, mode)) or self._kernels.get((name, DEFAULT_MODE))

    def op_names(self) -> set[str]:
        return {name for name, _ in self._kernels}

    def by_mode(self, op_name: str) -> dict[str, Kernel]:
        """Mode -> kernel for one op."""
        name = canonical_op_name(op_name)
        return {mode: fn for (n, mode), fn in self._kernels.items() if n == name}

    def __contains__(self, op_name: str) -> bool:
        return bool(self.by_mode(op_name))

    def __len__(self) -> int:
        return len(self._kernels)


# The mode of a ``kernel_mode()`` block: per thread and asyncio task, like any ContextVar.
_block_mode: contextvars.ContextVar[str | None] = contextvars.ContextVar("mluverify_kernel_mode", default=None)


@dataclass
class _DefaultMode:
    """The process-wide default mode (``set_default_mode``). ContextVars do not reach the
    threads autograd runs a device's backward ops on, so a script-wide switch (torch_mlu's
    ``set_cnml_enabled``) needs one value every thread reads."""

    mode: str = DEFAULT_MODE


_default = _DefaultMode()


def active_mode() -> str:
    """The mode whose kernels run now: the innermost ``kernel_mode()`` block of this context,
    else the process-wide default."""
    return _block_mode.get() or _default.mode


def set_default_mode(mode: str) -> None:
    """Make ``mode`` the process-wide default: what every thread (autograd's backward threads
    included) runs outside a ``kernel_mode()`` block."""
    _check_mode(mode)
    _default.mode = mode


@contextlib.contextmanager
def kernel_mode(mode: str) -> Iterator[str]:
    """Run the ``with`` block, in this thread or task, with the kernels of ``mode`` (ops without
    one use ``cnnl``). Backward ops that autograd runs on its own thread see the default mode."""
    _check_mode(mode)
    token = _block_mode.set(mode)
    try:
        yield mode
    finally:
        _block_mode.reset(token)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise valid_choice("kernel mode", mode, MODES)
