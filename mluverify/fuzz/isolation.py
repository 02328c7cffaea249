"""Targets run in a child process, so a target that segfaults or aborts is a finding of kind
``crash`` and the campaign goes on.

One child (``multiprocessing``'s spawn context: no state shared with the parent) serves every
program until it dies; then the next program starts a new one. It makes its own runner with
``make_runner`` (a picklable factory, e.g. ``functools.partial(TargetRunner, plugins)`` of the
front end, which knows the back ends) and serves inside it as a context manager: the runner
sets up the child as the parent is (``TargetRunner`` hands its plugins' device kernels to the
emulated MLU there, which the child does not inherit). Inputs and outputs cross as
``torch.save`` bytes. A program that gets no answer in ``timeout_s`` kills the child: a finding
of kind ``timeout`` (``TargetTimedOut``), and the next program starts a new child.
"""
from __future__ import annotations

import io
import multiprocessing
import signal
from typing import Any, Callable, ContextManager, Sequence

from mluverify.fuzz.differential import Runner, TargetCrashed, TargetTimedOut, TargetUnavailable
from mluverify.fuzz.program import Program

# A program compiles and runs in seconds on every target here; a minute without an answer is a hang.
DEFAULT_TIMEOUT_S = 60.0
STARTUP_TIMEOUT_S = 600.0


def _dumps(obj: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _loads(data: bytes) -> Any:
    import torch

    return torch.load(io.BytesIO(data), weights_only=True)


def _serve(connection: Any, make_runner: Callable[[], ContextManager[Runner]]) -> None:
    """The child's loop, inside the runner ``make_runner`` builds."""
    with make_runner() as runner:
        connection.send(("ready",))
        _answer(connection, runner)


def _answer(connection: Any, runner: Runner) -> None:
    """(program JSON, inputs, target) in, ("ok", outputs) or an error out, until the parent hangs up."""
    while True:
        try:
            request = connection.recv()
        except EOFError:
            return
        program, inputs, target = Program.from_json(request[0]), _loads(request[1]), request[2]
        try:
            connection.send(("ok", _dumps(runner(program, inputs, target))))
        except TargetUnavailable as exc:
            connection.send(("unavailable", str(exc)))
        except Exception as exc:  # the target raised: the parent judges it an error
            connection.send(("error", type(exc).__name__, str(exc)))


class TargetError(Exception):
    """A target raised in the child; carries the child's exception type and message."""


class IsolatedRunner:
    """Runs programs on targets in a child process (a ``Runner`` for ``differential.judge``).

    ``make_runner``: builds the child's own runner, a context manager the child serves in
    (picklable: a module-level callable). Use as a context manager, or call ``close``.
    """

    def __init__(self, make_runner: Callable[[], ContextManager[Runner]], timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.make_runner = make_runner
        self.timeout_s = timeout_s
        self.restarts = 0
        self._process: Any = None
        self._connection: Any = None

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child_end = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_end, self.make_runner), daemon=True,
                                        name="mluverify-fuzz-target")
        self._process.start()
        child_end.close()
        # The child's start (torch and the plugins imported) is not the program's time.
        if not self._connection.poll(STARTUP_TIMEOUT_S):
            self._process.kill()
            raise TargetCrashed(f"the process running the targets did not start in {STARTUP_TIMEOUT_S:g} s")
        self._connection.recv()

    def __call__(self, program: Program, inputs: Sequence[Any], target: str) -> Any:
        try:
            if self._process is None or not self._process.is_alive():
                if self._process is not None:
                    self.restarts += 1
                self._start()
            self._connection.send((program.to_json(), _dumps(list(inputs)), target))
            if not self._connection.poll(self.timeout_s):
                self._process.kill()
                self._process.join()
                raise TargetTimedOut(f"{target}: no answer in {self.timeout_s:g} s (killed)")
            answer = self._connection.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError):
            raise TargetCrashed(f"{target}: the process running it died ({self._death()})") from None
        if answer[0] == "ok":
            return _loads(answer[1])
        if answer[0] == "unavailable":
            raise TargetUnavailable(answer[1])
        raise TargetError(f"{answer[1]}: {answer[2]}")

    def _death(self) -> str:
        self._process.join(timeout=30)
        code = self._process.exitcode
        if code is not None and code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"exit status {code}"

    def close(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._connection.close()
            self._process.join(timeout=10)
            if self._process.is_alive():
                self._process.kill()
        self._process = None

    def __enter__(self) -> "IsolatedRunner":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


__all__ = ["IsolatedRunner", "TargetError"]
