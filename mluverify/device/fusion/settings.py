"""What fusion does, read from the environment and the flags: fusible set, forced fallbacks,
debug output, segmentation, LSTM fusion, the fusion compiler's log.

The environment variables follow Cambricon CATCH:

- ``DEBUG_FORCED_FALLBACK_OPS``: comma-separated full op names (``aten::add.Tensor``) that never
  join a fusion group; they run as per-op (CNNL) device kernels instead.
- ``FUSED_KERNEL_DEBUG``: ``cpu`` or ``cnnl`` saves every group's outputs beside a reference run
  (see ``mluverify.device.fusion.debug``); ``FUSED_KERNEL_DEBUG_DIR`` says where (default: cwd).
- ``TORCH_MIN_CNLOG_LEVEL``: ``-1`` prints the partitioned graph.
- ``DISABLE_MLU_FUSION``: ``1`` disables graph segmentation (seed 003): fused calls run layer by
  layer, with that reason; ``0`` or unset: segmentation on.
- ``MM_CPP_MIN_LOG_LEVEL``: the fusion compiler's (MagicMind's) log level (seed 002), 0 INFO,
  1 WARNING, 2 ERROR, 3 FATAL, for logger ``mluverify.device.fusion``; unset: that logger follows
  ``TORCH_MIN_CNLOG_LEVEL`` like the rest of the device.

and seed 002's ``torch.backends.mlufusion.set_flags(False)`` / ``.enabled`` (default True) says
whether LSTM / GRU cells run as one fused op: off, each cell runs as its separate ops.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import torch

from mluverify.device._contextvars import block
from mluverify.device.fusion.fusible import fusible_ops
from mluverify.errors import InvalidArgument, valid_choice

DEBUG_MODES = ("", "cpu", "cnnl")
DISABLE_FUSION_ENV = "DISABLE_MLU_FUSION"
MM_LOG_ENV = "MM_CPP_MIN_LOG_LEVEL"
MM_LOG_LEVELS = {0: logging.INFO, 1: logging.WARNING, 2: logging.ERROR, 3: logging.CRITICAL}
FUSION_LOGGER = "mluverify.device.fusion"
SEGMENTATION_DISABLED = f"{DISABLE_FUSION_ENV}=1: graph segmentation is disabled, every op runs layer by layer"


def op_name(target: object) -> str:
    """The full name of an fx call target as users write it: ``aten::add.Tensor``, ``aten::relu``.

    Default overloads drop their ``.default`` suffix, as ``OpOverload.name()`` does; Python
    callables (``operator.getitem``) are named ``module::qualname``.
    """
    if isinstance(target, torch._ops.OpOverload):
        return target.name()
    module = getattr(target, "__module__", None) or "builtins"
    return f"{module.lstrip('_')}::{getattr(target, '__qualname__', repr(target))}"


def normalize_op_name(name: str) -> str:
    """``aten::relu.default`` -> ``aten::relu``; other names unchanged (whitespace stripped)."""
    name = name.strip()
    return name[: -len(".default")] if name.endswith(".default") else name


def resolves_to_op(name: str) -> bool:
    """Whether ``name`` names an existing op overload (``namespace::op[.overload]``)."""
    namespace, sep, rest = name.partition("::")
    op, _, overload = rest.partition(".")
    if not (sep and namespace and op):
        return False
    try:
        packet = getattr(getattr(torch.ops, namespace), op)
        getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        return False
    return True


@dataclass(frozen=True)
class FusionSettings:
    """One resolution of the fusion environment and flags.

    ``fusible`` is already less ``forced_fallback``; ``debug`` is one of ``DEBUG_MODES``;
    ``segmentation``: False under ``DISABLE_MLU_FUSION=1``; ``lstm_fusion``:
    ``torch.backends.mlufusion.enabled``; ``mm_log_level``: ``MM_CPP_MIN_LOG_LEVEL`` (None: unset).
    """

    fusible: frozenset[str]
    forced_fallback: frozenset[str] = frozenset()
    debug: str = ""
    debug_dir: Path = Path(".")
    print_graph: bool = False
    segmentation: bool = True
    lstm_fusion: bool = True
    mm_log_level: int | None = None

    def __post_init__(self) -> None:
        if self.debug not in DEBUG_MODES:
            raise valid_choice("FUSED_KERNEL_DEBUG", self.debug, [m for m in DEBUG_MODES if m])

    def disabled_reason(self) -> str | None:
        """Why fused calls must run layer by layer under these settings (None: they may fuse)."""
        return None if self.segmentation else SEGMENTATION_DISABLED


def parse_forced_fallback(text: str) -> frozenset[str]:
    """Split ``DEBUG_FORCED_FALLBACK_OPS``; warn naming every entry that is not an existing op."""
    names = frozenset(normalize_op_name(n) for n in text.split(",") if n.strip())
    unknown = sorted(n for n in names if not resolves_to_op(n))
    if unknown:
        warnings.warn(
            f"DEBUG_FORCED_FALLBACK_OPS names unknown ops {', '.join(map(repr, unknown))}; "
            "write full names such as 'aten::add.Tensor'",
            stacklevel=3,
        )
    return names


def parse_log_level(text: str) -> int:
    """``TORCH_MIN_CNLOG_LEVEL`` as an int (0 when unset); InvalidArgument when not an integer."""
    try:
        return int(text or 0)
    except ValueError:
        raise InvalidArgument(f"TORCH_MIN_CNLOG_LEVEL must be an integer such as -1 or 0, got {text!r}") from None


def parse_segmentation(text: str) -> bool:
    """``DISABLE_MLU_FUSION`` -> whether graph segmentation is on; InvalidArgument lists 0 and 1."""
    value = text.strip()
    if value not in ("", "0", "1"):
        raise InvalidArgument(f"{DISABLE_FUSION_ENV}={text!r} is not a valid value; valid: '0' (segmentation on, "
                              f"the default), '1' (off: everything runs layer by layer)")
    return value != "1"


def parse_mm_log_level(text: str) -> int | None:
    """``MM_CPP_MIN_LOG_LEVEL`` as 0-3 (None when unset); InvalidArgument lists the valid levels."""
    if not text.strip():
        return None
    try:
        level = int(text)
    except ValueError:
        level = None
    if level not in MM_LOG_LEVELS:
        valid = ", ".join(f"{k} ({logging.getLevelName(v)})" for k, v in MM_LOG_LEVELS.items())
        raise InvalidArgument(f"{MM_LOG_ENV}={text!r} is not a valid log level; valid: {valid}")
    return level


def settings_from_env(fusible: Iterable[str], env: Mapping[str, str] | None = None) -> FusionSettings:
    """Resolve the fusion settings for the ``fusible`` names, ``env`` (os.environ)
    and the ``torch.backends.mlufusion`` flag."""
    env = os.environ if env is None else env
    forced = parse_forced_fallback(env.get("DEBUG_FORCED_FALLBACK_OPS", ""))
    return FusionSettings(
        fusible=frozenset(normalize_op_name(n) for n in fusible) - forced,
        forced_fallback=forced,
        debug=env.get("FUSED_KERNEL_DEBUG", "").strip().lower(),
        debug_dir=Path(env.get("FUSED_KERNEL_DEBUG_DIR", ".")),
        print_graph=parse_log_level(env.get("TORCH_MIN_CNLOG_LEVEL", "")) <= -1,
        segmentation=parse_segmentation(env.get(DISABLE_FUSION_ENV, "")),
        lstm_fusion=lstm_fusion_enabled(),
        mm_log_level=parse_mm_log_level(env.get(MM_LOG_ENV, "")),
    )


def current_settings(env: Mapping[str, str] | None = None) -> FusionSettings:
    """The settings of this process: the device's fusible ops and those the plugins handed to it
    add (``mluverify.device.fusion.fusible``); applies ``MM_CPP_MIN_LOG_LEVEL`` to the fusion
    compiler's logger."""
    settings = settings_from_env(fusible_ops(), env)
    _apply_mm_log_level(settings.mm_log_level)
    return settings


