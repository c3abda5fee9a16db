"""Why a file the user passed in cannot be read, said in one line.

``torch.load(weights_only=True)`` and ``numpy.load(allow_pickle=False)`` never run code from a file, but on a
wrong file they raise a zoo of exceptions with unhelpful messages: ``KeyError: 101`` for a text file,
``EOFError`` with no message for an empty one, a five-line ``UnpicklingError`` for a pickle of arbitrary objects.
:data:`LOAD_ERRORS` lists what to catch around such a load (and only around it), :func:`describe_load_error`
turns the exception into a short reason for a one-line message that names the file.
"""

from __future__ import annotations

import pickle
import zipfile

#: what ``torch.load`` / ``numpy.load`` raise for a missing, empty, truncated, corrupt or foreign file
LOAD_ERRORS: tuple[type[BaseException], ...] = (
    OSError,
    EOFError,
    ValueError,
    RuntimeError,
    KeyError,
    IndexError,
    TypeError,
    AttributeError,
    pickle.UnpicklingError,
    zipfile.BadZipFile,
)

_MAX = 160


def _first_line(text: str) -> str:
    line = " ".join(text.strip().split("\n", 1)[0].split())
    return line if len(line) <= _MAX else line[: _MAX - 1] + "…"


def describe_load_error(exc: BaseException) -> str:
    """A short reason (no newline) for an exception of :data:`LOAD_ERRORS` raised while loading a file."""
    message = str(exc)
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, not a file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, EOFError):
        return "empty or truncated file"
    if isinstance(exc, pickle.UnpicklingError) and "Weights only load failed" in message:
        return "holds pickled Python objects, not only tensors (refused: loading it could run code)"
    if isinstance(exc, pickle.UnpicklingError | KeyError | UnicodeDecodeError):
        return f"not a PyTorch tensor file ({type(exc).__name__}: {_first_line(message) or 'unreadable'})"
    if "PytorchStreamReader" in message or isinstance(exc, zipfile.BadZipFile):
        return f"truncated or corrupt archive ({_first_line(message)})"
    if "mmap length is greater than file size" in message or message.startswith("EOF:"):
        return "truncated file (shorter than its header announces)"
    if "pickled (object) data" in message:
        return "not a .npy array file (it holds pickled data, which is never loaded)"
    return f"{type(exc).__name__}: {_first_line(message) or 'unreadable'}"
