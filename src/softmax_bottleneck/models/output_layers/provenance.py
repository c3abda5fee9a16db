"""Which source of its output layer trained a run, and whether that source is still the one registered.

A trained run records its layer's source in ``metrics.json`` (``environment.software.output_layer``: the
:func:`~.registry.layer_source` record, with the SHA-256 of the module file that defines the layer). A summary keeps
it as ``<layer>@<first 16 hex digits>`` (:func:`source_tag`); a table, figure or plan whose runs an older source
made says so, and retrains nothing (docs/adding-an-output-layer.md, "When the layer's code changes").
"""

from __future__ import annotations

from softmax_bottleneck.models.output_layers.registry import layer_source

#: hex digits of a layer module's SHA-256 in a summary's ``layer_source`` column (``taylor@<16 hex digits>``)
SOURCE_DIGITS = 16


def source_tag(name: str, sha256: str | None) -> str:
    """``taylor@0123456789abcdef``: a layer and the first :data:`SOURCE_DIGITS` hex digits of its module's SHA-256."""
    return f"{name}@{(sha256 or '')[:SOURCE_DIGITS]}"


def current_tag(name: str) -> str:
    """:func:`source_tag` of the layer ``name`` as registered now."""
    return source_tag(name, layer_source(name)["source_sha256"])


def _recorded(metrics: dict) -> dict:
    return ((metrics.get("environment") or {}).get("software") or {}).get("output_layer") or {}


def layer_source_tag(metrics: dict) -> str | None:
    """:func:`source_tag` of the layer that trained the finished run ``metrics`` (a ``metrics.json`` record); None
    when the record has no source (older runs, a layer defined outside a file)."""
    record = _recorded(metrics)
    name, digest = record.get("name"), record.get("source_sha256")
    if not isinstance(name, str) or not isinstance(digest, str) or not digest:
        return None
    return source_tag(name, digest)


def older_source_note(name: str) -> str:
    return f"trained with an older source of {name}"


def older_layer_source(metrics: dict, output_layer: str | None = None) -> str | None:
    """:func:`older_source_note` when the finished run ``metrics`` was trained with another source of its output
    layer than the one registered now (distribution, version and module SHA-256 compared; built-in layers too);
    None when the same, when the record predates the recording of the source, or when the layer is no longer
    registered. ``output_layer`` defaults to the record's own."""
    record = _recorded(metrics)
    name = output_layer or record.get("name") or (metrics.get("hyperparameters") or {}).get("output_layer")
    if not name or not record.get("source_sha256"):
        return None
    try:
        now = layer_source(name)
    except ValueError:
        return None
    if all(record.get(field) == now[field] for field in ("distribution", "version", "source_sha256")):
        return None
    return older_source_note(name)


def older_tag_layer(tag) -> str | None:
    """The layer of ``tag`` (:func:`source_tag`) when it names another module SHA-256 than the layer registered now
    has; None when the same, for an empty tag, or when the layer is no longer registered (or has no module file)."""
    if not isinstance(tag, str) or "@" not in tag:
        return None
    name, _, digest = tag.rpartition("@")
    try:
        now = layer_source(name)["source_sha256"]
    except ValueError:
        return None
    if not now or now[: len(digest)] == digest:
        return None
    return name
