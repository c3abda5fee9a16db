"""Which variants a table or figure shows, in which order, under which name and in which colour.

Nothing here keeps a list of variants: names, display names and colours come from the output-layer registry
(:func:`softmax_bottleneck.presets.variant_info`), and the paper's order of rows comes from the paper's own
tables (``data/reported``). A table or figure that compares output layers shows the paper's variants in the
paper's order, then every other variant present in its summary in registry order (e.g. a user's plug-in layer),
then variants that are no longer registered, by name.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence

from softmax_bottleneck import presets


def registry_order() -> tuple[str, ...]:
    """Every registered variant: the paper's layers in the paper's order, E10's variants, then plug-ins."""
    return presets.variants()


def display(variant: str) -> str:
    """The variant's display name (``lms_plif_frozen`` → ``LMS-PLIF†``); an unregistered name is shown as is."""
    try:
        return presets.display_name(variant)
    except ValueError:
        return str(variant)


def ordered(paper: Sequence[str], present: Iterable[str]) -> list[str]:
    """``paper`` (the paper's order), then the other ``present`` variants in registry order, then unknown ones."""
    out = list(dict.fromkeys(paper))
    present = [v for v in dict.fromkeys(present) if v not in out and isinstance(v, str)]
    registry = registry_order()
    out += [v for v in registry if v in present]
    out += sorted(v for v in present if v not in registry)
    return out


def rank(paper: Sequence[str], present: Iterable[str]) -> dict[str, int]:
    """Sort key of each variant of :func:`ordered` (its position)."""
    return {v: i for i, v in enumerate(ordered(paper, present))}


def _palette() -> list[str]:
    """Saturated qualitative colours (Dark2, Set1, tab10) for variants that declare none (plug-ins), then tab20's."""
    import matplotlib

    colours = []
    for name in ("Dark2", "Set1", "tab10", "tab20"):
        colours += [matplotlib.colors.to_hex(c) for c in matplotlib.colormaps[name].colors]
    return list(dict.fromkeys(colours))


def _distinct(colour: str, others: set[str], min_hue: float = 0.04) -> bool:
    """Saturated, and of another hue than every colour in ``others`` (greys never count as a hue)."""
    import matplotlib

    h, s, _ = matplotlib.colors.rgb_to_hsv(matplotlib.colors.to_rgb(colour))
    if s < 0.35:
        return False
    for other in others:
        oh, os_, _ = matplotlib.colors.rgb_to_hsv(matplotlib.colors.to_rgb(other))
        if os_ >= 0.2 and min(abs(h - oh), 1 - abs(h - oh)) < min_hue:
            return False
    return True


def colors() -> dict[str, str]:
    """One colour per registered variant: its declared colour, else the first palette colour that is at least
    :data:`~softmax_bottleneck.models.output_layers.colours.MIN_DELTA_E` (CIEDE2000) from every colour taken so far
    (the declared ones, then those given before it in registry order), as a declared colour must be, and saturated, of
    a hue of its own; with more such variants than the palette has colours, the next unused one."""
    import matplotlib

    from softmax_bottleneck.models.output_layers.colours import MIN_DELTA_E, delta_e

    infos = [presets.variant_info(v) for v in registry_order()]
    taken = [matplotlib.colors.to_hex(i.color) for i in infos if i.color]
    declared = set(taken)
    out = {}
    for info in infos:
        if info.color:
            out[info.name] = info.color
            continue
        unused = [c for c in _palette() if c not in taken]
        apart = [c for c in unused if all(delta_e(c, t) >= MIN_DELTA_E for t in taken)]
        choice = next((c for c in apart if _distinct(c, declared)), None) or next(iter(apart or unused), None)
        out[info.name] = choice or _palette()[len(out) % len(_palette())]
        taken.append(out[info.name])
    return out


def color(variant: str) -> str:
    """The colour of ``variant`` in every figure (see :func:`colors`); an unregistered name gets a stable one."""
    table = colors()
    if variant in table:
        return table[variant]
    declared = set(table.values())
    free = [c for c in _palette() if c not in declared] or _palette()
    return free[zlib.crc32(str(variant).encode()) % len(free)]


def ordered_models(paper: Sequence[str], present: Iterable[str]) -> list[str]:
    """Like :func:`ordered` for models named by display name and stars (``MoS*`` = the NT-ASGD MoS, Figure 3).

    The paper's models first, then the others by the registry order of the variant they name, then unknown ones.
    """
    out = list(dict.fromkeys(paper))
    present = [m for m in dict.fromkeys(present) if isinstance(m, str) and m not in out]
    position = {display(v): i for i, v in enumerate(registry_order())}

    def key(model: str) -> tuple:
        base = model.rstrip("*")
        return (position.get(base, len(position)), len(model) - len(base), model)

    return out + sorted(present, key=key)
