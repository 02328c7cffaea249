"""What fusion does, read from the environment: fusible set, forced fallbacks, debug output.

The environment variables follow Cambricon CATCH:

- ``DEBUG_FORCED_FALLBACK_OPS``: comma-separated full op names (``aten::add.Tensor``) that never
  join a fusion group; they run as per-op (CNNL) device kernels instead.
- ``FUSED_KERNEL_DEBUG``: ``cpu`` or ``cnnl`` saves every group's outputs beside a reference run
  (see ``mluverify.device.fusion.debug``); ``FUSED_KERNEL_DEBUG_DIR`` says where (default: cwd).
- ``TORCH_MIN_CNLOG_LEVEL``: ``-1`` prints the partitioned graph.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import torch

from mluverify.errors import InvalidArgument, valid_choice

DEBUG_MODES = ("", "cpu", "cnnl")


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
    """One resolution of the fusion environment.

    ``fusible`` is already less ``forced_fallback``; ``debug`` is one of ``DEBUG_MODES``.
    """

    fusible: frozenset[str]
    forced_fallback: frozenset[str] = frozenset()
    debug: str = ""
    debug_dir: Path = Path(".")
    print_graph: bool = False

    def __post_init__(self) -> None:
        if self.debug not in DEBUG_MODES:
            raise valid_choice("FUSED_KERNEL_DEBUG", self.debug, [m for m in DEBUG_MODES if m])


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


def settings_from_env(fusible: Iterable[str], env: Mapping[str, str] | None = None) -> FusionSettings:
    """Resolve the fusion settings for the plugin-given ``fusible`` names and ``env`` (os.environ)."""
    env = os.environ if env is None else env
    forced = parse_forced_fallback(env.get("DEBUG_FORCED_FALLBACK_OPS", ""))
    return FusionSettings(
        fusible=frozenset(normalize_op_name(n) for n in fusible) - forced,
        forced_fallback=forced,
        debug=env.get("FUSED_KERNEL_DEBUG", "").strip().lower(),
        debug_dir=Path(env.get("FUSED_KERNEL_DEBUG_DIR", ".")),
        print_graph=parse_log_level(env.get("TORCH_MIN_CNLOG_LEVEL", "")) <= -1,
    )


def current_settings(env: Mapping[str, str] | None = None) -> FusionSettings:
    """The settings of this process: fusible ops from the hook ``mluverify_fusible_ops``."""
    from mluverify.plugin_manager import call_hook, get_plugin_manager

    answers = call_hook(get_plugin_manager(), "mluverify_fusible_ops")
    return settings_from_env([name for answer in answers for name in answer], env)
