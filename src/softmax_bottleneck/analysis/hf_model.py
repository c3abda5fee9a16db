"""A local Hugging Face causal language model folder, loaded as a folder from anyone may be (for ``analyze-lm``).

Loading never reaches the network and never runs code from the folder: ``local_files_only=True``,
``trust_remote_code=False`` and ``HF_HUB_OFFLINE=1``; a path that is not a local folder is refused before
``transformers`` could take it for a Hub name. Only safetensors weights are read (a pickle such as
``pytorch_model.bin`` is refused unread, with how to convert it), each file checked whole and its tensors' shapes
against ``config.json`` before the model is built (where the model can be built empty, on the meta device; else
loading itself finds the mismatch), and after loading every tensor of either side found in the other (a
``config.json`` of more or fewer layers than the weights); the model must be causal (a later token does not change
an earlier position's output); the folder must hold its tokenizer's vocabulary, of no more tokens than the model
outputs. Every failure is one :class:`~softmax_bottleneck.analysis.inputs.InputError` naming the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from softmax_bottleneck import readback
from softmax_bottleneck.analysis.inputs import InputError


@dataclass
class HeadInfo:
    """What the softmax bound needs from a model: ``d`` (the head's input size) and whether the head has a bias."""

    hidden_size: int | None  # config's hidden size (n_embd, d_model, ...)
    head_input_size: int | None  # d: the output layer's input size (= hidden_size for most models)
    output_bias: bool
    vocab_size: int  # the output layer's size: the matrix's columns
    softcapping: float | None  # a final logit soft-capping (Gemma 2): the head is then not linear

    @property
    def softmax_bound(self) -> int | None:
        d = self.head_input_size or self.hidden_size
        if d is None or self.softcapping:
            return None
        return d + (2 if self.output_bias else 1)


def _text_config(config):
    getter = getattr(config, "get_text_config", None)
    return getter() if callable(getter) else config


def head_info(model) -> HeadInfo:
    config = _text_config(model.config)
    hidden = next(
        (int(v) for k in ("hidden_size", "n_embd", "d_model", "dim") if isinstance(v := getattr(config, k, None), int)),
        None,
    )
    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    if weight is not None and weight.ndim == 2:
        vocab, d = int(weight.shape[0]), int(weight.shape[1])
    else:
        vocab, d = int(config.vocab_size), hidden
    bias = getattr(head, "bias", None) is not None
    soft = getattr(config, "final_logit_softcapping", None)
    return HeadInfo(hidden, d, bias, vocab, float(soft) if soft else None)


def context_length(config, cap: int | None) -> int:
    """The model's context length (``n_positions``, ``max_position_embeddings``, ...), capped at ``cap``."""
    config = _text_config(config)
    own = next(
        (
            int(v)
            for k in ("n_positions", "max_position_embeddings", "n_ctx", "max_sequence_length", "seq_length")
            if isinstance(v := getattr(config, k, None), int) and v > 0
        ),
        None,
    )
    if own is None:
        if cap is None:
            raise InputError("the model's config gives no context length (n_positions, max_position_embeddings); "
                             "pass --context")  # fmt: skip
        return cap
    return min(own, cap) if cap else own


def _from_pretrained_kwargs(dtype: str | None = None) -> dict:
    import torch
    import transformers

    kwargs = {"local_files_only": True, "trust_remote_code": False}
    if dtype is not None:
        key = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
        kwargs[key] = getattr(torch, dtype)
    return kwargs


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 300 else text[:299] + "…"


#: weight files of other formats that transformers could load: pickles (``torch.load``) and other frameworks'
PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "tf_model.h5", "flax_model.msgpack")
SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
#: how to turn a pickle weight file into safetensors, where the file is trusted
CONVERT = (
    'convert it where you trust the file: python -c "from transformers import AutoModelForCausalLM as M; '
    "M.from_pretrained('DIR').save_pretrained('NEW_DIR')\" writes NEW_DIR/model.safetensors (copy the tokenizer "
    "files beside it)"
)
#: the largest text ``analyze-lm`` tokenizes (WikiText-103's whole training text is about 540 MB)
MAX_TEXT_BYTES = 2**30
#: files that hold a tokenizer's vocabulary (one is needed)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt", "spiece.model",
                   "sentencepiece.bpe.model", "*.tiktoken")  # fmt: skip


