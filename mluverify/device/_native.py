"""The emulated MLU's C++ extension (``_native.cpp``): built once, loaded by ``import mluverify.device``.

torch's Python back-end API registers PrivateUse1 hooks that cannot provide a pinned-memory
allocator, and a device guard fixed at one device. The extension provides both (and two small
tensor helpers); it is built with ``torch.utils.cpp_extension`` and the machine's C++ compiler
into ``MLUVERIFY_NATIVE_DIR`` (default: ``mluverify/device/build/``) by the first
``import mluverify.device`` that finds it missing or older than its source (about 25 s;
concurrent builds wait on torch's build lock). ``make venv`` imports the device once for that.
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import torch

NAME = "mluverify_native"
SOURCE = Path(__file__).with_name("_native.cpp")
ENV_DIR = "MLUVERIFY_NATIVE_DIR"
# -O3: the numerics primitives' loops are vectorized (float adds and integer ops: the same bits).
CFLAGS = ["-O3"]


def build_dir() -> Path:
    return Path(os.environ.get(ENV_DIR) or Path(__file__).with_name("build"))


def library_path() -> Path:
    return build_dir() / f"{NAME}.so"


def _fingerprint() -> str:
    """What the built library depends on: its source, its flags and the torch it was compiled against."""
    digest = hashlib.sha256(SOURCE.read_bytes())
    digest.update(torch.__version__.encode())
    digest.update(" ".join(CFLAGS).encode())
    return digest.hexdigest()


def _stamp_path() -> Path:
    return build_dir() / f"{NAME}.fingerprint"


def is_current() -> bool:
    """Whether the library exists and was built from this source for this torch."""
    stamp = _stamp_path()
    return library_path().is_file() and stamp.is_file() and stamp.read_text() == _fingerprint()


def build(verbose: bool = False) -> Path:
    """Compile the extension (loading it into this process); returns the library's path."""
    directory = build_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RuntimeError(f"cannot create the MLU extension's build directory {directory}: {exc.strerror}; "
                           f"set {ENV_DIR} to a writable directory") from None
    # cpp_extension warns on import when the machine has no CUDA runtime: irrelevant here.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import cpp_extension

    try:
        cpp_extension.load(name=NAME, sources=[str(SOURCE)], build_directory=str(directory),
                           extra_cflags=CFLAGS, is_python_module=False, verbose=verbose)
    except (RuntimeError, OSError) as exc:
        raise RuntimeError(f"building the emulated MLU's C++ extension {SOURCE} failed (it needs a C++17 "
                           f"compiler, e.g. g++, and ninja): {exc}") from exc
    _stamp_path().write_text(_fingerprint())
    return library_path()


def load() -> None:
    """Load the extension into this process, building it first when it is missing or stale."""
    if hasattr(torch.ops.mluverify_native, "install"):
        return
    if is_current():
        torch.ops.load_library(str(library_path()))
    else:
        build()
