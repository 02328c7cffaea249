"""The offline model file: a zip holding ``manifest.json`` and ``program.pt2``.

``program.pt2`` is ``torch.export.save`` of the captured program (ATen and ``mluverify::``
quantized ops, the weights and quantization parameters as its state); the manifest says who
wrote it, the numerics it was built for and which of the program's ops form each fusion group.
Files are written to a temporary name first and renamed, so a failed save never destroys an
existing model.
"""
from __future__ import annotations

import json
import os
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

from mluverify.device.fusion.errors import OfflineModelError

FORMAT = 1
MANIFEST, PROGRAM = "manifest.json", "program.pt2"


@dataclass(frozen=True)
class Manifest:
    """What an offline model holds besides its program.

    ``numerics``: the device's numerics settings it was saved under (core version, core number,
    matmul precision: ``mluverify.device.numerics.NumericsSettings``), which it runs under.
    ``groups``: for each fusion group ``MLUFusionGroup{i}``, the indices of its ops among the
    program's ``call_function`` nodes (graph order); ``ops``: every such node's op name, to
    check the program read back is the one the groups were cut from. ``input_format``: the
    channel order its image input was saved for (0 RGB: as given, 1 RGBA, 2 ARGB).
    """

    model: str
    mluverify_version: str
    torch_version: str
    numerics: dict
    groups: tuple[tuple[int, ...], ...]
    ops: tuple[str, ...]
    format: int = FORMAT
    input_format: int = 0


def write(path: Path, manifest: Manifest, program: bytes) -> Path:
    """Write the model file at ``path`` (replaced whole, never half-written)."""
    partial = path.with_name(path.name + ".partial")
    try:
        with zipfile.ZipFile(partial, "w") as archive:
            archive.writestr(MANIFEST, json.dumps(asdict(manifest), indent=1))
            archive.writestr(PROGRAM, program)
        os.replace(partial, path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise OfflineModelError(f"cannot write offline model {str(path)!r}: {exc.strerror or exc}") from None
    return path


def read(path: Path, version: str) -> tuple[Manifest, bytes]:
    """The manifest and program bytes of the model file at ``path``, written by mluverify
    ``version`` (this one): OfflineModelError naming the file otherwise."""
    saved_by = "an unknown version"
    try:
        with zipfile.ZipFile(path) as archive:
            fields = json.loads(archive.read(MANIFEST))
            saved_by = f"mluverify {fields.get('mluverify_version', '?')}"
            _check_version(path, fields, version)
            manifest = Manifest(**{**fields, "groups": tuple(map(tuple, fields["groups"])), "ops": tuple(fields["ops"])})
            return manifest, archive.read(PROGRAM)
    except FileNotFoundError:
        raise OfflineModelError(f"offline model {str(path)!r} does not exist") from None
    except OfflineModelError:
        raise
    except (OSError, zipfile.BadZipFile, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise corrupted(path, f"{type(exc).__name__}: {exc}", saved_by, version) from None


def corrupted(path: Path, detail: str, saved_by: str, version: str) -> OfflineModelError:
    return OfflineModelError(
        f"offline model {str(path)!r} is corrupted or not an offline model ({detail}); "
        f"saved by {saved_by}, read by mluverify {version}"
    )


def _check_version(path: Path, fields: dict, version: str) -> None:
    saved = fields.get("mluverify_version")
    if saved != version or fields.get("format") != FORMAT:
        raise OfflineModelError(
            f"offline model {str(path)!r} was saved by mluverify {saved} (format {fields.get('format')}); "
            f"this is mluverify {version} (format {FORMAT}): save the model again with this version"
        )
