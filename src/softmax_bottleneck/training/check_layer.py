"""``python -m softmax_bottleneck check-layer``: the conformance checks (:mod:`.conformance`) from the command line.

::

    check-layer NAME [NAME ...]          # the registered defaults of each layer's own hyper-parameters
    check-layer NAME --point K=V,K=V ... # each point given (repeatable): the workflow passes every point it trains
    check-layer NAME --stamp FILE        # also write the stamp, only when every check passes at every point
    check-layer --all | --list

Each failure prints ``check-layer: LAYER [POINT]: CHECK: what is wrong`` on stderr and the command exits with 1. A
layer that passes every check is then timed against Softmax (``COST``: :func:`.layer_cost.relative_cost`).
"""

from __future__ import annotations

import logging
import sys

import torch

from softmax_bottleneck.models.output_layers.provenance import source_tag
from softmax_bottleneck.models.output_layers.registry import broken_plugins, layer_source, output_layers
from softmax_bottleneck.training.conformance import CheckResult, check_layer, parse_point, point_text
from softmax_bottleneck.training.conformance_stamp import write_stamp
from softmax_bottleneck.training.layer_cost import relative_cost

#: what the measured cost means for the plan (printed after it)
COST_NOTE = (
    "plan and costs price a layer the paper does not time at its cost proxy's paper time: measure a paper-size "
    "run with python -m softmax_bottleneck bench (docs/costs.md)"
)


def add_cli(parser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME", help="registered output layer(s) to check")
    parser.add_argument("--all", action="store_true", help="check every registered output layer")
    parser.add_argument("--list", action="store_true", help="list the registered output layers (and broken plug-ins)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    parser.add_argument(
        "--point",
        action="append",
        default=[],
        metavar="KEY=VALUE,...",
        help="with one NAME: check at these values of the layer's own hyper-parameters instead of its registered "
        "defaults (repeatable: every point is checked; the workflow passes every point its configuration trains)",
    )
    parser.add_argument(
        "--stamp",
        metavar="FILE",
        help="with one NAME: write a JSON stamp (name, distribution, version, module SHA-256, the points checked) to "
        "FILE only when every check passes at every point (the workflow checks each plug-in before training it)",
    )


def _origin(name: str) -> str:
    """``built-in``, or ``plug-in module.Class, distribution version, source name@digest`` (the digest the
    summaries' ``layer_source`` column shows; distribution and version where known)."""
    source = layer_source(name)
    if source["builtin"]:
        return "built-in"
    parts = [f"plug-in {source['class']}"]
    if source["distribution"]:
        parts.append(f"{source['distribution']} {source['version']}")
    if source["source_sha256"]:
        parts.append(f"source {source_tag(name, source['source_sha256'])}")
    return ", ".join(parts)


def _list(layers: dict, broken: dict) -> int:
    for spec in layers.values():
        print(f"{spec.name:20s} {spec.display:12s} family {spec.family:8s} {_origin(spec.name)}")
    for name, reason in broken.items():
        print(f"{name:20s} {'BROKEN':12s} {reason}")
    return 0


def run_cli(args) -> int:
    layers = output_layers()
    # one line per broken plug-in, also one named like a registered layer (which keeps the name: said, not hidden)
    seen: set[str] = set()
    broken = {n: r for n, r in broken_plugins().items() if not (r in seen or seen.add(r))}
    if args.list:
        return _list(layers, broken)
    names = list(layers) if args.all else args.names
    if not names:
        raise SystemExit("check-layer: name an output layer (or --all, --list)")
    for option in ("stamp", "point"):
        if getattr(args, option, None) and len(names) != 1:
            raise SystemExit(f"check-layer: --{option} takes exactly one NAME")
    reasons = broken_plugins()
    unknown = [n for n in names if n not in layers and n not in reasons]
    if unknown:
        raise SystemExit(f"check-layer: unknown output layer {unknown[0]!r}; registered: {', '.join(layers)}")
    if not args.all and any(n not in layers for n in names):
        raise SystemExit(f"check-layer: {reasons[next(n for n in names if n not in layers)]}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("check-layer: --device cuda was asked for but CUDA is not available")
    try:
        points = [parse_point(names[0], text) for text in args.point] or [{}]
    except ValueError as err:
        raise SystemExit(f"check-layer: {err}") from None
    package_log = logging.getLogger("softmax_bottleneck")
    level = package_log.level
    package_log.setLevel(logging.WARNING)  # the checks train tiny models: their progress lines are noise here
    try:
        failures = _run(names, layers, broken if args.all else {}, points, args)
    finally:
        package_log.setLevel(level)
    for failure in failures:
        print(f"check-layer: {failure.where}: {failure.check}: {failure.detail}", file=sys.stderr)
    return 1 if failures else 0


def _run(names: list[str], layers: dict, broken: dict, points: list[dict], args) -> list[CheckResult]:
    """Check each layer of ``names`` at every point; then each ``broken`` plug-in fails its load."""
    failures = []
    for name in names:
        spec = layers[name]
        results = []
        for point in points:
            at = f", {point_text(spec.layer_hp(point))}" if spec.hyperparameters else ""
            print(f"{name} ({spec.cls.__module__}.{spec.cls.__qualname__}) on {args.device}{at}:")
            for result in check_layer(name, args.device, point=point):
                print(f"  {result.status.upper():4s}  {result.check:18s} {result.detail}")
                results.append(result)
        failures += [r for r in results if r.status == "fail"]
        if not failures:
            print(f"  COST  {relative_cost(name, args.device, points[0]).text()}; {COST_NOTE}")
        if getattr(args, "stamp", None) and not failures:
            write_stamp(name, args.stamp, results, points)
            print(f"stamp written: {args.stamp}")
    for name, reason in broken.items():
        print(f"{name}: BROKEN  {reason}")
        failures.append(CheckResult(name, "load", "fail", reason))
    return failures