def _apply_mm_log_level(level: int | None) -> None:
    logger = logging.getLogger(FUSION_LOGGER)
    wanted = logging.NOTSET if level is None else MM_LOG_LEVELS[level]
    if logger.level != wanted:
        logger.setLevel(wanted)


# -- torch.backends.mlufusion (seed 002) ------------------------------------------------------
class _LstmFusion:
    """The flag outside any ``flags()`` block (process-wide like torch's own backend flags, so
    autograd's device thread sees it too)."""

    default = True


_LSTM_FUSION: contextvars.ContextVar[bool | None] = contextvars.ContextVar("mluverify_lstm_fusion", default=None)


def lstm_fusion_enabled() -> bool:
    """``torch.backends.mlufusion.enabled``: whether LSTM / GRU cells run as one fused op."""
    block = _LSTM_FUSION.get()
    return _LstmFusion.default if block is None else block


def _checked_flag(enabled: object) -> bool:
    if not isinstance(enabled, bool):
        raise InvalidArgument(f"torch.backends.mlufusion: enabled must be True or False, got {enabled!r} "
                              f"(type={type(enabled).__name__})")
    return enabled


def set_flags(enabled: bool) -> bool:
    """``torch.backends.mlufusion.set_flags(False)``: LSTM / GRU fusion on or off for the rest of
    the process; returns the previous value."""
    previous, _LstmFusion.default = _LstmFusion.default, _checked_flag(enabled)
    return previous


def flags(enabled: bool) -> contextlib.AbstractContextManager[bool]:
    """``with torch.backends.mlufusion.flags(enabled=False):`` for one block (and its queued ops)."""
    return block(_LSTM_FUSION, _checked_flag(enabled))


class MluFusionModule(types.ModuleType):
    """``torch.backends.mlufusion``: ``enabled`` (read / assign), ``set_flags``, ``flags``."""

    set_flags = staticmethod(set_flags)
    flags = staticmethod(flags)

    @property
    def enabled(self) -> bool:
        return lstm_fusion_enabled()

    @enabled.setter
    def enabled(self, value: bool) -> None:
        set_flags(value)


def install_backend_module() -> None:
    """Make ``torch.backends.mlufusion`` exist (importing the device does)."""
    if not isinstance(getattr(torch.backends, "mlufusion", None), MluFusionModule):
        module = MluFusionModule("torch.backends.mlufusion", MluFusionModule.__doc__)
        sys.modules[module.__name__] = module
        torch.backends.mlufusion = module


install_backend_module()
