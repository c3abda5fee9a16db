"""One hyper-parameter of an output layer or of the base network: default, type, help line and allowed range.

Every value, from ``presets.yaml``, a workflow configuration or ``--set key=value``, is checked by its
:class:`Hyperparameter` (JSON Schema's range words; finite floats only); :meth:`Hyperparameter.json_schema` gives the
configuration schema's entry.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

_TYPES = (float, int, bool, str)
_INT = re.compile(r"^[+-]?[0-9][0-9_]*$")


_NULL_WORDS = ("null", "none", "~", "")
_TRUE_WORDS, _FALSE_WORDS = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


@dataclass(frozen=True)
class Hyperparameter:
    """One hyper-parameter: default value, type (float, int, bool or str), help line and allowed range.

    The range follows JSON Schema's words: ``minimum``/``maximum`` (inclusive), ``exclusive_minimum``/
    ``exclusive_maximum``; ``nullable`` allows ``None`` as a value of its own (e.g. "the whole split"). Floats must
    be finite. The base network declares its hyper-parameters the same way (``presets.yaml``,
    ``hyperparameters:``), so every value, from a preset, a workflow config or ``--set``, is checked once here.
    """

    default: Any
    type: type = float
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    exclusive_maximum: float | None = None
    nullable: bool = False

    def declaration_problem(self) -> str | None:
        """What is wrong with the declaration itself, in words (a layer's registration is refused for it), or None:
        a type of float, int, bool or str, a range only for an int or float, each bound a finite number, the range not
        empty, the default a value of the declared type inside the range (``None`` only when ``nullable``)."""
        if self.type not in _TYPES:
            return f"its type must be one of float, int, bool, str; got {getattr(self.type, '__name__', self.type)!r}"
        bounds = {"minimum": self.minimum, "maximum": self.maximum, "exclusive_minimum": self.exclusive_minimum,
                  "exclusive_maximum": self.exclusive_maximum}  # fmt: skip
        given = {word: bound for word, bound in bounds.items() if bound is not None}
        if given and self.type not in (int, float):
            return f"a {self.type.__name__} has no range ({', '.join(given)} given)"  # bool, str
        for word, bound in given.items():
            if isinstance(bound, bool) or not isinstance(bound, int | float) or not math.isfinite(bound):
                return f"{word} must be a finite number, got {bound!r}"
        lows = [(self.minimum, False), (self.exclusive_minimum, True)]
        highs = [(self.maximum, False), (self.exclusive_maximum, True)]
        for low, open_low in (bound for bound in lows if bound[0] is not None):
            for high, open_high in (bound for bound in highs if bound[0] is not None):
                if low > high or (low == high and (open_low or open_high)):
                    return f"its range ({self.range_text()}) holds no value"
        if self.default is None:
            return None if self.nullable else "its default is None: give a value, or declare it nullable=True"
        value = self.default  # an int for a float is one (as check() takes it), a float for an int is not
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        fault = self._fault(value)
        words = {"type": f"a{'n' if self.type is int else ''} {self.type.__name__}", "finite": "a finite number",
                 "range": None}  # fmt: skip
        if fault is None:
            return None
        return f"its default {self.default!r} is not {words[fault] or self.range_text()}"

    def range_text(self) -> str:
        """The allowed range in words, e.g. ``in [0, 1)`` or ``> 0`` (empty when unbounded)."""
        lo = (f"[{self.minimum:g}" if self.minimum is not None else
              f"({self.exclusive_minimum:g}" if self.exclusive_minimum is not None else None)  # fmt: skip
        hi = (f"{self.maximum:g}]" if self.maximum is not None else
              f"{self.exclusive_maximum:g})" if self.exclusive_maximum is not None else None)  # fmt: skip
        if lo and hi:
            return f"in {lo}, {hi}"
        if lo:
            return (">= " if lo[0] == "[" else "> ") + lo[1:]
        if hi:
            return ("<= " if hi[-1] == "]" else "< ") + hi[:-1]
        return ""

    def check(self, value, key: str):
        """``value`` as this hyper-parameter's type, inside its range; ValueError naming ``key`` otherwise.

        An int given for a float becomes a float, an integral float given for an int an int; ``None`` passes only
        when ``nullable``.
        """
        if value is None:
            if self.nullable:
                return None
            raise ValueError(f"{key} must be a {self.type.__name__}, got null")
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif self.type is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        fault = self._fault(value)
        if fault == "type":
            hint = ""
            if self.type is float and isinstance(value, str):
                hint = " (YAML 1.1 reads 1e-3 as a string: write 1.0e-3)"
            raise ValueError(f"{key} must be of type {self.type.__name__}, got {value!r}{hint}")
        if fault == "finite":
            raise ValueError(f"{key} must be a finite number, got {value!r}")
        if fault == "range":
            raise ValueError(f"{key} must be {self.range_text()}, got {value!r}")
        return value

    def _fault(self, value) -> str | None:
        """What ``value`` (already coerced as :meth:`check` coerces) breaks: ``"type"``, ``"finite"`` (a float's),
        ``"range"`` (an int's or a float's), or None."""
        if not isinstance(value, self.type) or (self.type is not bool and isinstance(value, bool)):
            return "type"
        if self.type is float and not math.isfinite(value):
            return "finite"
        if self.type in (int, float) and not self._in_range(value):
            return "range"
        return None

    def _in_range(self, value) -> bool:
        return (
            (self.minimum is None or value >= self.minimum)
            and (self.maximum is None or value <= self.maximum)
            and (self.exclusive_minimum is None or value > self.exclusive_minimum)
            and (self.exclusive_maximum is None or value < self.exclusive_maximum)
        )

    def coerce(self, value, key: str):
        """Like :meth:`check`, but ``None`` means the default (how output layers read a whole preset)."""
        return self.default if value is None else self.check(value, key)

    def parse(self, text: str, key: str):
        """The typed value of the command-line text ``text`` (``--set key=text``), checked; ``None`` for null.

        Parsed by the declared type, never as YAML: ``1e-3`` is a float, ``1`` for a float is 1.0, ``yes`` is a
        bool only where a bool is declared. ``null``/``none``/``~``/empty give ``None`` (the caller decides
        whether that is allowed).
        """
        raw = text.strip()
        if raw.lower() in _NULL_WORDS:
            return None
        if self.type is str:
            return self.check(raw, key)
        if self.type is bool:
            if raw.lower() in _TRUE_WORDS + _FALSE_WORDS:
                return raw.lower() in _TRUE_WORDS
            raise ValueError(f"{key} must be true or false, got {text!r}")
        try:
            number = float(raw)
            value = int(raw.replace("_", "")) if self.type is int and _INT.match(raw) else number
        except ValueError:
            raise ValueError(f"{key} must be a{'n' if self.type is int else ''} {self.type.__name__}, "
                             f"got {text!r}") from None  # fmt: skip
        if self.type is int and isinstance(value, float) and not value.is_integer():
            raise ValueError(f"{key} must be an int, got {text!r}")
        return self.check(value, key)

    def json_schema(self) -> dict:
        """This declaration as a JSON Schema (for config validation)."""
        kind = {float: "number", int: "integer", bool: "boolean", str: "string"}[self.type]
        schema: dict[str, Any] = {"type": [kind, "null"] if self.nullable else kind}
        bounds = {"minimum": self.minimum, "maximum": self.maximum}
        bounds.update(exclusiveMinimum=self.exclusive_minimum, exclusiveMaximum=self.exclusive_maximum)
        schema.update({word: bound for word, bound in bounds.items() if bound is not None})
        if self.help:
            schema["description"] = self.help
        return schema


def format_value(value) -> str:
    """Canonical text of a hyper-parameter value, which :meth:`Hyperparameter.parse` reads back: ``null``, ``true``,
    ``false``, an int's digits, a string as is, a float's shortest round-trip ``repr`` (a run's tag, its ``--set``
    arguments, a ``check-layer --point``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return value
    return repr(float(value))
