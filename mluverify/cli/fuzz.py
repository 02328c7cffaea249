"""``mluverify fuzz``: random-graph differential testing of targets, findings kept as a corpus.

The fuzzer (``mluverify.fuzz``) knows no back end; ``TargetRunner`` connects it to the back ends
of the plugins, as a verification session runs a case.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator, Sequence

DEFAULT_TARGETS = ("mlu:cnnl", "mlu:cnml")
# Back ends whose ops run on a torch device the Dumper sees op by op (culprit ops, docs/fuzzing.md).
DUMPABLE_BACKENDS = frozenset({"mlu"})
# Their modes that run fused groups: FUSED_KERNEL_DEBUG, not the Dumper, sees into those.
FUSED_MODES = frozenset({"cnml"})
# A blamed group of more ops than this is not split further (each op costs one more build).
MAX_SPLIT_GROUP = 8
DEFAULT_PROGRAM_TIMEOUT_S = 60.0
# Shard k of --jobs starts at seed + k x SHARD_SEEDS: more seeds than a shard's budget reaches.
SHARD_SEEDS = 1_000_000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fuzz", help="random op graphs on targets vs the CPU and float64; shrunk findings as a corpus",
        description="Draw valid programs (2-16 ops over 1-3 inputs), run each on every target, on "
                    "the CPU and in float64, and keep each distinct finding (a deviation the float64 "
                    "run blames on the target, an error, a crash) shrunk, as a replayable case "
                    "(mluverify fuzz --replay CASE.json) with a standalone script. Exit status 1 when a finding was "
                    "made (or, with --replay, still reproduces), 2 on bad input.")
    parser.add_argument("--target", action="append", default=None, metavar="TARGET",
                        help=f"a target to fuzz (repeatable; default {' '.join(DEFAULT_TARGETS)})")
    parser.add_argument("--seed", type=int, default=0, help="first seed (a shard: its own seed range)")
    parser.add_argument("--budget", default="100", help="programs per target (200) or seconds (600s)")
    parser.add_argument("--ops", default="", help="comma-separated ops or op families (default: all)")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="corpus directory the findings go to (made if missing)")
    parser.add_argument("--replay", metavar="CORPUS", default=None,
                        help="re-judge every finding of a corpus directory, or one finding's .json file "
                             "(on its own target, or on --target)")
    parser.add_argument("--retire-fixed", action="store_true",
                        help="with --replay: move the findings that no longer reproduce on their own "
                             "target into CORPUS/fixed/ (regressions every target must pass)")
    parser.add_argument("--merge", nargs="+", metavar="CORPUS", default=None,
                        help="merge shards' corpora into --out (deduplicated by signature)")
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                        help="a plugin module adding back ends or device kernels (repeatable)")
    parser.add_argument("--in-process", action="store_true",
                        help="run targets in this process (faster; a crash or a hang ends the campaign)")
    parser.add_argument("--program-timeout", type=float, default=None, metavar="SECONDS",
                        help=f"a program that gets no answer from its target in SECONDS is a timeout finding "
                             f"(its process killed; default {DEFAULT_PROGRAM_TIMEOUT_S:g}; not with --in-process)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run the campaign as N shards in parallel (seed ranges split, each shard its own "
                             "corpus, merged into --out as --merge does)")
    parser.add_argument("--from", dest="start_from", metavar="CORPUS", default=None,
                        help="start from CORPUS's findings and coverage (default: --out's), e.g. a CI shard "
                             "writing its own --out")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from mluverify.errors import InvalidArgument
    from mluverify.fuzz.campaign import Budget
    from mluverify.fuzz.ops import op_set

    if args.retire_fixed and not (args.replay and Path(args.replay).is_dir()):
        raise InvalidArgument("--retire-fixed needs --replay CORPUS, a corpus directory")
    if args.out:
        _make_out_directory(args.out)
    if args.merge:
        if not args.out:
            raise InvalidArgument("--merge needs --out DIR, the merged corpus")
        return _merge_into(args.out, args.merge, 0)
    ops = op_set([name.strip() for name in args.ops.split(",") if name.strip()])
    budget = Budget.parse(args.budget)
    _check_run_options(args)
    if args.jobs > 1:
        return _parallel_shards(args, budget)
    with TargetRunner(args.plugin) as local:
        if args.replay:
            status = _replay(args, local)
            if args.out:
                _write_page(_corpus_of(args.replay), args.out)
            return status
        status = _campaign(args, ops, budget, local)
    if args.out:
        _write_page(args.out, args.out)
    return status


def _check_run_options(args: argparse.Namespace) -> None:
    """Refuse --program-timeout and --jobs values that cannot run, before anything runs; fill
    in the time limit's default."""
    from mluverify.errors import InvalidArgument

    if args.program_timeout is not None and args.in_process:
        raise InvalidArgument("--program-timeout needs the child process: drop --in-process (nothing can stop "
                              "a program that hangs in the campaign's own process)")
    if args.program_timeout is not None and not args.program_timeout > 0:
        raise InvalidArgument(f"--program-timeout {args.program_timeout:g}: must be > 0 seconds")
    if args.program_timeout is None:
        args.program_timeout = DEFAULT_PROGRAM_TIMEOUT_S
    if args.jobs < 1:
        raise InvalidArgument(f"--jobs {args.jobs}: must be >= 1 (shards run in parallel)")
    if args.jobs > 1 and (args.replay or not args.out):
        raise InvalidArgument("--jobs N runs a campaign's shards: it needs --out DIR (the merged corpus) and "
                              "no --replay")


