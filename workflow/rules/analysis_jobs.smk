# What analysis.smk's await_scheduled_analysis needs: the analyses whose `analyze` job SLURM still lists (functions only:
# `snakemake --lint` asks rules and functions apart).
#
# An `analyze` job that a Snakemake which died submitted, pending or running (its comment names the rule and the
# wildcards), is waited for by await_scheduled_analysis (a local job), never submitted a second time (a GPU, 8 CPUs
# and up to two hours each at the paper's size): softmax_bottleneck.cluster.scheduler, as for trainings. It declares
# analyze's inputs and parameters (the job id Unrecorded), so the record of an analysis it waited for is the one
# analyze would have made.

from softmax_bottleneck.cluster.scheduler import job_comment, queued_jobs


def scheduled_analyses():
    """(runid, rows) -> SLURM job id of every analysis of the study whose `analyze` job is pending or running."""
    queued = queued_jobs("analyze")
    found = {}
    for run in STUDY.jobs.values() if queued else ():
        prefix = job_comment("analyze", [*run.wildcards.values(), ""])
        for comment, (jobid, _) in queued.items():
            if comment.startswith(prefix):
                found[(run.runid, comment.removeprefix(prefix))] = jobid
    return found


# asked where a SLURM controller answers (scontrol ping), also of a dry run: what it lists is what would run
SCHEDULED_ANALYSES = scheduled_analyses() if CONTROLLER else {}


def not_scheduled(wildcards):
    """Nothing for an analysis SLURM lists; else a file no rule makes, so that Snakemake plans `analyze` for it (the
    rule's wildcard constraints match each wildcard alone: a queued run with the rows of another queued analysis).
    """
    if (wildcards.runid, wildcards.rows) in SCHEDULED_ANALYSES:
        return []
    return f"{LOGS}/.not-scheduled/{wildcards.runid}-{wildcards.rows}"


def scheduled_analysis_job(wildcards):
    return Unrecorded(SCHEDULED_ANALYSES[(wildcards.runid, wildcards.rows)])
