"""Run directories: a new run is built beside the previous one and swapped in only when it
recorded something.

For the report directory ``D`` of a run:

- ``D.lock`` is held (``flock``) while the run executes: a second run into ``D`` refuses to start;
- records and reports go to ``D.running`` (pytest-xdist workers are given that path);
- at the end, if any comparison was recorded, ``D.running`` becomes ``D`` and the previous ``D``
  becomes ``D.prev`` (an older ``D.prev`` is removed): one atomic exchange where the system
  has ``renameat2`` (Linux), two renames elsewhere. A run that recorded nothing removes
  ``D.running`` and leaves ``D`` as it was;
- a run killed before its end leaves ``D.running`` with every record it wrote; the next run
  moves it to ``D.interrupted-<run id>`` (``mluverify report`` merges and reports it) and says so.
  A run that finished but could not write its reports or be swapped in (a full disk) leaves it
  too: it becomes ``D.unreported-<run id>``, and the next run says that instead.

Everything that could stop the swap at the end (a foreign or read-only previous run, an
unwritable parent) is checked when the directory is claimed, before any test runs.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from mluverify.errors import RecordsError
from mluverify.report.records import META_FILE, RECORDS_FILE, SHARD_DIR, read_metadata


class RunDirectoryBusy(RecordsError):
    """Another run holds the report directory."""


@dataclass
class RunDirectory:
    """The report directory ``path`` of one run, claimed with ``claim()``."""

    path: Path
    notes: list[str] = field(default_factory=list)  # what claiming did that the user should know
    _lock_fd: int | None = field(default=None, repr=False)

    @property
    def staging(self) -> Path:
        return self.path.with_name(self.path.name + ".running")

    @property
    def previous(self) -> Path:
        return self.path.with_name(self.path.name + ".prev")

    @property
    def lock_path(self) -> Path:
        return self.path.with_name(self.path.name + ".lock")

    def claim(self) -> Path:
        """Take the lock, check that the run can be swapped in at its end, and make a fresh
        staging directory; returns it. RecordsError (RunDirectoryBusy) names what stops the run."""
        self._check_target()
        _mkdir(self.path.parent, "the report directory's parent")
        self._lock_fd = _acquire(self.lock_path, self.path)
        try:
            for old in (self.path, self.previous):
                _check_removable(old)
            self._set_aside_left_over_run()
            _mkdir(self.staging, "the run's staging directory")
        except BaseException:
            self.release()
            raise
        return self.staging

    def publish(self) -> Path:
        """Swap the finished staging directory in as ``path``; the previous run becomes ``prev``."""
        if self.previous.exists():
            _remove(self.previous)
        try:
            if not self.path.exists():
                os.rename(self.staging, self.path)
            elif _exchange(self.staging, self.path):
                os.rename(self.staging, self.previous)
            else:
                os.rename(self.path, self.previous)
                os.rename(self.staging, self.path)
        except OSError as exc:
            raise RecordsError(f"cannot move the finished run {self.staging} to {self.path}: "
                               f"{exc.strerror}; its records and reports are in {self.staging}") from None
        return self.path

    def discard(self) -> None:
        """Remove the staging directory of a run that recorded nothing."""
        if self.staging.exists():
            _remove(self.staging)

    def release(self) -> None:
        """Give the lock back (unlinked first, so a waiting run never locks a stale file)."""
        if self._lock_fd is None:
            return
        try:
            self.lock_path.unlink()
        except FileNotFoundError:
            pass
        os.close(self._lock_fd)
        self._lock_fd = None

    def _check_target(self) -> None:
        path = self.path
        if path.exists() and not path.is_dir():
            raise RecordsError(f"report directory {path} is a file, not a directory; pass another --mlu-report")
        if path.is_dir() and any(path.iterdir()) and not (path / META_FILE).exists():
            raise RecordsError(f"report directory {path} is not empty and holds no mluverify run "
                               f"({META_FILE}); pass an empty or new --mlu-report directory")

    def _set_aside_left_over_run(self) -> None:
        """A staging directory left by an earlier run keeps its records under a name of its own,
        which, like the note, says how that run ended: killed before its end (``interrupted``),
        or finished but its reports unwritten (``unreported``)."""
        stale = self.staging
        if not stale.exists():
            return
        if not holds_records(stale):
            _remove(stale)
            return
        metadata = read_metadata(stale)
        run_id = metadata.get("run_id") or datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
        if metadata.get("complete"):
            kept = self.path.with_name(f"{self.path.name}.unreported-{run_id}")
            what = ("a run that finished but could not write its reports or be swapped in (a full disk, a "
                    "read-only directory)")
        else:
            kept = self.path.with_name(f"{self.path.name}.interrupted-{run_id}")
            what = f"a run that did not finish ({metadata.get('incomplete_reason') or 'it recorded no end'})"
        os.rename(stale, kept)
        self.notes.append(f"the records of {what} were kept in {kept} (`mluverify report {kept}` writes its report)")


def holds_records(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds at least one record (merged, or a complete shard line)."""
    run_dir = Path(run_dir)
    if (run_dir / RECORDS_FILE).exists():
        return True
    for shard in (run_dir / SHARD_DIR).glob("records-*.jsonl"):
        with open(shard, "rb") as fh:
            if b"\n" in fh.read(1 << 20):
                return True
    return False


def _acquire(lock_path: Path, run_dir: Path) -> int:
    """An exclusive, non-blocking flock on ``lock_path`` (the kernel drops it if the process dies)."""
    import fcntl

    while True:
        try:
            fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RecordsError(f"cannot create the lock file {lock_path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode("utf-8", "replace")
            os.close(fd)
            raise RunDirectoryBusy(_busy_message(run_dir, holder)) from None
        try:
            current = os.stat(lock_path)
        except FileNotFoundError:  # the holder released (unlinked) it meanwhile: lock the new one
            os.close(fd)
            continue
        if os.path.samestat(os.fstat(fd), current):
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                     "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                     "command": " ".join(sys.argv)}).encode())
            return fd
        os.close(fd)


def _busy_message(run_dir: Path, holder: str) -> str:
    try:
        info = json.loads(holder)
        who = f" (pid {info['pid']} on {info['host']}, started {info['started']}: {info['command']})"
    except (ValueError, KeyError, TypeError):
        who = ""
    return (f"report directory {run_dir} is in use by another run{who}; wait for it to end or "
            f"pass another --mlu-report")


def _check_removable(path: Path) -> None:
    """A previous run must be removable later (it becomes ``prev``, then goes): every directory
    in it writable."""
    if not path.exists():
        return
    for directory, _, _ in os.walk(path):
        if not os.access(directory, os.W_OK | os.X_OK):
            raise RecordsError(
                f"previous run directory {path} is read-only ({directory} is not writable), so a new "
                f"run could not replace it; make it writable (chmod -R u+w {path}) or pass another "
                f"--mlu-report")


def _mkdir(path: Path, what: str) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:
        raise RecordsError(f"{what} {path} is not writable: {exc.strerror}") from None


def _remove(path: Path) -> None:
    try:
        shutil.rmtree(path)
    except OSError as exc:
        raise RecordsError(f"cannot remove {path}: {exc.strerror}") from None


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False
    where the system cannot, and the caller falls back to two renames."""
    import ctypes

    rename_exchange, at_fdcwd = 2, -100
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(a))