def _parallel_shards(args: argparse.Namespace, budget: Any) -> int:
    """``--jobs N``: N shards of the campaign, each a ``mluverify fuzz`` process with its own
    seed range (shard k from seed + k x SHARD_SEEDS) and corpus, all starting from --out's
    findings and coverage (or --from's), merged into --out as ``--merge`` does. A programs
    budget is split between the shards; a seconds budget is each shard's. Each shard is the
    command a user would run for it (printed), so a shard can be rerun alone."""
    import os
    import shlex
    import subprocess
    import sys

    # The shards import what this process can (a --plugin module found on its sys.path).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    with tempfile.TemporaryDirectory(prefix="mluverify-fuzz-shards-") as scratch:
        shards = [(Path(scratch) / f"shard-{k}", args.seed + k * SHARD_SEEDS, shard_budget)
                  for k, shard_budget in enumerate(_shard_budgets(budget, args.jobs)) if shard_budget]
        running = []
        for folder, seed, shard_budget in shards:
            argv = [*_shard_argv(args), "--seed", str(seed), "--budget", shard_budget, "--out", str(folder)]
            log = open(f"{folder}.log", "w")
            running.append((shlex.join(["mluverify", *argv]), log, subprocess.Popen(
                [sys.executable, "-m", "mluverify.cli", *argv], stdout=log, stderr=subprocess.STDOUT, env=env)))
        statuses = []
        for command, log, process in running:
            statuses.append(process.wait())
            log.close()
            print(f"== {command}: exit status {statuses[-1]}")
            print(Path(log.name).read_text(), end="")
        # What the shards kept is merged even where one failed: nothing found is lost.
        merged = _merge_into(args.out, [str(folder) for folder, _, _ in shards if folder.is_dir()], max(statuses))
        return merged if all(status in (0, 1) for status in statuses) else 2


def _shard_budgets(budget: Any, jobs: int) -> list[str]:
    """Each shard's ``--budget``: the programs split (the first shards take the remainder;
    "" where a shard gets none), or the same seconds."""
    if budget.seconds is not None:
        return [f"{budget.seconds:g}s"] * jobs
    share, extra = divmod(budget.programs, jobs)
    return [str(share + (k < extra)) if share + (k < extra) else "" for k in range(jobs)]


def _shard_argv(args: argparse.Namespace) -> list[str]:
    """The options a shard repeats: targets, ops, plugins, where it starts from, how it runs."""
    argv = ["fuzz", "--ops", args.ops, "--from", args.start_from or args.out]
    argv += [f"--target={target}" for target in args.target or DEFAULT_TARGETS]
    argv += [f"--plugin={plugin}" for plugin in args.plugin]
    return argv + (["--in-process"] if args.in_process else ["--program-timeout", f"{args.program_timeout:g}"])


