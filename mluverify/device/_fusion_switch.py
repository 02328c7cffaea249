"""Whether traced modules run fused on the device (``mlu_model._jit_override_can_fuse_on_mlu``;
``set_cnml_enabled`` sets it too). A module of its own so that the training API and the fusion
runtime read it without importing ``mlu_model``, the API face that re-exports them."""
from __future__ import annotations


class _Switch:
    can_fuse: bool = True


def _jit_override_can_fuse_on_mlu(flag: bool) -> None:
    """Enable (default) or disable fused (MagicMind-like) execution of traced modules."""
    _Switch.can_fuse = bool(flag)


def _jit_can_fuse_on_mlu() -> bool:
    return _Switch.can_fuse
