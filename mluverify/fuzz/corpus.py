"""Findings and the corpus that keeps them: one replayable case file per distinct finding.

A finding's signature is its target, its kind and its minimal program's op sequence: two
programs that shrink to the same ops on the same target are one finding (its ``hits`` count
both). Each finding is ``<signature>.json`` (``FORMAT`` version ``VERSION``: the program, its
inputs' values, the judgement, the seed) and ``<signature>.py``, a standalone script that
re-runs it (only torch for ``cpu:*`` targets). A file that is unreadable, not a finding or of
another version is an InvalidArgument naming the file.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from mluverify.errors import InvalidArgument
from mluverify.fuzz.differential import Judgement
from mluverify.fuzz.program import Program

FORMAT = "mluverify-fuzz-case"
VERSION = 1
CORPUS_ENV = "MLUVERIFY_FUZZ_CORPUS"


def signature(target: str, kind: str, ops: Sequence[str]) -> str:
    """12 hex digits naming (target, kind, op sequence)."""
    return hashlib.sha1(f"{target}|{kind}|{','.join(ops)}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Finding:
    """A shrunk program that a target got wrong, with the inputs that show it."""

    judgement: Judgement
    program: Program
    inputs: tuple = field(compare=False)
    seed: int | None = None
    hits: int = 1

    @property
    def signature(self) -> str:
        return signature(self.judgement.target, self.judgement.kind, self.program.ops)

    @property
    def size(self) -> tuple[int, int]:
        """(ops, input elements): smaller is a better reproducer."""
        return len(self.program.nodes), sum(math.prod(shape) for shape in self.program.inputs)

    def reproducer(self, directory: str | Path) -> str:
        """The one-line pytest command re-judging this finding."""
        return (f"{CORPUS_ENV}={directory} pytest -p mluverify suites/fuzz/test_fuzz.py -k {self.signature} "
                f"--mlu-target {self.judgement.target}")

    def to_json(self, directory: str | Path = "") -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "signature": self.signature, **asdict(self.judgement),
                "seed": self.seed, "hits": self.hits, "ops": list(self.program.ops),
                "reproducer": self.reproducer(directory) if directory else "",
                "program": self.program.to_json(),
                "inputs": [{"shape": list(x.shape), "values": [float(v) for v in x.reshape(-1).tolist()]}
                           for x in self.inputs]}

    @classmethod
    def from_json(cls, data: Any, where: str) -> "Finding":
        import torch

        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InvalidArgument(f"{where}: not a fuzz finding (no \"format\": {FORMAT!r})")
        if data.get("version") != VERSION:
            raise InvalidArgument(f"{where}: fuzz finding format version {data.get('version')!r}; this "
                                  f"mluverify reads version {VERSION}")
        try:
            judgement = Judgement(**{name: data[name] for name in Judgement.__dataclass_fields__})
            inputs = tuple(torch.tensor(x["values"], dtype=torch.float32).reshape(x["shape"]) for x in data["inputs"])
            program = Program.from_json(data["program"], where)
            seed, hits = data.get("seed"), int(data.get("hits", 1))
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise InvalidArgument(f"{where}: malformed fuzz finding ({type(exc).__name__}: {exc})") from None
        if [tuple(x.shape) for x in inputs] != list(program.inputs):
            raise InvalidArgument(f"{where}: input shapes {[list(x.shape) for x in inputs]} do not match the "
                                  f"program's {[list(s) for s in program.inputs]}")
        return cls(judgement, program, inputs, seed, hits)


def read_finding(path: str | Path) -> Finding:
    """One finding file; InvalidArgument names the file when it cannot be read."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidArgument(f"fuzz finding {path}: unreadable ({type(exc).__name__}: {exc})") from None
    return Finding.from_json(data, f"fuzz finding {path}")


def load_corpus(directory: str | Path) -> list[Finding]:
    """Every finding of a corpus directory, by signature; InvalidArgument names a missing one."""
    directory = Path(directory)
    if not directory.is_dir():
        raise InvalidArgument(f"fuzz corpus {directory}: not a directory")
    return [read_finding(path) for path in sorted(directory.glob("*.json"))]


