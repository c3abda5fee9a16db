"""The error of a refused output-layer registration or hyper-parameter declaration."""

from __future__ import annotations


class RegistryError(ValueError):
    """A registration or a plug-in is invalid (the message names the layer or the entry point); ``name``: the layer
    name a refused registration asked for (None where there is none)."""

    def __init__(self, message: str, name: str | None = None):
        super().__init__(message)
        self.name = name
