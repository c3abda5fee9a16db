# Following the study while it runs (docs/running.md, "Following the study"): `snakemake status` prints where
# every training run stands; `snakemake progress` renders the progress page and the learning curves,
# `snakemake preview` (which includes them) the provisional tables and figures from the runs finished so far,
# under <reports>/preview/. They read the run folders only (nothing of the study is their declared input), so
# they never start or wait for a training or an analysis, and they run beside a `snakemake` of the study in the
# same folder: named alone, they run with --nolock (common.smk, READING_TARGETS), so that they never remove the
# study's lock. `snakemake --report <file> preview` bundles them.
# Their parameters are digests of where the runs stand: they re-render when a run moved on, and only then.

from softmax_bottleneck.report import preview as study_preview
from softmax_bottleneck.report.progress import command_stamp, progress_files
from softmax_bottleneck.study.status import groups as status_groups
from softmax_bottleneck.study.status import state_digest, study_status

PROGRESS_PAGE, LEARNING_CURVES = progress_files(STUDY)
#: pages `python -m softmax_bottleneck preview` wrote (not Snakemake): rendered again by `snakemake progress`/`preview`
COMMAND_STAMP = command_stamp(STUDY)
PREVIEW_FILES = study_preview.output_files(STUDY)


rule status:
    """Print where every training run stands: finished, running, stalled, failed, unreadable, not started; GPU time."""
    log:
        f"{LOGS}/status.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        config=CONFIG_SOURCE,
        retry=retry_options,
    script:
        "../scripts/status.py"


rule progress:
    """Render the progress page (runs by state, GPU time, finished runs over time) and learning curves."""
    input:
        lambda wildcards: [COMMAND_STAMP] if os.path.exists(COMMAND_STAMP) else [],
    output:
        page=report(
            PROGRESS_PAGE,
            caption="../report/progress.rst",
            category="Progress",
            labels={"item": "progress"},
        ),
        curves=[
            report(
                path,
                caption="../report/progress.rst",
                category="Progress",
                subcategory="Learning curves",
                labels={"item": name},
            )
            for name, path in zip(status_groups(STUDY), LEARNING_CURVES)
        ],
    log:
        f"{LOGS}/progress.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        config=CONFIG_SOURCE,
        retry=retry_options,
        state=lambda wildcards: state_digest(study_status(STUDY)),
    script:
        "../scripts/progress.py"


rule preview:
    """Render every table and figure from the runs finished so far, marked provisional, under <reports>/preview/."""
    input:
        rules.progress.output,
    output:
        [
            (
                report(
                    path,
                    caption="../report/preview.rst",
                    category="Provisional",
                    subcategory="Tables" if path.endswith(".html") else "Figures",
                    labels={"item": Path(path).stem},
                )
                if path.endswith((".html", ".png"))
                else path
            )
            for path in PREVIEW_FILES
        ],
    log:
        f"{LOGS}/preview.log",
    localrule: True
    conda:
        "../../envs/softmax-bottleneck.yaml"
    params:
        inputs=lambda wildcards: study_preview.inputs_digest(STUDY),
    script:
        "../scripts/preview.py"