def _merge_into(out: str, sources: Sequence[str], status: int) -> int:
    """Merge corpora ``sources`` (findings and coverage) into ``out``, write its page; ``status``."""
    from mluverify.fuzz.corpus import merge
    from mluverify.fuzz.coverage import merge_coverage

    read, kept = merge(sources, out)
    runs = merge_coverage(sources, out)
    print(f"merged {read} findings of {len(sources)} corpora into {kept} distinct ones in {out} "
          f"(coverage of {runs} campaigns)")
    _write_page(out, out)
    return status


def _make_out_directory(out: str) -> None:
    """Make ``--out`` before anything runs, so that nothing a campaign finds is lost to a path
    that cannot be a corpus; InvalidArgument names it."""
    from mluverify.errors import InvalidArgument

    path = Path(out)
    if path.exists() and not path.is_dir():
        raise InvalidArgument(f"--out {out}: not a directory (a corpus is a directory; name a new or existing one)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InvalidArgument(f"--out {out}: cannot be made ({exc.strerror})") from None


def _corpus_of(replayed: str) -> Path:
    """The corpus directory of ``--replay``: itself, or the folder of a finding's file."""
    path = Path(replayed)
    return path if path.is_dir() else path.parent


def page_rows(corpus: str | Path) -> list[dict[str, Any]]:
    """One ``mluverify.report.fuzz_page`` row per finding of ``corpus`` (open, then fixed)."""
    from mluverify.fuzz.corpus import FIXED, load_corpus
    from mluverify.report.fuzz_page import FIXED as FIXED_STATE, OPEN

    corpus = Path(corpus)
    fixed_dir = corpus / FIXED
    kept = [(OPEN, corpus, f) for f in load_corpus(corpus)] + (
        [(FIXED_STATE, fixed_dir, f) for f in load_corpus(fixed_dir)] if fixed_dir.is_dir() else [])
    return [{"signature": f.signature, "state": state, "target": f.judgement.target, "kind": f.judgement.kind,
             "culprit": f.culprit or "", "ops": " -> ".join(f.program.ops), "hits": f.hits,
             "seed": f.seed, "reason": f.judgement.reason, "graph": f.program.source(),
             "reproducer": f.reproducer(folder), "script": f"python {folder / f.signature}.py"}
            for state, folder, f in kept]


def _write_page(corpus: str | Path, out: str | Path) -> None:
    from mluverify.fuzz.coverage import coverage_rows
    from mluverify.fuzz.ops import REGISTRY
    from mluverify.report.fuzz_page import write_fuzz_page

    page = write_fuzz_page(page_rows(corpus), str(corpus), out, coverage_rows(corpus, REGISTRY))
    print(f"fuzz page: {page}")


class TargetRunner:
    """Runs fuzz programs on targets through the back ends of the built-in plugins, entry
    points and ``plugins`` (module names): a ``mluverify.fuzz.differential.Runner``.
    ``core_version``: the device variant to run on (``""``: the back end's default).

    Used as a context manager, it is the run of its plugins: their device kernels
    (``mluverify_device_kernels``) are in force on the emulated MLU inside the block, as a
    pytest run's are (``mluverify fuzz`` and its isolated child run inside one). Outside a
    block it runs the back ends with whatever kernels the process has in force."""

    def __init__(self, plugins: Sequence[Any] = (), core_version: str = "") -> None:
        from mluverify.core.backends import BackendRegistry
        from mluverify.core.plugin_manager import call_hook, new_plugin_manager

        self.core_version = core_version
        self.registry = BackendRegistry()
        self.plugins = new_plugin_manager(plugins)
        call_hook(self.plugins, "mluverify_add_backends", registry=self.registry)

    def __enter__(self) -> "TargetRunner":
        from mluverify.core.plugin_manager import configure

        configure(self.plugins)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        from mluverify.core.plugin_manager import unconfigure

        unconfigure(self.plugins)

    def policy(self, target: str) -> str:
        """The tolerance policy of the target's mode."""
        resolved, backend = self.registry.resolve(target)
        return backend.policy(resolved.mode)

    def unavailable_reason(self, target: str) -> str | None:
        resolved, backend = self.registry.resolve(target)
        return backend.unavailable_reason() or backend.mode_unavailable_reason(resolved.mode)

    def __call__(self, program: Any, inputs: Sequence[Any], target: str) -> Any:
        """The program's outputs on ``target``, on the CPU (TargetUnavailable where it cannot run)."""
        from mluverify.core.case import Case
        from mluverify.fuzz.differential import TargetUnavailable

        reason = self.unavailable_reason(target)
        if reason:
            raise TargetUnavailable(f"target {target} unavailable: {reason}")
        resolved, backend = self.registry.resolve(target)
        case = Case(case_id=f"fuzz[{'-'.join(program.ops)}]", op="fuzz", target=resolved, suite="fuzz",
                    core_version=self.core_version if backend.variants else "")
        args = tuple(x.clone() for x in inputs)
        return backend.execute(program.callable(), args, {}, case=case).output

    def culprit(self, program: Any, inputs: Sequence[Any], target: str) -> str | None:
        """The first op whose own error breaks ``target``'s bound, by the Dumper's dump-diff of
        the program's run there (on a fused mode: by its groups, ``group_culprit``); None for a
        target the Dumper cannot see into (compiled or exported graphs: ``cpu:inductor``,
        ``ort:cpu``), where no op is blamed or where the dumped run fails."""
        from mluverify.dump import Dumper, dump_diff

        resolved = self.registry.resolve(target)[0]
        if resolved.backend not in DUMPABLE_BACKENDS:
            return None
        if resolved.mode in FUSED_MODES:
            return self.group_culprit(program, inputs, target)
        with tempfile.TemporaryDirectory() as scratch:
            try:
                with Dumper(Path(scratch) / "dump", use_cpu=True) as dumper:
                    self(program, inputs, target)
                diff = dump_diff(dumper.path, mode=self.policy(target))
            except Exception:  # noqa: BLE001 (no blame is a signature by op sequence, not a failed campaign)
                return None
            if diff.first_offender is None:
                return None
            return str(diff.table.set_index("seq").loc[diff.first_offender, "op"])

    def group_culprit(self, program: Any, inputs: Sequence[Any], target: str) -> str | None:
        """On a fused mode: the first fused group whose outputs break the bound against the
        group's own graph on the CPU, given the same inputs (``FUSED_KERNEL_DEBUG=cpu``: the
        group's own error). Then each of its ops is run as a group alone (the others forced to
        fall back, ``DEBUG_FORCED_FALLBACK_OPS``): the first that breaks the bound alone is
        blamed, ``aten::sigmoid (fused)``; where none does, the wrong result needs the ops
        together and the group is, ``fused(aten::transpose.int, aten::mm)``. None where no
        group breaks the bound (a wrong op outside the groups, or a wrong dtype the float32
        group reference cannot tell) or the run fails."""
        try:
            group = self._first_wrong_group(program, inputs, target)
            if group is None:
                return None
            for op in dict.fromkeys(group) if len(group) <= MAX_SPLIT_GROUP else ():
                alone = [other for other in group if other != op]
                if not alone or self._first_wrong_group(program, inputs, target, alone) == (op,):
                    return f"{op} (fused)"
        except Exception:  # noqa: BLE001 (no blame is a signature by op sequence, not a failed campaign)
            return None
        return f"fused({', '.join(group)})"

    def _first_wrong_group(self, program: Any, inputs: Sequence[Any], target: str,
                           fallback: Sequence[str] = ()) -> tuple[str, ...] | None:
        """The ops of the first group (in the order they ran) whose outputs break ``target``'s
        bound against their FUSED_KERNEL_DEBUG reference; ``fallback``: ops kept out of groups
        (``mluverify.dump``'s group table, which a fused dump-diff reads too)."""
        from mluverify.dump import first_wrong_group, fused_kernel_debug, group_table
        from mluverify.judge import policy

        with tempfile.TemporaryDirectory() as scratch, fused_kernel_debug(scratch, fallback):
            self(program, inputs, target)
            wrong = first_wrong_group(group_table(scratch, policy(self.policy(target))))
        return None if wrong is None else tuple(wrong["ops"].split())


@contextlib.contextmanager
def _runner(args: argparse.Namespace, local: TargetRunner) -> Iterator[Any]:
    """``local`` with ``--in-process``, else a child process running targets in a runner of its own."""
    from mluverify.fuzz.isolation import IsolatedRunner

    if args.in_process:
        yield local
        return
    with IsolatedRunner(functools.partial(TargetRunner, tuple(args.plugin)), args.program_timeout) as isolated:
        yield isolated


def _available(targets: Sequence[str], runner: TargetRunner) -> dict[str, str]:
    """Target -> its mode's policy, for the targets that can run here (others are said)."""
    from mluverify.errors import InvalidArgument

    policies = {}
    for target in targets:
        reason = runner.unavailable_reason(target)
        if reason:
            print(f"skipped target {target}: {reason}")
        else:
            policies[target] = runner.policy(target)
    if not policies:
        raise InvalidArgument(f"none of the targets {', '.join(targets)} can run here")
    return policies


def _campaign(args: argparse.Namespace, ops, budget, local: TargetRunner) -> int:
    from mluverify.fuzz.campaign import Campaign
    from mluverify.fuzz.corpus import keep, load_corpus
    from mluverify.fuzz.coverage import read_runs, record_run, totals

    policies = _available(args.target or DEFAULT_TARGETS, local)
    start = args.start_from or args.out
    known = load_corpus(start) if start else []
    coverage = totals(read_runs(start)) if start else {}
    run_id = uuid.uuid4().hex  # this campaign's entry in the corpus's coverage

    def with_plugins(finding):  # the plugins its target ran with, for its reproducers
        return replace(finding, plugins=tuple(args.plugin))

    on_finding = (lambda finding: keep(args.out, with_plugins(finding))) if args.out else (lambda finding: None)
    on_coverage = (lambda judged: record_run(args.out, run_id, judged)) if args.out else (lambda judged: None)
    with _runner(args, local) as runner:
        # The Dumper runs in this process: only on targets it sees into, which are not compiled code.
        campaign = Campaign(list(policies), runner, policies, ops=ops, on_finding=on_finding, known=known,
                            culprit=local.culprit, coverage=coverage, on_coverage=on_coverage)
        findings = [with_plugins(finding) for finding in campaign.run(args.seed, budget)]
    seeds = f"{campaign.seeds[0]}-{campaign.seeds[-1]}" if campaign.seeds else "none"
    print(f"seeds {seeds}, budget {args.budget}, {len(ops)} ops")
    print("target | programs | seconds | programs/hour | deviation | reference | error | crash | timeout | "
          "torchfuzz fails | torchfuzz misses | its failures cleared by golden")
    for target, stats in campaign.stats.items():
        print(f"{target} | {stats.programs} | {stats.seconds:.0f} | {stats.per_hour:.0f} | "
              f"{stats.kinds['deviation']} | {stats.kinds['reference']} | {stats.kinds['error']} | "
              f"{stats.kinds['crash']} | {stats.kinds['timeout']} | {stats.torchfuzz_fails} | "
              f"{stats.torchfuzz_misses} | {stats.torchfuzz_cleared}")
    for finding in findings:
        judgement = finding.judgement
        blamed = f", culprit {finding.culprit}" if finding.culprit else ""
        print(f"finding {finding.signature} {judgement.kind} on {judgement.target} (seed {finding.seed}{blamed}): "
              f"{' -> '.join(finding.program.ops)}; {judgement.reason}")
        if args.out:
            print(f"  {finding.reproducer(args.out)}")
    return 1 if findings else 0


def _replay(args: argparse.Namespace, local: TargetRunner) -> int:
    from mluverify.errors import InvalidArgument
    from mluverify.fuzz.corpus import load_findings, retire
    from mluverify.fuzz.differential import judge

    if args.retire_fixed and args.target:
        raise InvalidArgument("--retire-fixed re-judges each finding on its own target: drop --target")
    findings = load_findings(args.replay)
    targets = sorted({t for f in findings for t in (args.target or [f.judgement.target])})
    policies = _available(targets, local) if targets else {}
    reproduced = 0
    with _runner(args, local) as runner:
        for finding in findings:
            for target in args.target or [finding.judgement.target]:
                if target not in policies:
                    continue
                judgement = judge(finding.program, finding.inputs, target, runner, policies[target])
                reproduced += judgement.is_finding
                state = "reproduces" if judgement.is_finding else "no longer fails"
                if args.retire_fixed and not judgement.is_finding:
                    state += f", moved to {retire(args.replay, finding)}"
                print(f"{finding.signature} on {target}: {state} ({judgement.kind}: {judgement.reason})")
    print(f"{reproduced} of {len(findings)} findings reproduce")
    return 1 if reproduced else 0
