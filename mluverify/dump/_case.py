"""Re-run one failing case under the Dumper (``--mlu-dump=fail``)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from mluverify.dump._dumper import Dumper


def dump_case(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any],
              outdir: str | os.PathLike[str]) -> Path:
    """Run ``fn(*args, **kwargs)`` under ``Dumper(outdir, level=1, use_cpu=True)``.

    Returns the dump directory (``outdir``, or ``outdir_1``... if it exists). An exception
    raised by ``fn`` propagates after the dump of the ops that ran is complete.
    """
    with Dumper(outdir, level=1, use_cpu=True) as dumper:
        fn(*args, **kwargs)
    return dumper.path