#: the files of a model folder that ``analyze-lm`` reads (or transformers may): never an output's path
MODEL_FOLDER_FILES = ("config.json", "generation_config.json", "*.safetensors", "*.safetensors.index.json",
                      "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json", "merges.txt",
                      *TOKENIZER_FILES, *PICKLE_WEIGHTS)  # fmt: skip


def model_folder_files(path) -> list[Path]:
    """The files of the model folder ``path`` that :data:`MODEL_FOLDER_FILES` names (none where it is no folder)."""
    path = Path(path)
    if not path.is_dir():
        return []
    return sorted({file for pattern in MODEL_FOLDER_FILES for file in path.glob(pattern)})


def analysed_files(path) -> list[Path]:
    """The files of model folder ``path`` whose bytes the analysis reads: ``config.json`` (named even where it is
    missing), the safetensors weights and their index, the tokenizer's files; never a pickle (never read). A
    workflow's inputs: new weights saved over the folder re-analyse it, even under an unchanged ``config.json``."""
    files = {file for file in model_folder_files(path) if not any(file.match(p) for p in PICKLE_WEIGHTS)}
    return sorted({Path(path) / "config.json", *files})


def weight_files(path: Path) -> list[Path]:
    """The model's safetensors files (``model.safetensors``, or the shards its index lists); a folder whose weights
    are only a pickle (``pytorch_model.bin``, ...) or absent is an :class:`InputError` naming the file."""
    index = path / SAFETENSORS_INDEX
    if index.is_file():
        try:
            weight_map = readback.load_json(index, follow_links=True).get("weight_map")  # a cache links files
        except readback.ReadbackError as err:
            raise InputError(str(err)) from None
        if not isinstance(weight_map, dict) or not weight_map:
            raise InputError(f"{index}: no weight_map (not a safetensors index)")
        shards = sorted({str(name) for name in weight_map.values()})
        for shard in shards:
            if Path(shard).name != shard or not (path / shard).is_file():
                raise InputError(f"{index}: lists {shard!r}, which is not a file of the folder")
        return [path / shard for shard in shards]
    if (path / SAFETENSORS).is_file():
        return [path / SAFETENSORS]
    other = {p for pattern in PICKLE_WEIGHTS for p in path.glob(pattern) if p.is_file()}
    other = sorted(other, key=lambda p: (not p.name.startswith("pytorch_model"), p.name))
    if other:
        raise InputError(
            f"{other[0]}: analyze-lm loads only safetensors weights ({SAFETENSORS}), never a pickle or another "
            f"framework's file; {CONVERT}"
        )
    raise InputError(f"{path}: cannot load the causal language model: no {SAFETENSORS} (its weights, save_pretrained)")


def check_weights(files: list[Path], config) -> None:
    """Each safetensors file is whole (its header and every tensor's bytes within the file) and each of its tensors
    that the model of ``config`` has, of that tensor's shape (the model built on the meta device: no memory; a model
    that cannot be built there is left to ``from_pretrained``, whose failure :func:`load_language_model` names)."""
    import torch
    from safetensors import SafetensorError, safe_open
    from transformers import AutoModelForCausalLM

    shapes = {}
    for file in files:
        try:
            with safe_open(str(file), framework="pt") as handle:
                shapes.update({name: (file, list(handle.get_slice(name).get_shape())) for name in handle.keys()})
        except (SafetensorError, OSError, ValueError) as err:
            raise InputError(
                f"{file}: not a whole safetensors file ({_one_line(err)}): a cut download or copy? fetch it again"
            ) from None
    try:
        with torch.device("meta"):
            skeleton = AutoModelForCausalLM.from_config(config)
    except Exception:  # noqa: BLE001 - no skeleton, no shape check: from_pretrained reports what it finds
        return
    for name, tensor in skeleton.state_dict().items():
        if name in shapes and shapes[name][1] != list(tensor.shape):
            file, shape = shapes[name]
            raise InputError(
                f"{file}: tensor {name} is {shape}, but the model that config.json describes needs "
                f"{list(tensor.shape)}: the weights and config.json are of different models"
            )


