"""The error of a refused output-layer registration or hyper-parameter declaration, and a plug-in error as one line."""

from __future__ import annotations

import re


class RegistryError(ValueError):
    """A registration or a plug-in is invalid (the message names the layer or the entry point); ``name``: the layer
    name a refused registration asked for (None where there is none)."""

    def __init__(self, message: str, name: str | None = None):
        super().__init__(message)
        self.name = name


def one_line(text) -> str:
    """A plug-in's error text as one line a terminal shows, never obeys: control characters (a line break, a
    terminal's escape) as spaces, runs of spaces as one."""
    return " ".join(re.sub(r"[\x00-\x1f\x7f-\x9f]", " ", str(text)).split())
