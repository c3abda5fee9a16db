"""Press' and ε-effective rank of a local Hugging Face causal LM's log-P matrix on a text (``analyze-lm``).

The same analysis as ``analyze`` (:mod:`softmax_bottleneck.analysis.logp`), for any causal language model saved in a
local folder (``save_pretrained``: ``config.json``, the weights, the tokenizer files). Row r of the matrix is the
model's full next-token vector log P(· | tokens 0…r) of the tokenised text, in float32, over the model's whole output
vocabulary (the columns); rows stream into :class:`softmax_bottleneck.analysis.rank.RankStream`, so the matrix is never
held unless ``auto`` (or ``--method exact``) takes the exact SVD.

A transformer sees a bounded context, so the text is read in sliding windows of ``context`` tokens (the model's
``n_positions`` / ``max_position_embeddings``, capped) moved by ``stride`` tokens, as in Hugging Face's perplexity
guide: every token after the first is scored exactly once, with all tokens before it in the first window and at least
``context − stride`` tokens of left context afterwards (``stride < context``). Row order is the text's order.

The softmax bound: a head ``logits = W h (+ b)`` with ``h ∈ R^d`` gives ``log P = H Wᵀ + 1 bᵀ − log Z 1ᵀ``, a matrix of
rank at most ``d + 1`` without the bias, ``d + 2`` with it, whatever the vocabulary (a subword one included). The
summary records ``d`` (the head's input size), the bound, and whether Press' rank exceeds it (it should not, up to
floating-point noise; a mixture of softmaxes can).

The folder is loaded by :mod:`softmax_bottleneck.analysis.hf_model` (local files only, no code from the folder,
safetensors weights only, checked before the model is built). Outputs
are written as ``analyze`` writes them (:mod:`softmax_bottleneck.analysis.outputs`): ``--save-logp``'s disk space is
reserved before the first row, and all of them or none are left (a failure or an interruption removes those the run
wrote).
"""

from __future__ import annotations

import argparse
import inspect
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator

import numpy as np

from softmax_bottleneck.analysis.hf_model import (
    check_vocabulary,
    context_length,
    head_info,
    load_language_model,
    model_folder_files,
    tokenize_text,
)
from softmax_bottleneck.analysis.inputs import InputError, report, resolve_device
from softmax_bottleneck.analysis.logp import Progress
from softmax_bottleneck.analysis.logp_rows import NonFiniteLogP, feed_rows
from softmax_bottleneck.analysis.outputs import (
    OutputError,
    all_or_none,
    check_writable,
    npy_writer,
    remove_stale_temporaries,
    write_text,
)
from softmax_bottleneck.analysis.rank import (
    DEFAULT_MEMORY_BUDGET,
    METHODS,
    MemoryBudgetError,
    RankStream,
    add_memory_budget_option,
    spectrum_table,
)
from softmax_bottleneck.argtypes import npy_path, positive_int
from softmax_bottleneck.cluster.signals import stop_on_signals

log = logging.getLogger(__name__)

#: default cap on the window length (tokens): the model's own context length if shorter
DEFAULT_MAX_CONTEXT = 1024

#: seconds between two progress lines
PROGRESS_SECONDS = 30.0

#: the ``--dtype`` choices (the weights' precision; log-P rows are float32 whatever it is)
DTYPES = ("float32", "bfloat16", "float16")

#: a function ``(window ids [L] (long, on the model's device), k) -> log P [k, V] (float32)``: the next-token
#: log-probabilities at the window's positions L−k−1 … L−2, i.e. of its last k tokens given the tokens before them
LogPFunction = Callable[["object", int], "object"]


# --------------------------------------------------------------------------------------------------------------
# windows
# --------------------------------------------------------------------------------------------------------------


def windows(n_tokens: int, context: int, stride: int) -> Iterator[tuple[int, int, int]]:
    """Yield ``(begin, end, first)``: window ``tokens[begin:end]`` scores the targets ``first … end − 1``.

    Targets are the tokens 1 … n − 1 (the first token has no context), each in exactly one window; in windows after the
    first, ``first − begin = context − stride ≥ 1`` (the left context of the window's first scored token). Hugging
    Face's guide allows ``stride = context``, which leaves the first token of each window unscored: not here.
    """
    if not 1 <= stride < context:
        raise ValueError(f"stride must be at least 1 and shorter than the window ({context} tokens), got {stride}")
    if n_tokens < 2:
        return
    begin, scored_to = 0, 1
    while True:
        end = min(begin + context, n_tokens)
        if end > scored_to:
            yield begin, end, scored_to
            scored_to = end
        if end == n_tokens:
            return
        begin += stride