def tokenizer_file(path: Path) -> Path:
    """The file that holds the folder's tokenizer vocabulary (:data:`TOKENIZER_FILES`), else an
    :class:`InputError` (without it transformers builds an empty tokenizer, and the text has 0 tokens)."""
    found = [p for pattern in TOKENIZER_FILES for p in sorted(path.glob(pattern)) if p.is_file()]
    if not found:
        raise InputError(
            f"{path}: no tokenizer (none of {', '.join(TOKENIZER_FILES)}): save the model's tokenizer beside it "
            "(tokenizer.save_pretrained(DIR))"
        )
    return found[0]


#: the JSON files of a tokenizer folder, and how large one may be read back to name the broken one
TOKENIZER_JSON = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
)
MAX_TOKENIZER_JSON_BYTES = 256 * 2**20
#: most layers of a model read (the largest published causal LMs have under 200)
MAX_LAYERS = 1024


def _tokenizer_culprit(path: Path) -> Path:
    """The first of the folder's tokenizer JSON files that is not valid JSON (the one to name), else the folder."""
    for name in TOKENIZER_JSON:
        try:  # as leniently as transformers reads it (the strict reader refuses what it takes: a key given twice)
            json.loads(readback.read_bytes(path / name, MAX_TOKENIZER_JSON_BYTES, follow_links=True, what="tokenizer"))
        except FileNotFoundError:
            continue
        except (OSError, ValueError, RecursionError):  # unreadable, too large, not JSON, not UTF-8, nested too deep
            return path / name
    return path


