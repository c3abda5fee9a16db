# Params of workflow/rules/data.smk.

import shlex


def corpus_fetch_paths(wildcards):
    return " ".join(f"{wildcards.corpus}/{split}.txt" for split in SPLITS)


def mirror_arg(wildcards):
    mirror = config.get("data_mirror")
    return f"--mirror {shlex.quote(str(mirror))}" if mirror else ""