def keep(directory: str | Path, finding: Finding) -> tuple[Finding, bool]:
    """Write ``finding`` into the corpus, merged with the one of the same signature there (hits
    added, the smaller reproducer kept); returns what was written and whether it is new."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{finding.signature}.json"
    new = not path.exists()
    if not new:
        known = read_finding(path)
        smaller = finding if finding.size < known.size else known
        finding = replace(smaller, hits=known.hits + finding.hits)
    path.write_text(json.dumps(finding.to_json(directory), indent=1) + "\n")
    (directory / f"{finding.signature}.py").write_text(standalone_script(finding))
    return finding, new


def merge(sources: Iterable[str | Path], out: str | Path) -> tuple[int, int]:
    """Merge the corpora of several shards into ``out``: (findings read, distinct kept)."""
    read = 0
    for source in sources:
        for finding in load_corpus(source):
            keep(out, finding)
            read += 1
    return read, len(list(Path(out).glob("*.json")))


_SCRIPT = '''"""mluverify fuzz finding {signature}: {kind} on {target}.

{reason}
Re-run: python {signature}.py
"""
import torch

INPUTS = [
{inputs}
]


{program}


{golden}


def on_target(fn, args):
{runner}


def rel_mse(actual, expected):
    actual, expected = actual.double(), expected.double()
    return float(((actual - expected) ** 2).sum().sqrt() / expected.pow(2).sum().sqrt().clamp_min(1e-30))


if __name__ == "__main__":
    reference = program(*(x.clone() for x in INPUTS))
    golden = program_float64(*(x.double() for x in INPUTS))
    actual = on_target(program, [x.clone() for x in INPUTS])
    for index, (a, e, g) in enumerate(zip(actual, reference, golden)):
        print(f"output {{index}} {{tuple(e.shape)}} {{e.dtype}} ({target}: {{tuple(a.shape)}} {{a.dtype}}): {target} vs float64 rel_mse {{rel_mse(a, g):.3g}}, "
              f"CPU vs float64 {{rel_mse(e, g):.3g}}, {target} vs CPU {{rel_mse(a, e):.3g}}")
'''

_RUNNERS = {
    "cpu:inductor": '    with torch.no_grad():\n        return torch.compile(fn, backend="inductor", dynamic=False)(*args)',
    "ort:cpu": ('    import io\n    import onnxruntime  # torch and onnxruntime only\n\n'
                '    class Program(torch.nn.Module):\n        def forward(self, *xs):\n            return fn(*xs)\n\n'
                '    model = io.BytesIO()\n'
                '    torch.onnx.export(Program(), tuple(a.clone() for a in args), model, dynamo=False, opset_version=17,\n'
                '                      input_names=[f"x{i}" for i in range(len(args))])\n'
                '    session = onnxruntime.InferenceSession(model.getvalue(), providers=["CPUExecutionProvider"])\n'
                '    wanted = {i.name for i in session.get_inputs()}\n'
                '    feeds = {f"x{i}": a.numpy() for i, a in enumerate(args) if f"x{i}" in wanted}\n'
                '    return [torch.from_numpy(value) for value in session.run(None, feeds)]'),
}
_REGISTRY_RUNNER = ('    from mluverify.cli.fuzz import TargetRunner  # {target} needs mluverify\n'
                    '    from mluverify.fuzz.program import Program\n'
                    '    import json\n'
                    '    return TargetRunner()(Program.from_json(json.loads({program!r})), args, "{target}")')


def standalone_script(finding: Finding) -> str:
    """A script that runs the finding's program on its target, the CPU and in float64 and
    prints the errors: torch only for ``cpu:inductor``, torch and onnxruntime for ``ort:cpu``,
    mluverify's back ends for other targets."""
    target = finding.judgement.target
    runner = _RUNNERS.get(target) or _REGISTRY_RUNNER.format(
        target=target, program=json.dumps(finding.program.to_json()))
    inputs = "\n".join(f"    torch.tensor({[float(v) for v in x.reshape(-1).tolist()]!r}).reshape({list(x.shape)}),"
                       for x in finding.inputs)
    golden = finding.program.source(golden=True).replace("def program(", "def program_float64(", 1)
    return _SCRIPT.format(signature=finding.signature, kind=finding.judgement.kind, target=target,
                          reason=finding.judgement.reason.replace('"""', "'''"), inputs=inputs,
                          program=finding.program.source(), golden=golden, runner=runner)


__all__ = ["CORPUS_ENV", "FORMAT", "Finding", "VERSION", "keep", "load_corpus", "merge", "read_finding",
           "signature", "standalone_script"]
