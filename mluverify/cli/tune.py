"""``mluverify tune MODEL_SCRIPT``: the fewest layers to keep at higher precision and ops to force
out of fusion so a quantized model meets its bound (or, with ``--mode training``, the layers
``adaptive_quantize`` should keep at 16 or 31 bits)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

TARGETS = {"mlu:cnml": "fused", "mlu:cnnl": "layer"}
# Real int8 runtimes: which layers to keep in float, in the runtime's own terms (the targets of
# mluverify.tune.RUNTIMES, named here so that building the parser imports no torch).
RUNTIME_TARGETS = ("ort:int8", "openvino:int8")
RUNTIME_OPTIONS = ("scheme", "preset", "granularity")
# Exit status per outcome (2 is bad input, as for every command).
EXIT_STATUS = {"within-bound": 0, "tuned": 0, "impossible": 1, "budget-spent": 1}


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tune", help="find the fewest precision / fusion changes that bring a model within its bound",
        description="Search, ordered by each layer's and op's own error, for the fewest layers to keep "
                    "at higher precision (int8 -> int16 -> float) and ops to force out of fusion "
                    "(fused -> CNNL) so that MODEL_SCRIPT's model meets the bound; writes the answer "
                    "as a qconfig for quantize_dynamic_mlu (qconfig.json) and a DEBUG_FORCED_FALLBACK_OPS "
                    "value (fallback.env), a pytest case checking it (test_tuned.py), tune.json and "
                    "tune.html. MODEL_SCRIPT defines model(), calibration_inputs() and eval_inputs() "
                    "(training: model(), train_inputs() -> (inputs, target), loss(output, target)). "
                    "Exit status 0 when the bound is met (or already was), 1 when it is not, 2 on bad input.")
    parser.add_argument("script", metavar="MODEL_SCRIPT", help="Python file defining the model and its inputs")
    parser.add_argument("--target", default="mlu:cnml", choices=sorted(TARGETS) + list(RUNTIME_TARGETS),
                        help="mlu:cnml (fused, default), mlu:cnnl (layer by layer, no fusion knobs), or a real "
                             "int8 runtime: ort:int8 (onnxruntime's quantize_static; the answer is its "
                             "nodes_to_exclude, in quantize_static.json) or openvino:int8 (NNCF; the answer is "
                             "its IgnoredScope names, in ignored_scope.json)")
    parser.add_argument("--scheme", default=None,
                        help="ort:int8: the quantizer's scheme (s8s8, default, or u8s8)")
    parser.add_argument("--preset", default=None,
                        help="openvino:int8: NNCF's preset (performance, default, or mixed)")
    parser.add_argument("--granularity", default=None,
                        help="int8 runtime: per-tensor or per-channel weight scales (default: the runtime's, "
                             "ort:int8 per-tensor, openvino:int8 per-channel)")
    parser.add_argument("--mode", default="inference", choices=("inference", "training"),
                        help="inference (quantize_dynamic_mlu) or training (adaptive_quantize gradients)")
    parser.add_argument("--dtype", default="int8", choices=("int8", "int16"),
                        help="the precision every layer starts at (inference)")
    parser.add_argument("--bound", type=float, default=None,
                        help="bound on rel_mse (default 0.02, the cnml policy)")
    parser.add_argument("--task", metavar="METRIC:REFERENCE[:EFFECT]", default=None,
                        help="judge by a task metric instead of rel_mse (inference): top1_agreement (with the "
                             "float model) or accuracy (against MODEL_SCRIPT's eval_labels()), its reference and "
                             "optionally the effect share the gate is sized for (default 0.01), e.g. "
                             "top1_agreement:0.99; the gate is the task-level gate's")
    parser.add_argument("--budget", type=int, default=None, help="most trials (default 32)")
    parser.add_argument("--strategy", default="attribution", choices=("attribution", "bisection", "greedy"))
    parser.add_argument("--start", metavar="JSON", default=None,
                        help='starting config file: {"layers": {"fc1": "int16"}, "fallback_ops": ["aten::gelu"]}; '
                             'ort:int8: {"nodes_to_exclude": ["/fn/conv3/Conv"]}')
    parser.add_argument("--out", metavar="DIR", default="tune", help="where the answer goes (default: ./tune)")
    parser.set_defaults(func=_run)


def _start(path: str | None) -> dict | None:
    from mluverify.errors import InvalidArgument

    if path is None:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise InvalidArgument(f"--start {path!r} is not a readable JSON file: {exc}") from None


def _run(args: argparse.Namespace) -> int:
    from mluverify.tune import DEFAULT_BOUND, DEFAULT_BUDGET
    from mluverify.tune._search import check_budget

    budget = check_budget(DEFAULT_BUDGET if args.budget is None else args.budget)
    bound = DEFAULT_BOUND if args.bound is None else args.bound
    _check_task_options(args)
    _check_runtime_options(args)
    start = _start(args.start)
    from mluverify.compat import script_folder_on_path

    with script_folder_on_path(args.script):  # as exec and capture run theirs: it imports its neighbours
        result = _tune(args, bound, budget, start)
    from mluverify.tune._output import write_outputs

    paths = write_outputs(result.as_data(budget), args.script, args.out, args.target)
    print(result.message)
    print(f"{len(result.search.trials)} trials, {result.search.seconds:.1f} s; answer in {args.out}: "
          + ", ".join(sorted(p.name for p in paths.values())))
    return EXIT_STATUS[result.search.status]


def _check_task_options(args: argparse.Namespace) -> None:
    from mluverify.errors import InvalidArgument

    if args.task is None:
        return
    if args.mode == "training":
        raise InvalidArgument("--task judges inference; a training step is judged by its gradients' rel_mse")
    if args.bound is not None:
        raise InvalidArgument("--task and --bound exclude each other: with a task, its gate is the bound")


def _check_runtime_options(args: argparse.Namespace) -> None:
    """The options an int8 runtime takes, and the ones it does not."""
    from mluverify.errors import InvalidArgument

    given = [f"--{name}" for name in RUNTIME_OPTIONS if getattr(args, name) is not None]
    if args.target not in RUNTIME_TARGETS:
        if given:
            raise InvalidArgument(f"{', '.join(given)} set(s) an int8 runtime's quantizer; {args.target} takes "
                                  f"--dtype: use --target {' or '.join(RUNTIME_TARGETS)}")
        return
    if args.mode == "training":
        raise InvalidArgument(f"{args.target} tunes inference: --mode training runs on the emulator (mlu:cnml)")
    if args.dtype != "int8":
        raise InvalidArgument(f"{args.target} quantizes to int8 and keeps layers in float: --dtype {args.dtype} "
                              f"is the emulator's")


def _runtime_options(args: argparse.Namespace) -> dict:
    return {name: getattr(args, name) for name in RUNTIME_OPTIONS if getattr(args, name) is not None}


def _task(spec: str, script: dict, path: str):
    """``METRIC:REFERENCE[:EFFECT]`` as a ``Task`` (accuracy: labels from ``eval_labels()``)."""
    from mluverify import Task, TaskBudget
    from mluverify.errors import InvalidArgument

    metric, _, rest = spec.partition(":")
    reference, _, effect = rest.partition(":")
    try:
        budget = TaskBudget(effect_share=float(effect)) if effect else TaskBudget()
        reference_value = float(reference)
    except ValueError:
        raise InvalidArgument(f"--task {spec!r}: expected METRIC:REFERENCE[:EFFECT], numbers after the "
                              f"metric, e.g. top1_agreement:0.99") from None
    labels = None
    if metric == "accuracy":
        if not callable(script.get("eval_labels")):
            raise InvalidArgument(f"--task accuracy needs the true labels: model script {path!r} defines no "
                                  f"eval_labels()")
        labels = script["eval_labels"]()
    return Task(metric, reference_value, labels=labels, budget=budget)


def _tune(args: argparse.Namespace, bound: float, budget: int, start: dict | None):
    import mluverify.device  # noqa: F401  (registers "mlu")
    from mluverify.tune import tune_inference, tune_training
    from mluverify.tune._script import INFERENCE_NAMES, TRAINING_NAMES, load_script

    if args.mode == "training":
        script = load_script(args.script, TRAINING_NAMES)
        inputs, target = script["train_inputs"]()
        return tune_training(script["model"](), inputs, target, script["loss"], bound=bound, budget=budget,
                             strategy=args.strategy, start=start)
    script = load_script(args.script, INFERENCE_NAMES)
    task = _task(args.task, script, args.script) if args.task else None
    if args.target in RUNTIME_TARGETS:
        from mluverify.tune import tune_runtime

        return tune_runtime(args.target, script["model"](), list(script["calibration_inputs"]()),
                            script["eval_inputs"](), bound=bound, budget=budget, strategy=args.strategy,
                            start=start, task=task, options=_runtime_options(args))
    return tune_inference(script["model"](), list(script["calibration_inputs"]()), script["eval_inputs"](),
                          bound=bound, budget=budget, dtype=args.dtype, mode=TARGETS[args.target],
                          strategy=args.strategy, start=start, task=task)
