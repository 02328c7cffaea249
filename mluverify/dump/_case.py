"""Re-run one failing case under the Dumper (``--mlu-dump=fail``)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mluverify.dump._dumper import Dumper
from mluverify.dump._groups import fused_kernel_debug

# Where a dump keeps the fusion groups' outputs of a fused run (``FUSED_KERNEL_DEBUG=cpu``'s files).
FUSED_GROUPS = "fused_groups"


def dump_case(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
              outdir: str | os.PathLike[str]) -> Path:
    """Run ``fn(*args, **kwargs)`` under ``Dumper(outdir, level=1, use_cpu=True)``, then once
    more with ``FUSED_KERNEL_DEBUG=cpu`` saving into ``<dump>/fused_groups/`` what each fusion
    group computed beside its own graph on the CPU: a fused run cannot be captured under the
    Dumper's modes (it runs layer by layer there), so its groups show only this way. Nothing is
    saved there when no group runs (a target that does not fuse).

    Returns the dump directory (``outdir``, or ``outdir_1``... if it exists). An exception
    raised by ``fn`` propagates after the dump of the ops that ran is complete.
    """
    with Dumper(outdir, level=1, use_cpu=True) as dumper:
        fn(*args, **kwargs)
    with fused_kernel_debug(dumper.path / FUSED_GROUPS):
        fn(*args, **kwargs)
    return dumper.path
