"""The conformance stamp: a layer's checks recorded once, and whether the stamp still vouches for the layer.

``check-layer NAME --stamp FILE`` writes it (:func:`write_stamp`) only when every check of :mod:`.conformance`
passed at every point; the trainer reads it (:func:`conformance_stamp_ok`) before training a plug-in layer, so a
workflow checks each plug-in once, on CPU.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from softmax_bottleneck import readback
from softmax_bottleneck.atomic import atomic_write_json
from softmax_bottleneck.models.output_layers.registry import layer_source, output_layer
from softmax_bottleneck.training.conformance import CHECKS, CheckResult, point_argument, point_text

#: the fields of a stamp that must equal the layer registered now (layer_source)
STAMP_FIELDS = ("name", "distribution", "version", "source_sha256")


def write_stamp(name: str, path: str | Path, results: list[CheckResult], points: list[dict] | None = None) -> dict:
    """Write the conformance stamp of ``name`` to ``path`` (JSON: :data:`STAMP_FIELDS`, the class, the checks run,
    the ``points`` checked, each with every own hyper-parameter filled in; default: the registered defaults);
    ValueError, and nothing written, unless every check passed or was skipped at every point."""
    failed = [r for r in results if r.status == "fail"]
    if failed or not results:
        raise ValueError(f"{name}: no stamp written: {len(failed)} conformance check(s) failed")
    spec = output_layer(name)
    stamp = {**layer_source(name), "checks": {r.check: r.status for r in results}}
    stamp["points"] = [spec.layer_hp(point) for point in points or [{}]]
    stamp.pop("module_file", None)  # where it is installed is not what it is
    atomic_write_json(stamp, Path(path))
    return stamp


def conformance_stamp_ok(path: str | Path, name: str, hp: dict | None = None) -> tuple[bool, str]:
    """Whether the stamp at ``path`` vouches for the output layer ``name`` registered now (at the point of ``hp``, a
    run's hyper-parameters, when given), and why not.

    ``(True, "")`` when the stamp exists, is ``name``'s, records every check of :data:`CHECKS` as passed (or
    skipped), names the same distribution, version and module SHA-256 as :func:`layer_source` gives now and, with
    ``hp``, lists the run's values of the layer's own hyper-parameters among its points; otherwise
    ``(False, one-line reason)`` saying to run ``check-layer`` again. Cheap: no check is run, no module is built.
    """
    redo = f"run: python -m softmax_bottleneck check-layer {name} --stamp {path}"
    try:
        stamp = readback.load_json(path)
    except FileNotFoundError:
        return False, f"{name}: no conformance stamp at {path}; {redo}"
    except readback.ReadbackError as err:
        return False, f"{name}: unreadable conformance stamp ({err}); {redo}"
    try:
        now = layer_source(name)
        spec = output_layer(name)
    except ValueError as err:
        return False, f"{name}: {err}"
    checks = stamp.get("checks") if isinstance(stamp, dict) else None
    if not isinstance(checks, dict) or not set(CHECKS) <= set(checks):
        return False, f"{name}: the stamp {path} does not record every conformance check; {redo}"
    if any(status not in ("pass", "skip") for status in checks.values()):
        return False, f"{name}: the stamp {path} does not record passed checks; {redo}"
    if isinstance(stamp, dict) and stamp.get("name") != name:
        return False, f"{name}: the stamp {path} is another layer's ({stamp.get('name')!r}); {redo}"
    changed = [field for field in STAMP_FIELDS if stamp.get(field) != now[field]]
    if changed:
        was = ", ".join(f"{f} {stamp.get(f)!r} → {now[f]!r}" for f in changed)
        return False, f"{name}: the layer changed since it was checked ({was}); {redo}"
    if hp is not None:
        point = spec.layer_hp(hp)
        try:
            points = [spec.layer_hp(p) for p in stamp.get("points") or [{}]]
        except (TypeError, ValueError, AttributeError):
            points = []
        if point not in points:
            # the stamp is written anew: its points so far and this one, so that no run it vouched for loses it
            options = " ".join(f"--point {shlex.quote(point_argument(p))}" for p in [*points, point])
            return False, (f"{name}: the stamp {path} does not vouch for {point_text(point)} (checked: "
                           f"{'; '.join(point_text(p) for p in points) or 'nothing'}); run: python -m "
                           f"softmax_bottleneck check-layer {name} {options} --stamp {path}")  # fmt: skip
    return True, ""