def load_language_model(model_dir: str | os.PathLike, device: str = "cpu", dtype: str = "float32"):
    """``(model, tokenizer)`` of a local folder, in eval mode on ``device``; every failure one :class:`InputError`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    path = Path(model_dir)
    if path.exists() and not path.is_dir():
        raise InputError(f"{path}: a file, not a model folder (the folder save_pretrained wrote: config.json, weights)")
    if not path.is_dir():
        raise InputError(f"{path}: no such folder (a model saved with save_pretrained; Hub names are not fetched)")
    if not (path / "config.json").is_file():
        raise InputError(f"{path}: not a Hugging Face model folder (no config.json)")
    try:
        import transformers
    except ImportError:
        raise InputError("analyze-lm needs transformers: pip install 'softmax-bottleneck[hf]'") from None
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    check_model_class(path, transformers)
    try:
        config = AutoConfig.from_pretrained(path, **_from_pretrained_kwargs())
    except Exception as err:  # noqa: BLE001 (a user's file: any failure is its fault, e.g. huggingface_hub's
        # StrictDataclassFieldValidationError for a field of the wrong type)
        if "trust_remote_code" in str(err) or "custom code" in str(err):
            raise InputError(
                f"{path}: the model needs custom code from its folder, which analyze-lm never runs "
                "(trust_remote_code is off): use a model class that transformers ships"
            ) from None
        raise InputError(f"{path / 'config.json'}: not a valid model config: {_one_line(err)}") from None
    if getattr(config, "is_encoder_decoder", False):
        raise InputError(f"{path}: an encoder-decoder model ({config.model_type}), not a causal language model")
    if type(config) not in AutoModelForCausalLM._model_mapping:
        raise InputError(
            f"{path}: not a causal language model (model_type {getattr(config, 'model_type', '?')!r} has no "
            "AutoModelForCausalLM class in this transformers; custom code is never run)"
        )
    layers = getattr(_text_config(config), "num_hidden_layers", None)
    if isinstance(layers, int) and layers > MAX_LAYERS:  # building even its skeleton would take hours
        raise InputError(f"{path / 'config.json'}: {layers:,} layers (num_hidden_layers), more than any model has")
    files = weight_files(path)
    check_weights(files, config)
    vocabulary = tokenizer_file(path)
    for name in TOKENIZER_JSON:  # transformers reads a tokenizer's JSON whole: a 2 GB file took 4.5 GB
        if (path / name).is_file() and (path / name).stat().st_size > MAX_TOKENIZER_JSON_BYTES:
            raise InputError(f"{path / name}: larger than {MAX_TOKENIZER_JSON_BYTES >> 20} MB, no tokenizer's file")
    try:
        model, loading = AutoModelForCausalLM.from_pretrained(
            path, config=config, use_safetensors=True, output_loading_info=True, **_from_pretrained_kwargs(dtype)
        )
    except KeyError as err:  # a name config.json gives that transformers has no entry for (activation_function)
        raise InputError(f"{path / 'config.json'}: names {_one_line(err)}, which this transformers does not know "
                         f"(cannot build the {config.model_type} model it describes)") from None  # fmt: skip
    except (OSError, ValueError, RuntimeError, TypeError) as err:
        raise InputError(f"{path}: cannot load the causal language model: {_one_line(err)}") from None
    check_loading(loading, files[0] if len(files) == 1 else path / SAFETENSORS_INDEX)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, **_from_pretrained_kwargs())
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:
        raise InputError(f"{_tokenizer_culprit(path)}: cannot load the model's tokenizer: {_one_line(err)}") from None
    if isinstance(tokenizer, bool) or not callable(tokenizer) or len(tokenizer) < 2:
        raise InputError(f"{vocabulary}: no usable tokenizer ({len(tokenizer) if callable(tokenizer) else 0} tokens)")
    model.eval()
    model.to(device)
    check_causal(model, path)
    return model, tokenizer


#: heads of ``config.json``'s ``architectures`` that are not a language model's (a classifier's weights would be
#: said to be "of a different model")
NOT_LM_HEADS = ("ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice",
                "ForImageClassification")  # fmt: skip


def check_model_class(path: Path, transformers) -> None:
    """``config.json`` names a class ``transformers`` ships and a language model's head, else an :class:`InputError`
    saying which: a ``model_type`` this transformers does not know (its classes would be the folder's own code,
    ``auto_map``, never run; an ``auto_map`` beside a known type is ignored, as transformers ignores it), a
    classifier's or another task's head."""
    try:
        raw = readback.load_json(path / "config.json", follow_links=True)
    except (readback.ReadbackError, OSError) as err:
        raise InputError(f"{path}: unreadable model config: {_one_line(err)}") from None
    if not isinstance(raw, dict):
        raise InputError(f"{path / 'config.json'}: not a model config (a JSON object)")
    model_type = raw.get("model_type")  # none: transformers guesses it from the folder's name, as it always did
    if model_type is not None and model_type not in transformers.CONFIG_MAPPING:  # the folder's own classes needed
        code = " (its auto_map names custom code in the folder)" if raw.get("auto_map") else ""
        raise InputError(
            f"{path}: model_type {model_type!r} is not one this transformers ({transformers.__version__}) knows{code}, "
            "and analyze-lm never runs custom code (trust_remote_code is off): use a model class that transformers "
            "ships, or a newer transformers that knows it"
        )
    heads = raw.get("architectures") or []
    if heads and all(isinstance(h, str) and h.endswith(NOT_LM_HEADS) for h in heads):
        raise InputError(f"{path}: a {', '.join(heads)} (config.json's architectures), not a language model's head: "
                         "analyze-lm needs a causal language model's folder")  # fmt: skip


def check_loading(loading: dict, weights: Path) -> None:
    """The weights ``from_pretrained`` loaded are exactly the tensors of the model ``config.json`` describes
    (``output_loading_info``): a tensor the weights lack would be left random (``config.json`` says more layers
    than the weights hold), one the model lacks is dropped (fewer) - either way the numbers would not be the
    model's."""
    for key, told in (("missing_keys", "lack {n} tensor(s) of the model config.json describes (e.g. {first}), "
                                        "which would be left random"),
                      ("unexpected_keys", "hold {n} tensor(s) the model config.json describes has no place for "
                                          "(e.g. {first}), which would be dropped")):  # fmt: skip
        names = sorted(loading.get(key) or ())
        if names:
            raise InputError(
                f"{weights}: the weights {told.format(n=len(names), first=names[0])}: the weights and config.json "
                "are of different models"
            )


