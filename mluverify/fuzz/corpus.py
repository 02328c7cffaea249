"""Findings and the corpus that keeps them: one replayable case file per distinct finding.

A finding's signature is its target, its kind and the op to blame: the first op whose own
error breaks the bound (its ``culprit``, found by the Dumper's dump-diff where the target runs on
a torch device the Dumper sees), else its minimal program's op sequence. Two programs that hit
one bug are one finding (its ``hits`` count both). Each finding is ``<signature>.json`` (``FORMAT`` version ``VERSION``: the program, its
inputs' values, the judgement, the seed) and ``<signature>.py``, a standalone script that
re-runs it (only torch for ``cpu:*`` targets). A file that is unreadable, not a finding or of
another version is an InvalidArgument naming the file. A finding made with plugins
(``mluverify fuzz --plugin``: back ends, device kernels) names them, and its reproducers load
them.
"""
from __future__ import annotations

import hashlib
import json
import math
import shlex
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from mluverify.errors import InvalidArgument
from mluverify.fuzz.differential import Judgement
from mluverify.fuzz.program import Program

FORMAT = "mluverify-fuzz-case"
# Sub-directory of a corpus for findings that no longer reproduce on their target: regressions
# every target must pass (``mluverify fuzz --replay CORPUS --retire-fixed`` moves them there).
FIXED = "fixed"
VERSION = 1
CORPUS_ENV = "MLUVERIFY_FUZZ_CORPUS"