def n_rows_for(rows: str | int, n_tokens: int) -> int:
    """Rows of the matrix: ``"full"`` = every scored token (n − 1), or the first N of them."""
    predictable = max(n_tokens - 1, 0)
    if rows == "full":
        return predictable
    n = int(rows)
    if n < 1:
        raise ValueError(f"rows must be positive, got {n}")
    return min(n, predictable)


def iter_window_logp(
    logp_fn: LogPFunction, ids, context: int, stride: int, n_rows: int, device="cpu"
) -> Iterator[tuple[object, object]]:
    """Yield ``(log P [k, V] float32, targets [k])`` chunks of the first ``n_rows`` rows, in the text's order."""
    import torch

    ids = torch.as_tensor(ids, dtype=torch.long)
    done = 0
    with torch.inference_mode():
        for begin, end, first in windows(len(ids), context, stride):
            if done >= n_rows:
                return
            take = min(end - first, n_rows - done)
            end = first + take  # a shorter last window: nothing after the last row is computed
            window = ids[begin:end].to(device)
            log_prob = logp_fn(window, take)
            if tuple(log_prob.shape[:1]) != (take,):
                raise RuntimeError(f"log-P function gave {tuple(log_prob.shape)} rows for a window of {take}")
            yield log_prob.float(), ids[first:end].to(log_prob.device)
            done += take


