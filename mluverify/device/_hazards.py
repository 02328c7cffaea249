"""Which queued work reads or writes each device buffer, so that every reader sees finished values.

A ``Task`` is one op queued on a ``Queue`` (``queues.py``). When it is queued it is registered
against the buffers (``_storage._Buffer``) it reads and writes; the registration returns the
tasks of *other* queues it must wait for (read after write, write after read, write after
write; work on the same queue is ordered by the queue itself). Code that touches a buffer
outside a queue — a synchronous op, a copy to the CPU, ``as_cpu`` — first waits with
``settle_read`` / ``settle_write``. The result is the same bits as running everything in
program order, whatever the queues overlap.

State is per buffer plus one count of unfinished or failed tasks (so that code with no queue in
use pays one integer test); both are guarded by one lock, held only to update the bookkeeping.
"""
from __future__ import annotations

import threading
from typing import Callable, Iterable


class QueuedOpError(RuntimeError):
    """A queued op failed on its worker; raised at the next synchronisation, naming the op."""


class Task:
    """One queued unit of work: ``run()`` on the queue's worker once ``waits_for`` are done."""

    __slots__ = ("op_name", "queue_id", "run", "waits_for", "error", "_done")

    def __init__(self, op_name: str, queue_id: int, run: Callable[[], None]) -> None:
        self.op_name = op_name
        self.queue_id = queue_id
        self.run = run
        self.waits_for: list[Task] = []
        self.error: QueuedOpError | None = None
        self._done = threading.Event()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self) -> None:
        """Block until the task has run (or was skipped)."""
        self._done.wait()

    def result(self) -> None:
        """Wait; raise the task's failure, if any (the values it writes were never computed)."""
        self._done.wait()
        if self.error is not None:
            raise self.error

    def finish(self, error: QueuedOpError | None = None) -> None:
        # Drop the work and its arguments: a finished task stays referenced by the buffers it
        # touched and must not keep their storages alive.
        self.run, self.waits_for = None, []
        self.error = error
        self._done.set()
        if error is None:
            with _lock:
                _Pending.count -= 1

    def __repr__(self) -> str:
        state = "failed" if self.error else "done" if self.done else "pending"
        return f"Task({self.op_name!r}, {state})"


class _Pending:
    # Tasks registered and not finished, or failed (reading what a failed task should have
    # written raises for as long as that buffer is not overwritten), over all queues.
    count = 0


_lock = threading.Lock()


def any_pending() -> bool:
    return _Pending.count > 0


def register(task: Task, reads: Iterable, writes: Iterable) -> None:
    """Record ``task`` as a reader / writer of the given buffers; fill ``task.waits_for``."""
    waits = task.waits_for
    with _lock:
        _Pending.count += 1
        for buffer in reads:
            writer = buffer.last_write
            if writer is not None and writer.queue_id != task.queue_id and not writer.done:
                waits.append(writer)
            buffer.reads = [r for r in buffer.reads if not r.done]
            buffer.reads.append(task)
        for buffer in writes:
            waits.extend(t for t in (buffer.last_write, *buffer.reads)
                         if t is not None and t is not task and t.queue_id != task.queue_id and not t.done)
            buffer.last_write = task
            buffer.reads = []


def settle_read(buffers: Iterable) -> None:
    """Wait for the queued writers of ``buffers``; raise a writer's failure."""
    if not any_pending():
        return
    for buffer in buffers:
        writer = buffer.last_write
        if writer is not None:
            writer.result()


def settle_write(buffers: Iterable) -> None:
    """Wait for every queued op reading or writing ``buffers`` (a writer's failure is dropped:
    the values it failed to compute are about to be overwritten)."""
    if not any_pending():
        return
    for buffer in buffers:
        with _lock:
            tasks = [t for t in (buffer.last_write, *buffer.reads) if t is not None]
        for task in tasks:
            task.wait()
