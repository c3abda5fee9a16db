# What the rules of language_models.smk need: the configured models, the text they read and the options of
# analyze-lm (functions only: `snakemake --lint` asks rules and functions apart).

import math

from softmax_bottleneck.analysis.hf_model import analysed_files
from softmax_bottleneck.analysis.rank import DEFAULT_MEMORY_BUDGET

LM_CONFIG = config.get("language_models") or {}
#: name -> local model folder (relative paths: against the working directory)
LM_MODELS = {
    str(name): str(path) for name, path in (LM_CONFIG.get("models") or {}).items()
}
LM_RESULTS = f"{RESULTS}/language_models"
#: the table and the figure, for all_reports() (empty while no model is configured)
LANGUAGE_MODEL_REPORTS = [
    f"{REPORTS}/{kind}/language_models.{ext}"
    for kind, exts in (("tables", ("csv", "md")), ("figures", ("pdf", "png")))
    for ext in exts
    if LM_MODELS
]


def lm_text(wildcards):
    """The text the models read: a dataset's test split (fetched like the study's) or a file."""
    corpus = str(LM_CONFIG.get("corpus") or "ptb")
    if corpus in CORPUS_DIRS:
        return ancient(f"{corpus_dir(corpus)}/test.txt")
    return corpus


def lm_model_files(wildcards):
    """The model folder's files that analyze-lm reads (config, safetensors weights, tokenizer): new weights saved
    over it re-analyse it."""
    return [str(file) for file in analysed_files(LM_MODELS[wildcards.lm])]


def lm_options(wildcards):
    """``--rows``, ``--stride`` and ``--memory-budget-gb`` of analyze-lm from the config (null: its default)."""
    options = [f"--rows {LM_CONFIG.get('rows') or 'full'}"]
    if LM_CONFIG.get("stride"):
        options.append(f"--stride {int(LM_CONFIG['stride'])}")
    if LM_CONFIG.get("memory_budget_gb"):
        options.append(f"--memory-budget-gb {float(LM_CONFIG['memory_budget_gb'])}")
    return " ".join(options)


def lm_mem_mb(wildcards, attempt):
    """Host memory of one analyze_lm job: the singular values' budget plus 8 GiB (model, row pass), at least
    32 GB, more on a retry."""
    budget = LM_CONFIG.get("memory_budget_gb") or DEFAULT_MEMORY_BUDGET / 2**30
    return max(32000, math.ceil((budget + 8) * 2**30 / 1e6)) * attempt
