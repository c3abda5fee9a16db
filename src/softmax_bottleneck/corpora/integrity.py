"""Why a file the user passed in cannot be read, said in one line.

``torch.load(weights_only=True)`` and ``numpy.load(allow_pickle=False)`` never run code from a file, but on a
wrong file they raise a zoo of exceptions with unhelpful messages: ``KeyError: 101`` for a text file,
``EOFError`` with no message for an empty one, a five-line ``UnpicklingError`` for a pickle of arbitrary objects.
:data:`LOAD_ERRORS` lists what to catch around such a load (and only around it), :func:`describe_load_error`
turns the exception into a short reason for a one-line message that names the file.

:func:`seal` / :func:`check_seal`: the SHA-256 of a saved file's content (tensors' bytes and the metadata) stored
inside the file, so that ``model.pt``, a resume state and a corpus cache are each verifiable alone.
"""

from __future__ import annotations

import hashlib
import pickle
import struct
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


def describe_load_error(exc: BaseException, path=None) -> str:
    """A short reason (no newline) for an exception of :data:`LOAD_ERRORS` raised while loading a file (``path``:
    the file, whose first byte tells a bare pickle from other files the weights-only loader refuses)."""
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
        # a class or function to call, what a planted pickle holds: torch says "Unsupported global: GLOBAL x.y" for
        # most, "unsupported GLOBAL posix.system whose module posix is blocked" for a blocked module
        if "unsupported global" in message.lower():
            return "holds pickled Python objects, not only tensors (refused: loading it could run code)"
        if path is not None and _first_byte(path) == b"\x80":  # a pickle's protocol marker: Python objects
            return "a bare pickle of Python objects, not a torch file (refused: nothing in it was run)"
        detail = message.partition("WeightsUnpickler error:")[2].strip()
        return f"not a file torch.save wrote ({_first_line(detail) or 'unreadable'})"
    if isinstance(exc, pickle.UnpicklingError | KeyError | UnicodeDecodeError):
        return f"not a PyTorch tensor file ({type(exc).__name__}: {_first_line(message) or 'unreadable'})"
    if "PytorchStreamReader" in message or isinstance(exc, zipfile.BadZipFile):
        return f"truncated or corrupt archive ({_first_line(message)})"
    if "mmap length is greater than file size" in message or message.startswith("EOF:"):
        return "truncated file (shorter than its header announces)"
    if "pickled (object) data" in message:
        return "not a .npy array file (it holds pickled data, which is never loaded)"
    return f"{type(exc).__name__}: {_first_line(message) or 'unreadable'}"


def load_tensors(path):
    """``torch.load(path, map_location="cpu", weights_only=True)``: tensors and plain data only, never code. torch's
    warning about a pickle protocol it did not write (a bare pickle, refused a moment later) is not printed."""
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
        return torch.load(path, map_location="cpu", weights_only=True)


def _first_byte(path) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read(1)
    except OSError:
        return b""


# --------------------------------------------------------------------------- checksums
def file_sha256(path) -> str:
    """The SHA-256 of a file's bytes, hex (``hashlib.file_digest``): a model, a curve, a data file, a source file."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


#: the key under which a saved file (model.pt, a resume state, a corpus cache) carries the checksum of its content
CONTENT_KEY = "content_sha256"


#: the most objects (containers, keys, values, tensors) a checksummed file may hold: a torch file can share one list
#: inside itself so that its 2 KB unfold into 2^61 of them; the largest file the package writes, WikiText-2's corpus
#: cache, holds 33,297
MAX_OBJECTS = 2_000_000


def content_sha256(obj) -> str:
    """SHA-256 of a nest of dicts, lists, strings, numbers and tensors: every tensor's dtype, shape and bytes, every
    key and value, in order. Equal content gives the same checksum wherever the file lives (it hashes the content,
    not the archive), so a file that carries it (:func:`seal`) is verifiable alone (:func:`check_seal`).

    TypeError for what cannot be checksummed: another type, more than :data:`MAX_OBJECTS` objects, a tensor that
    shows more elements than its storage holds (an expanded view: hashing it would write them all out)."""
    digest = hashlib.sha256()
    _feed(digest, obj, [MAX_OBJECTS])
    return digest.hexdigest()


def _feed(digest, obj, budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise TypeError(f"more than {MAX_OBJECTS:,} objects (a nest that shares itself)")
    if obj is None or isinstance(obj, bool):
        digest.update(b"N" if obj is None else b"T" if obj else b"F")
    elif isinstance(obj, int):
        digest.update(b"i%d;" % obj)
    elif isinstance(obj, float):
        digest.update(b"f" + struct.pack("<d", obj))
    elif isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
        digest.update(b"s%d:" % len(data) + data)
    elif isinstance(obj, bytes):
        digest.update(b"b%d:" % len(obj) + obj)
    elif isinstance(obj, dict):
        digest.update(b"d%d{" % len(obj))
        for key, value in obj.items():
            _feed(digest, key, budget)
            _feed(digest, value, budget)
        digest.update(b"}")
    elif isinstance(obj, list | tuple):
        digest.update(b"l%d[" % len(obj))
        for value in obj:
            _feed(digest, value, budget)
        digest.update(b"]")
    elif type(obj).__module__.startswith("torch") and hasattr(obj, "dtype"):
        import torch

        if obj.layout == torch.strided and obj.numel() * obj.element_size() > obj.untyped_storage().nbytes():
            raise TypeError(
                f"a tensor of shape {tuple(obj.shape)} whose storage holds fewer elements (an expanded view)"
            )
        flat = obj.detach().cpu().contiguous().reshape(-1)
        digest.update(f"t{obj.dtype}{tuple(obj.shape)}:".encode())
        if flat.numel():
            digest.update(flat.view(torch.uint8).numpy().data)
    else:
        raise TypeError(f"cannot checksum a {type(obj).__name__}")


def seal(blob: dict) -> dict:
    """``blob`` with :data:`CONTENT_KEY` set to the checksum of everything else in it."""
    content = {k: v for k, v in blob.items() if k != CONTENT_KEY}
    return {**content, CONTENT_KEY: content_sha256(content)}


def check_seal(blob: dict) -> str | None:
    """``None`` when ``blob`` carries the checksum of its content, else why not (missing / which checksum differs)."""
    recorded = blob.get(CONTENT_KEY)
    if not isinstance(recorded, str) or len(recorded) != 64:
        return f"no checksum of its content ({CONTENT_KEY})"
    try:
        actual = content_sha256({k: v for k, v in blob.items() if k != CONTENT_KEY})
    except TypeError as err:
        return f"content that cannot be checksummed ({err})"
    if actual != recorded:
        return f"its content has SHA-256 {actual[:16]}…, not the {recorded[:16]}… it records (damaged or edited)"
    return None
