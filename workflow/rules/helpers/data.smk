# Params of workflow/rules/data.smk.

#: The data mirror reaches the fetch commands through this environment variable, set here from
#: the config (never from the user's shell), and not as a parameter of the rules: every file is
#: verified by its pinned SHA-256 whatever its source, so switching between a mirror and the
#: download (e.g. the README's small-scale command with `--config data_mirror=...`, then the paper's
#: configuration) must not fetch the data again. As a parameter it did, and a re-fetch also hides
#: the trainings still to run from that whole invocation: Snakemake skips jobs downstream of a
#: rerun job when their inputs from it are ancient() (train's corpus and cache), even when their
#: outputs are missing (snakemake/snakemake#4166).
MIRROR_ENV = "SOFTMAX_BOTTLENECK_DATA_MIRROR"
os.environ.update({MIRROR_ENV: str(config.get("data_mirror") or "")})


def corpus_fetch_paths(wildcards):
    return " ".join(f"{wildcards.corpus}/{split}.txt" for split in SPLITS)