def signature(target: str, kind: str, ops: Sequence[str], culprit: str | None = None) -> str:
    """12 hex digits naming (target, kind, culprit op), or (target, kind, op sequence) when the
    culprit is unknown."""
    blamed = f"culprit:{culprit}" if culprit else ",".join(ops)
    return hashlib.sha1(f"{target}|{kind}|{blamed}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Finding:
    """A shrunk program that a target got wrong, with the inputs that show it."""

    judgement: Judgement
    program: Program
    inputs: tuple = field(compare=False)
    seed: int | None = None
    hits: int = 1
    culprit: str | None = None  # the first op whose own error breaks the bound (dump-diff)
    plugins: tuple[str, ...] = ()  # plugin modules its target needs (back ends, device kernels)

    @property
    def signature(self) -> str:
        return signature(self.judgement.target, self.judgement.kind, self.program.ops, self.culprit)

    @property
    def size(self) -> tuple[int, int]:
        """(ops, input elements): smaller is a better reproducer."""
        return len(self.program.nodes), sum(math.prod(shape) for shape in self.program.inputs)

    def reproducer(self, directory: str | Path) -> str:
        """The one-line command re-judging this finding on its target as the campaign did: it
        needs only mluverify (and the finding's plugins) installed."""
        plugins = "".join(f" --plugin {shlex.quote(plugin)}" for plugin in self.plugins)
        return f"mluverify fuzz --replay {shlex.quote(str(Path(directory) / self.signature))}.json{plugins}"

    def to_json(self, directory: str | Path = "") -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "signature": self.signature, **asdict(self.judgement),
                "seed": self.seed, "hits": self.hits, "ops": list(self.program.ops), "culprit": self.culprit,
                "plugins": list(self.plugins),
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
            seed, hits, culprit = data.get("seed"), int(data.get("hits", 1)), data.get("culprit")
            if culprit is not None and not isinstance(culprit, str):
                raise TypeError(f"culprit {culprit!r} is not an op name")
            plugins = tuple(data.get("plugins", ()))
            if not all(isinstance(plugin, str) for plugin in plugins):
                raise TypeError(f"plugins {data['plugins']!r} are not module names")
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise InvalidArgument(f"{where}: malformed fuzz finding ({type(exc).__name__}: {exc})") from None
        if [tuple(x.shape) for x in inputs] != list(program.inputs):
            raise InvalidArgument(f"{where}: input shapes {[list(x.shape) for x in inputs]} do not match the "
                                  f"program's {[list(s) for s in program.inputs]}")
        return cls(judgement, program, inputs, seed, hits, culprit, plugins)


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


def load_findings(path: str | Path) -> list[Finding]:
    """The findings of a corpus directory, or the one finding of a ``<signature>.json`` file."""
    return [read_finding(path)] if Path(path).is_file() else load_corpus(path)


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


def retire(directory: str | Path, finding: Finding) -> Path:
    """Move a fixed finding's files into the corpus's ``fixed/`` folder; returns its new JSON path."""
    directory = Path(directory)
    (directory / FIXED).mkdir(exist_ok=True)
    for suffix in (".json", ".py"):
        source = directory / f"{finding.signature}{suffix}"
        if source.exists():
            source.replace(directory / FIXED / source.name)
    return directory / FIXED / f"{finding.signature}.json"


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
Re-run: python {signature}.py  (exit status 1 and MISMATCH lines while the target is wrong)
"""
from math import inf

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


def wrong(actual, reference, golden):
    """Why the target's output is wrong ("" if it is not): another shape or dtype than the CPU's,
    a NaN, or an infinity other than the CPU's (the answer where the CPU's float32 and float64
    runs agree on it: signs must match), an integer or bool element other than the CPU's where
    the CPU's are the float64 run's (integers all the way: exact), or an error against float64
    beyond twice the CPU's own plus 1e-3 (the golden rule, simplified; integers cast from
    computed floats too)."""
    if actual.shape != reference.shape or actual.dtype != reference.dtype:
        return f"{{tuple(actual.shape)}} {{actual.dtype}} instead of {{tuple(reference.shape)}} {{reference.dtype}}"
    if reference.is_floating_point():
        special = torch.isinf(reference)
        if not torch.equal(~torch.isfinite(actual), special) or not torch.equal(actual[special], reference[special]):
            return f"NaN/Inf other than the CPU's: {{actual[~torch.isfinite(actual) | special].tolist()}} where the CPU has {{reference[~torch.isfinite(actual) | special].tolist()}}"
        actual, reference, golden = actual[~special], reference[~special], golden[~special]
    if not reference.is_floating_point() and torch.equal(reference, golden.to(reference.dtype)):
        differ = int((actual != reference).sum())
        return f"{{differ}} of {{reference.numel()}} elements differ from the CPU's (exact)" if differ else ""
    if rel_mse(actual, golden) > 2 * rel_mse(reference, golden) + 1e-3:
        return f"rel_mse {{rel_mse(actual, golden):.3g}} against float64, the CPU's {{rel_mse(reference, golden):.3g}}"
    return ""


if __name__ == "__main__":
    reference = program(*(x.clone() for x in INPUTS))
    golden = program_float64(*(x.double() for x in INPUTS))
    actual = on_target(program, [x.clone() for x in INPUTS])
    mismatches = 0
    for index, (a, e, g) in enumerate(zip(actual, reference, golden)):
        print(f"output {{index}} {{tuple(e.shape)}} {{e.dtype}} ({target}: {{tuple(a.shape)}} {{a.dtype}}): {target} vs float64 rel_mse {{rel_mse(a, g):.3g}}, "
              f"CPU vs float64 {{rel_mse(e, g):.3g}}, {target} vs CPU {{rel_mse(a, e):.3g}}")
        why = wrong(a, e, g)
        if why:
            print(f"MISMATCH output {{index}} on {target}: {{why}}")
            mismatches += 1
    raise SystemExit(1 if mismatches else 0)
'''

# The standalone scripts' ``on_target`` bodies: each runs the program the way its back end does
# (mluverify/plugins), with torch and that back end's own package only, so that it can be filed
# upstream. The exported paths wrap the program in a module and capture it as the plugins do.
_MODULE = ('    class Program(torch.nn.Module):\n        def forward(self, *xs):\n            return fn(*xs)\n\n')
_EXPORT = _MODULE + ('    with torch.no_grad():\n'
                     '        exported = torch.export.export(Program(), tuple(a.clone() for a in args))\n')
_ORT_SESSION = ('    session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])\n'
                '    wanted = {i.name for i in session.get_inputs()}\n'
                '    feeds = {f"x{i}": a.numpy() for i, a in enumerate(args) if f"x{i}" in wanted}\n'
                '    return [torch.from_numpy(value) for value in session.run(None, feeds)]')
_OPENVINO = ('    import openvino  # torch and openvino only\n\n' + _EXPORT +
             '    model = openvino.convert_model(exported)\n'
             '    model.reshape({{i: openvino.PartialShape(list(a.shape)) for i, a in enumerate(args)}})\n'
             '    compiled = openvino.Core().compile_model(model, "CPU", {config})\n'
             '    request = compiled.create_infer_request()\n'
             '    request.infer([a.numpy() for a in args])\n'
             '    return [torch.from_numpy(request.get_tensor(o).data.copy()) for o in compiled.outputs]')
_RUNNERS = {
    "cpu:inductor": '    with torch.no_grad():\n        return torch.compile(fn, backend="inductor", dynamic=False)(*args)',
    "ort:cpu": ('    import io\n    import onnxruntime  # torch and onnxruntime only\n\n' + _MODULE +
                '    buffer = io.BytesIO()\n'
                '    torch.onnx.export(Program(), tuple(a.clone() for a in args), buffer, dynamo=False, opset_version=17,\n'
                '                      input_names=[f"x{i}" for i in range(len(args))])\n'
                '    model = buffer.getvalue()\n' + _ORT_SESSION),
    "ort:dynamo": ('    import onnxruntime  # torch, onnxscript (the exporter) and onnxruntime only\n\n' + _MODULE +
                   '    model = torch.onnx.export(Program(), tuple(a.clone() for a in args), dynamo=True, opset_version=20,\n'
                   '                              input_names=[f"x{i}" for i in range(len(args))], verbose=False\n'
                   '                              ).model_proto.SerializeToString()\n' + _ORT_SESSION),
    "openvino:cpu": _OPENVINO.format(config='{"INFERENCE_PRECISION_HINT": "f32"}'),
    "openvino:default": _OPENVINO.format(config="{}"),
    "executorch:xnnpack": ('    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner\n'
                           '    from executorch.exir import to_edge_transform_and_lower\n'
                           '    from executorch.runtime import Runtime  # torch and executorch only\n\n' + _EXPORT +
                           '    lowered = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()])\n'
                           '    method = Runtime.get().load_program(lowered.to_executorch().buffer).load_method("forward")\n'
                           '    return [t.clone() for t in method.execute([a.clone() for a in args])]'),
    "tvm:cpu": ('    import tvm  # torch and apache-tvm only\n'
                '    from tvm.relax.frontend.torch import from_exported_program\n\n' + _EXPORT +
                '    main = tvm.relax.VirtualMachine(tvm.compile(from_exported_program(exported), target="llvm"), tvm.cpu())["main"]\n'
                '    outputs = main(*(tvm.runtime.tensor(a.numpy()) for a in args))  # one tensor, or a tuple of them\n'
                '    outputs = [outputs] if isinstance(outputs, tvm.runtime.Tensor) else list(outputs)\n'
                '    return [torch.from_numpy(o.numpy()) for o in outputs]'),
    "iree:cpu": ('    import io\n'
                 '    import iree.compiler\n'
                 '    import iree.runtime  # torch and the iree packages (compiler, runtime, iree-turbine) only\n'
                 '    from iree.turbine import aot\n\n' + _EXPORT +
                 '    bytecode = io.BytesIO()\n'
                 '    aot.export(exported.run_decompositions(aot.current_aot_decompositions())).mlir_module.write_bytecode(bytecode)\n'
                 '    binary = iree.compiler.compile_str(bytecode.getvalue(), target_backends=["llvm-cpu"], extra_args=[\n'
                 '        "--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false"])\n'
                 '    outputs = iree.runtime.load_vm_flatbuffer(binary, driver="local-task").main(*(a.numpy() for a in args))\n'
                 '    return [torch.from_numpy(o.to_host()) for o in (outputs if isinstance(outputs, tuple) else (outputs,))]'),
}
_REGISTRY_RUNNER = ('    from mluverify.cli.fuzz import TargetRunner  # {target} needs mluverify\n'
                    '    from mluverify.fuzz.program import Program\n'
                    '    import json\n'
                    '    with TargetRunner({plugins!r}) as runner:  # the back ends and device kernels of these plugins\n'
                    '        return runner(Program.from_json(json.loads({program!r})), args, "{target}")')


def standalone_script(finding: Finding) -> str:
    """A script that runs the finding's program on its target, the CPU and in float64 and
    prints the errors: torch only for ``cpu:inductor``, torch and the back end's own package for
    the real compilers of ``_RUNNERS`` (onnxruntime, openvino, executorch, apache-tvm, iree),
    mluverify's back ends (and the finding's plugins) for other targets."""
    target = finding.judgement.target
    runner = _RUNNERS.get(target) or _REGISTRY_RUNNER.format(
        target=target, program=json.dumps(finding.program.to_json()), plugins=finding.plugins)
    inputs = "\n".join(f"    torch.tensor({[float(v) for v in x.reshape(-1).tolist()]!r}).reshape({list(x.shape)}),"
                       for x in finding.inputs)
    golden = finding.program.source(golden=True).replace("def program(", "def program_float64(", 1)
    return _SCRIPT.format(signature=finding.signature, kind=finding.judgement.kind, target=target,
                          reason=finding.judgement.reason.replace('"""', "'''"), inputs=inputs,
                          program=finding.program.source(), golden=golden, runner=runner)


__all__ = ["CORPUS_ENV", "FIXED", "FORMAT", "Finding", "VERSION", "keep", "load_corpus", "load_findings", "merge",
           "read_finding", "retire", "signature", "standalone_script"]