def float32_head(model):
    """With bfloat16 or float16 weights, compute the head ``logits = W h (+ b)`` in float32 on the model's own hidden
    state ``h`` (a forward hook on its output embeddings that replaces their output; what follows the head, e.g. a soft
    cap, then runs in float32 too); the hook's handle, or None where the head is not in half precision. A float32
    copy of the head's weights is kept for the run (a 256,000 × 3,584 head: 3.7 GB beside the model).

    Rounded to bfloat16 (ε = 2⁻⁸), the logits carry noise far above Press' float32 tolerance ½√(m+n+1)·ε₃₂·σ₁, and a
    plain softmax head "exceeds" its bound d + 1 (a tiny GPT-2: 121 against 9). The bound is a property of the head, so
    the head is computed at the precision the rank is measured in; the body keeps its dtype (and its memory). A head
    that is not a linear layer, or one called without its input as an argument, is said in one warning: its rank then
    counts the half precision's rounding too."""
    import torch

    head = model.get_output_embeddings()
    weight = getattr(head, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.dtype not in (torch.bfloat16, torch.float16):
        return None
    if type(head) is not torch.nn.Linear:
        log.warning("the model's head (%s) is not a linear layer: it runs in %s, whose rounding its Press' rank counts "
                    "too; analyse it in float32", type(head).__name__, weight.dtype)  # fmt: skip
        return None
    weight = weight.detach().float()
    bias = None if head.bias is None else head.bias.detach().float()
    warned = []

    def in_float32(module, inputs, output):
        if not inputs:  # called with its input as a keyword: nothing to recompute from
            if not warned:
                log.warning("the model calls its head without a positional input: it runs in %s, whose rounding its "
                            "Press' rank counts too", output.dtype)  # fmt: skip
                warned.append(True)
            return output
        return torch.nn.functional.linear(inputs[0].float(), weight, bias)

    return head.register_forward_hook(in_float32)


def hf_logp_function(model) -> LogPFunction:
    """:data:`LogPFunction` of a Hugging Face causal LM (only the needed positions' logits when it allows), its head in
    float32 (:func:`float32_head`)."""
    import torch

    float32_head(model)

    accepted = inspect.signature(model.forward).parameters
    # transformers ≥ 4.50: logits_to_keep; 4.45-4.49: num_logits_to_keep; older: every position's logits
    keep_arg = next((name for name in ("logits_to_keep", "num_logits_to_keep") if name in accepted), None)

    def logp(window, k: int):
        kwargs = {keep_arg: k + 1} if keep_arg else {}
        out = model(input_ids=window[None], use_cache=False, **kwargs)
        logits = out.logits[0, -(k + 1) : -1]
        return torch.log_softmax(logits.float(), dim=-1)

    return logp


# --------------------------------------------------------------------------------------------------------------
# the analysis
# --------------------------------------------------------------------------------------------------------------


def analyze_stream(
    logp_fn: LogPFunction,
    ids,
    n_cols: int,
    context: int,
    stride: int,
    rows: str | int = "full",
    method: str = "auto",
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET,
    save_logp: str | os.PathLike | None = None,
    device: str = "cpu",
):
    """Stream the windowed log-P rows of ``logp_fn`` on ``ids`` into their rank; returns ``(σ, summary dict)``.

    The summary has the keys of :func:`softmax_bottleneck.analysis.rank.rank_summary` plus ``rows`` (m),
    ``rows_rule``, ``tokens``, ``context``, ``stride``, ``logp_test_loss`` (mean NLL of the true next tokens over
    the rows), ``perplexity`` (its exp), ``max_abs_log_normaliser`` (max over rows of |logsumexp(row)|, 0 up to
    rounding), ``seconds``, ``seconds_rows``, ``device`` and, on CUDA, ``peak_cuda_memory_gib``.
    """
    import torch

    n_tokens = len(ids)
    n_rows = n_rows_for(rows, n_tokens)
    if n_rows < 1:
        raise ValueError(f"the text has {n_tokens} token(s): no next-token rows to analyse")
    if rows != "full" and n_rows < int(rows):
        log.warning("--rows %s: the text's %d tokens give %d rows; ranking those", rows, n_tokens, n_rows)
    stream = RankStream(n_cols, method, device=str(device), memory_budget_bytes=memory_budget_bytes,
                        expected_rows=n_rows)  # fmt: skip
    cuda = str(device).startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    started = time.monotonic()
    progress = Progress(n_rows, every=PROGRESS_SECONDS)
    with npy_writer(save_logp, (n_rows, n_cols)) as out:
        totals = feed_rows(iter_window_logp(logp_fn, ids, context, stride, n_rows, device), stream, out, progress.rows)
    done = totals.rows
    seconds_rows = time.monotonic() - started
    log.info("log-P: %d rows in %.0fs; computing singular values (%s)", done, seconds_rows, stream.method)
    sv, summary = stream.finish()
    loss = totals.nll_sum / done
    summary.update(
        rows=done,
        rows_rule=str(rows),
        tokens=n_tokens,
        context=context,
        stride=stride,
        logp_test_loss=loss,
        perplexity=math.exp(loss) if loss < 700 else float(np.finfo(np.float64).max),
        max_abs_log_normaliser=totals.worst_norm,
        seconds=time.monotonic() - started,
        seconds_rows=seconds_rows,
        device=str(device),
    )
    if cuda:
        summary["peak_cuda_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return sv, summary


# --------------------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------------------


def _rows(text: str) -> str | int:
    if text == "full":
        return text
    try:
        return positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"expected full or a positive number of rows, not {text!r}") from None


def add_cli(parser) -> None:
    parser.description = (
        "Press' rank, ε-effective ranks and singular values of a local Hugging Face causal LM's next-token "
        "log-probability matrix on a text (sliding windows, each token scored once), without holding the matrix in "
        "memory; with the softmax bound d + 1 (d + 2 with an output bias) from the model."
    )
    parser.add_argument("--model", required=True, metavar="DIR", help="local folder written by save_pretrained")
    parser.add_argument("--text", required=True, metavar="FILE", help="UTF-8 text to score (e.g. PTB's test.txt)")
    parser.add_argument("--rows", default="full", type=_rows, help="log-P rows: full (default) or the first N")
    parser.add_argument(
        "--context",
        type=positive_int,
        default=None,
        metavar="N",
        help=f"window length in tokens (default: the model's context length, at most {DEFAULT_MAX_CONTEXT})",
    )
    parser.add_argument(
        "--stride", type=positive_int, default=None, metavar="S", help="window step (default: half the window)"
    )
    parser.add_argument("--out-json", required=True, metavar="JSON", help="where to write the rank summary")
    parser.add_argument("--out-spectrum", default=None, metavar="CSV", help="also write the singular values")
    parser.add_argument(
        "--save-logp", type=npy_path, default=None, metavar="FILE.npy", help="also write the ranked rows (float32)"
    )
    parser.add_argument(
        "--method",
        default="auto",
        choices=METHODS,
        help="singular-value method; auto: exact SVD up to a 1 GiB float64 matrix, else the streamed Gram",
    )
    add_memory_budget_option(parser)
    parser.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    parser.add_argument(
        "--dtype", default="float32", choices=DTYPES, help="weights' precision (default float32; rows are float32)"
    )


def analyze_language_model(args):
    """Load, check and analyse as ``args`` say; returns ``(σ, summary)``. Input problems raise :class:`InputError`."""
    from softmax_bottleneck.training.environment import configure_precision

    device = resolve_device(args.device)
    configure_precision(tf32=False)
    model, tokenizer = load_language_model(args.model, device, args.dtype)
    info = head_info(model)
    ids = tokenize_text(tokenizer, args.text)
    check_vocabulary(tokenizer, ids, info.vocab_size, args.model)
    if args.context is not None:
        own = context_length(model.config, args.context + 1)  # the model's own, or args.context + 1 if it has none
        if args.context > own:
            raise InputError(f"--context {args.context} is longer than the model's context length {own}")
        context = args.context
    else:
        context = context_length(model.config, DEFAULT_MAX_CONTEXT)
    if len(ids) < context:
        raise InputError(
            f"{args.text}: {len(ids)} tokens, shorter than one window of {context}; pass a longer text "
            "(or a smaller --context)"
        )
    if context < 2:
        raise InputError(f"a window of {context} token(s) leaves no context; pass a --context of at least 2")
    stride = args.stride if args.stride is not None else max(1, context // 2)
    if stride >= context:
        raise InputError(f"--stride {stride} must be shorter than the window ({context} tokens): every scored token "
                         "needs left context")  # fmt: skip
    if info.softcapping:
        log.warning("the model soft-caps its logits (%.1f): its head is not a plain softmax, no bound applies",
                    info.softcapping)  # fmt: skip
    log.info(
        "%s: %s, %d tokens of %s, window %d, stride %d, %d columns, d = %s",
        args.model, type(model).__name__, len(ids), args.text, context, stride, info.vocab_size, info.head_input_size,
    )  # fmt: skip
    sv, summary = analyze_stream(
        hf_logp_function(model), ids, info.vocab_size, context, stride, args.rows, args.method,
        int(args.memory_budget_gb * 2**30), args.save_logp, device,
    )  # fmt: skip
    bound = info.softmax_bound
    summary.update(
        model=str(args.model),
        model_type=str(getattr(model.config, "model_type", "")),
        model_class=type(model).__name__,
        parameters=int(sum(p.numel() for p in model.parameters())),
        dtype=args.dtype,
        text=str(args.text),
        tokenizer_size=len(tokenizer),
        hidden_size=info.hidden_size,
        head_input_size=info.head_input_size,
        output_bias=info.output_bias,
        softmax_bound=bound,
        exceeds_softmax_bound=None if bound is None else bool(summary["press_rank"] > bound),
    )
    return sv, summary


def run_cli(args) -> int:
    with stop_on_signals("analyze-lm"):
        try:
            check_writable(args.out_json, args.out_spectrum, args.save_logp,
                           inputs=[args.text, *model_folder_files(args.model)])  # fmt: skip
        except OutputError as err:
            return report("analyze-lm", err)
        remove_stale_temporaries(args.out_json, args.out_spectrum, args.save_logp)
        try:
            with all_or_none(args.save_logp, args.out_spectrum, args.out_json):
                sv, summary = analyze_language_model(args)
                if args.out_spectrum:
                    write_text(spectrum_table(sv).to_csv(index=False), args.out_spectrum)
                write_text(json.dumps(summary, indent=2, sort_keys=True, allow_nan=False) + "\n", args.out_json)
        except (NonFiniteLogP, MemoryBudgetError) as err:
            return report("analyze-lm", f"{args.model}: {err}")
        except (InputError, OutputError) as err:
            return report("analyze-lm", err)
    log.info(
        "Press' rank %d of %s (softmax bound %s); ε-ranks %s; perplexity %.2f; %.0fs (%s)",
        summary["press_rank"], summary["shape"], summary["softmax_bound"], json.dumps(summary["effective_rank"]),
        summary["perplexity"], summary["seconds"], summary["method"],
    )  # fmt: skip
    return 0