#: the probe of :func:`check_causal`: tokens, and how far an earlier position's logits may move (relative to the
#: largest logit; a causal model's do not move at all: the same operations on the same earlier tokens)
CAUSAL_PROBE_TOKENS = 8
CAUSAL_TOLERANCE = 1e-6


def check_causal(model, path: Path) -> None:
    """The model's logits at a position do not depend on later tokens: two probe sequences that differ only in
    their last token give the same logits before it. A class ``AutoModelForCausalLM`` loads may still attend both
    ways (a masked LM's BERT loaded as ``BertLMHeadModel`` without ``is_decoder``); its rows would see the token
    they score."""
    import torch

    vocab = head_info(model).vocab_size
    n = max(2, min(CAUSAL_PROBE_TOKENS, context_length(model.config, CAUSAL_PROBE_TOKENS)))
    device = next(model.parameters()).device
    first = (torch.arange(n, device=device) * 7 + 3) % vocab
    second = first.clone()
    second[-1] = (second[-1] + 1) % vocab
    with torch.no_grad():  # one sequence a call: the same kernels on the same shapes
        logits = [model(input_ids=ids[None]).logits[0, :-1].double() for ids in (first, second)]
    moved = float((logits[0] - logits[1]).abs().max())
    if moved > CAUSAL_TOLERANCE * max(1.0, float(logits[0].abs().max())):
        raise InputError(
            f"{path}: not a causal language model: its output at earlier positions changes with a later token "
            f"(by up to {moved:.3g}), so each row would see the token it scores (a bidirectional model such as a "
            "masked-LM BERT, loaded as a decoder)"
        )


def tokenize_text(tokenizer, text_file: str | os.PathLike):
    """The token ids (a 1-D long tensor) of the whole text file, without added special tokens."""
    import torch

    path = Path(text_file)
    if path.is_dir():
        raise InputError(f"{path}: is a directory, not a text file")
    try:  # through the bounded reader: a FIFO or device is refused, never waited on
        raw = readback.read_bytes(path, MAX_TEXT_BYTES, follow_links=True, what="text file")
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except readback.ReadbackError as err:
        raise InputError(str(err)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    return torch.tensor(ids, dtype=torch.long)


def check_vocabulary(tokenizer, ids, n_cols: int, model_dir) -> None:
    """The tokenizer's ids must be columns of the model's output (else the targets index past its logits)."""
    size = len(tokenizer)
    top = int(ids.max()) if len(ids) else -1
    if size > n_cols or top >= n_cols:
        raise InputError(
            f"{tokenizer_file(Path(model_dir))}: tokenizer/model vocabulary mismatch: the tokenizer has {size} tokens"
            f"{f' and gives the text id {top}' if top >= n_cols else ''}, but the model outputs {n_cols} "
            f"(ids 0-{n_cols - 1})"
        )
