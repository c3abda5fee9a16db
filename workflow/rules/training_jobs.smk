# What the train and await rules of train.smk need, the training log and the time limit of each attempt, and the
# runs to wait for instead of training (functions only: `snakemake --lint` asks rules and functions apart).
#
# A training already running when Snakemake starts (a cluster job left by a Snakemake that died) is waited for by the
# local rule await_training, never submitted a second time (softmax_bottleneck.study.wait_for_run); one whose `train`
# job SLURM still lists as pending or running (its comment names the rule and wildcards) by the local rule
# await_scheduled_training, which waits for that job to leave the queue first (softmax_bottleneck.cluster.scheduler).
# Both declare `train`'s inputs and parameters (the others Unrecorded), so Snakemake's record of a run they finished is
# the record `train` would have made: the next controller does not submit it again.

from softmax_bottleneck.cluster.scheduler import job_comment, queued_jobs
from softmax_bottleneck.study.status import study_status
from softmax_bottleneck.study.wait_for_run import OUTPUTS


class Unrecorded:
    """A rule parameter Snakemake does not record in its metadata (not a builtin type), shown in a shell command as
    its text: the await rules of train.smk record exactly what `train` records (its inputs and parameters), so that a run
    finished under them is not trained again by the next controller."""

    def __init__(self, text):
        self.text = str(text)

    def __str__(self):
        return self.text

    def __format__(self, spec):
        return format(self.text, spec)


def site_time_limit():
    """The partition's time limit, minutes, that the profile gives train (`set-resources: train: max_runtime:`), or
    None: each attempt then asks min(that limit, its own estimate) instead of the limit itself.
    """
    overrides = workflow.resource_settings.overwrite_resources or {}
    value = getattr((overrides.get("train") or {}).get("max_runtime"), "value", None)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SystemExit(
            f"set-resources: train: max_runtime: {value!r}: expected the partition's time limit in whole minutes"
        )
    return value


SITE_TIME_LIMIT = site_time_limit()


def train_runtime(wildcards, attempt):
    """Minutes one training attempt asks: 1.5 × the paper's V100 time (at least 10) × the attempt, at most the
    site's limit (a longer run resumes in the next attempt)."""
    minutes = train_runtime_minutes(STUDY.job(wildcards), attempt)
    return min(minutes, SITE_TIME_LIMIT) if SITE_TIME_LIMIT else minutes


def await_max_wait(wildcards):
    """Seconds the await rules wait at most for a training another process runs, three times the time limit that
    train's first attempt of that run asks (the site's limit at most: that job cannot outlive it).
    """
    return Unrecorded(60 * 3 * train_runtime(wildcards, 1))


def train_log(wildcards):
    return Unrecorded(TRAIN_LOG.format(**dict(wildcards.items())))


def train_epochs(wildcards):
    return Unrecorded(STUDY.job(wildcards).hyperparameters["epochs"])


def scheduled_trainings():
    """runid -> SLURM job id of every training of the study whose `train` job is pending or running."""
    queued = queued_jobs("train")
    found = {}
    for run in STUDY.jobs.values() if queued else ():
        key = job_comment(
            "train", [run.dataset, run.variant, run.schedule, run.seed, run.runid]
        )
        if key in queued:
            found[run.runid] = queued[key][0]
    return found


# asked where a SLURM controller answers (scontrol ping), also of a dry run: what it lists is what would run
SCHEDULED_TRAININGS = scheduled_trainings() if workflow.is_main_process else {}


def runs_to_await():
    """runid of every run running now (what `status` calls running), and of every finished run with its outputs: a
    job of such a run that Snakemake would start again (its finish unrecorded by a controller that died, `-R`) runs
    await_training on this machine, a no-op, instead of a GPU job."""
    found = set()
    for r in study_status(STUDY).runs:
        finished = r.state == "finished" and all(
            (Path(r.run) / name).is_file() for name in OUTPUTS
        )
        if r.state == "running" or finished:
            found.add(STUDY.jobs[r.run].runid)
    return sorted(found - set(SCHEDULED_TRAININGS))


RUNNING_RUNIDS = runs_to_await() if workflow.is_main_process else []
