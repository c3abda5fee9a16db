# What the train, await and check_layer rules of train.smk need: the training log and the time limit of each attempt,
# a plug-in layer's check and its stamp, and the runs to wait for instead of training (functions only: `snakemake
# --lint` asks rules and functions apart).
#
# A training already running when Snakemake starts (a cluster job left by a Snakemake that died), or finished with its
# outputs, is waited for by the local rule await_training, never submitted a second time (softmax_bottleneck.study.wait_for_run); one whose `train`
# job SLURM still lists as pending or running (its comment names the rule and wildcards) by the local rule
# await_scheduled_training, which waits for that job to leave the queue first (softmax_bottleneck.cluster.scheduler).
# Both declare `train`'s inputs and parameters (the others Unrecorded), so Snakemake's record of a run they finished is
# the record `train` would have made: the next controller does not submit it again.

from softmax_bottleneck.cluster.scheduler import job_comment, queued_jobs
from softmax_bottleneck.cluster.time_limit import time_limit_minutes
from softmax_bottleneck.models.output_layers import output_layer
from softmax_bottleneck.study.fusion import fused_groups, fusion_notes, group_of_runs
from softmax_bottleneck.study.plan import fused_memory_mb
from softmax_bottleneck.study.status import study_status
from softmax_bottleneck.study.wait_for_run import OUTPUTS
from softmax_bottleneck.study.workflow_start import paper_scale
from softmax_bottleneck.training.conformance import point_argument

# The fused groups of the configuration (`fusion: runs_per_job`, softmax_bottleneck.study.fusion): name -> group, and
# run folder -> its group's name. They follow from the configuration alone, so a controller started again finds the
# group of a SLURM job another one submitted.
FUSED_GROUPS = fused_groups(STUDY)
GROUP_OF = group_of_runs(FUSED_GROUPS)


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
    value = snakemake_run.set_resource(workflow, "train", "max_runtime")
    if value is None:
        return None
    try:
        return time_limit_minutes(value)
    except ValueError as err:
        raise SystemExit(f"set-resources: train: max_runtime: {value!r}: {err}")


SITE_TIME_LIMIT = site_time_limit()
if CONTROLLER and snakemake_run.set_resource(workflow, "train", "runtime") is not None:
    print(
        "note: set-resources: train: runtime replaces every training's own time estimate with one number; give the "
        "partition's time limit as max_runtime instead (docs/cluster.md, step 3)",
        file=sys.stderr,
    )


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


# --------------------------------------------------------------------------------------------- a plug-in layer's check
# A plug-in layer is checked (check_layer) at every point of its own keys that the configuration trains, before any
# of its trainings, which present the check's stamp. The stamp is an ancient() input of a finished run, so a new check
# (after the layer's code or its points changed) never trains that run again; it is a plain input of a run still to
# train, which runs anyway: Snakemake (9.27) leaves out of a run every job whose only link to a job that runs again is
# an ancient() input, whatever its own reason to run (snakemake/snakemake#4166), and a new point's trainings, and all
# that reads them, would wait for the next `snakemake`.
#: a plug-in layer's conformance stamp, check_layer's output
STAMP = "results/conformance/{layer}.json"


def plugin_layer(variant):
    """The output layer of ``variant`` when it is a plug-in (not one of the paper's), else None."""
    layer = presets.variant_info(variant).output_layer
    return None if output_layer(layer).builtin else layer


def stamp_input(layer, finished):
    """The stamp of ``layer`` as an input: ancient() where what depends on it is ``finished``."""
    stamp = STAMP.format(layer=layer)
    return ancient(stamp) if finished else stamp


def conformance_stamp(wildcards):
    """A plug-in layer's conformance stamp, for one run's training (none for the paper's layers)."""
    layer = plugin_layer(wildcards.variant)
    if not layer:
        return []
    run = STUDY.job(wildcards).dir
    finished = all(os.path.exists(f"{run}/{name}") for name in OUTPUTS)
    return [stamp_input(layer, finished)]


def check_layer_points(wildcards):
    """``--point KEY=VALUE,...`` of each point of the layer's own hyper-parameters that a training job of the
    configuration uses (none for a layer without hyper-parameters of its own)."""
    points = sorted(
        {point_argument(p) for p in STUDY.layer_points(wildcards.layer)} - {""}
    )  # not the config's order
    return " ".join(f"--point {shlex.quote(text)}" for text in points)


def train_sets(wildcards):
    """``--set key=value`` arguments of one training job (model overrides + the experiment's values), and
    for a plug-in layer the conformance stamp it must present."""
    sets = [f"--set {shlex.quote(item)}" for item in STUDY.job(wildcards).set_arguments]
    stamp = conformance_stamp(wildcards)
    if stamp:
        sets.append(f"--conformance-stamp {stamp[0]}")
    return " ".join(sets)


def cpu_guard(runs):
    """`--refuse-cpu` for a job that trains a paper-scale run, unless allow_cpu_training: the job stops at once where
    it finds no CUDA device. The workflow's own check at its start (onstart) does not run where the study's rules are
    a module of another workflow, nor on a cluster's node."""
    refuse = paper_scale(runs) and not config.get("allow_cpu_training")
    return Unrecorded("--refuse-cpu" if refuse else "")


def train_log(wildcards):
    return Unrecorded(TRAIN_LOG.format(**dict(wildcards.items())))


def train_epochs(wildcards):
    return Unrecorded(STUDY.job(wildcards).hyperparameters["epochs"])


def scheduled_trainings():
    """runid -> SLURM job id of every training of the study whose `train` job, or whose fused group's `train_fused`
    job, is pending or running."""
    queued = queued_jobs("train")
    found = {}
    for run in STUDY.jobs.values() if queued else ():
        key = job_comment("train", list(run.wildcards.values()))
        if key in queued:
            found[run.runid] = queued[key][0]
    for key, (jobid, _) in queued_jobs("train_fused").items():
        name = key.removeprefix(job_comment("train_fused", [""]))
        if name not in FUSED_GROUPS:
            print(
                f"note: SLURM job {jobid} trains fused group {name}, which this configuration does not plan; "
                f"its runs may be submitted again: wait for it, or cancel it (scancel {jobid})",
                file=sys.stderr,
            )
            continue
        for run in FUSED_GROUPS[name].runs:
            found[run.runid] = jobid
    return found


# asked where a SLURM controller answers (scontrol ping), also of a dry run: what it lists is what would run
SCHEDULED_TRAININGS = scheduled_trainings() if CONTROLLER else {}


def runs_to_await():
    """runid of every run running now (what `status` calls running), and of every finished run with its outputs: a
    job of such a run that Snakemake would start again (its finish unrecorded by a controller that died, `-R`) runs
    await_training on this machine, a no-op, instead of a GPU job."""
    found = set()
    for r in study_status(STUDY, slurm=False).runs:  # SCHEDULED_TRAININGS holds SLURM's
        finished = r.state == "finished" and all(
            (Path(r.run) / name).is_file() for name in OUTPUTS
        )
        if r.state == "running" or finished:
            found.add(STUDY.jobs[r.run].runid)
    return sorted(found - set(SCHEDULED_TRAININGS))


#: runid of every run await_training waits for: running or finished when Snakemake started, and not in SLURM's queue
LOCALLY_AWAITED_RUNIDS = runs_to_await() if CONTROLLER else []
#: runid of every run this controller waits for instead of training it (running, finished, or queued in SLURM)
AWAITED_RUNIDS = set(LOCALLY_AWAITED_RUNIDS) | set(SCHEDULED_TRAININGS)


# --------------------------------------------------------------------------------------------- fused groups (train.smk)
def fused_trainees(group):
    """The runs of a fused group that this controller has its group's job train: every run but those it waits for
    (finished, running, or their job still queued in SLURM). They start the group's job and size its resources.
    """
    return [run for run in FUSED_GROUPS[group].runs if run.runid not in AWAITED_RUNIDS]


def fused_group_first(wildcards):
    """No file: for a run that its fused group trains, that group's job (checkpoint train_fused) first. Once it has
    run, the run's `train` job finds its outputs and does not run; its inputs, as recorded, are `train`'s as ever.
    """
    group = GROUP_OF.get(STUDY.job(wildcards).dir)
    if group and any(run.runid == wildcards.runid for run in fused_trainees(group)):
        checkpoints.train_fused.get(group=group)
    return []


def fused_dataset(wildcards):
    return FUSED_GROUPS[wildcards.group].dataset


def fused_corpus(wildcards):
    return ancient(
        [f"{corpus_dir(fused_dataset(wildcards))}/{split}.txt" for split in SPLITS]
    )


def fused_corpus_cache(wildcards):
    return ancient(CORPUS_CACHE.format(dataset=fused_dataset(wildcards)))


# The group's command names every run of the group, whichever of them this controller waits for: a cluster job
# evaluates its command in a Snakemake of its own, which knows nothing of the runs running or queued elsewhere. Each run
# then takes care of itself: a finished one is found finished (nothing trained), one that another process holds is left
# to it (job-start and train-fused --leave-busy), the others train.
def fused_layers(wildcards):
    return sorted(
        {plugin_layer(run.variant) for run in FUSED_GROUPS[wildcards.group].runs}
        - {None}
    )


def fused_stamps(wildcards):
    """The conformance stamps of the group's plug-in layers, as `train`'s: ancient() once the group's job has run."""
    done = os.path.exists(f"results/fused/{wildcards.group}.json")
    return [stamp_input(layer, done) for layer in fused_layers(wildcards)]


def fused_arguments(wildcards):
    """`train-fused`'s --run, --run-log and --conformance-stamp arguments for the group's runs."""
    args = []
    for run in FUSED_GROUPS[wildcards.group].runs:
        fields = [run.variant, run.schedule, str(run.seed), run.dir, *run.set_arguments]
        args.append("--run " + " ".join(shlex.quote(field) for field in fields))
        args.append(f"--run-log {run.dir} {TRAIN_LOG.format(**run.wildcards)}")
    args += [
        f"--conformance-stamp {layer}={STAMP.format(layer=layer)}"
        for layer in fused_layers(wildcards)
    ]
    return Unrecorded(" ".join(args))


def fused_locks(wildcards):
    """job-start's --run of each run of the group: their locks are the job's first act."""
    return Unrecorded(
        " ".join(f"--run {run.dir}" for run in FUSED_GROUPS[wildcards.group].runs)
    )


def fused_memory(wildcards, attempt):
    """The host memory of the runs this controller has the group train (those it does not wait for)."""
    return fused_memory_mb(
        fused_dataset(wildcards), len(fused_trainees(wildcards.group)), attempt
    )


def fused_runtime(wildcards, attempt):
    """Minutes one attempt of a group asks: its runs' times one after another (fusion's gain on a card is not
    measured yet), at most the site's limit (a longer group resumes in the next attempt).
    """
    minutes = sum(
        train_runtime_minutes(run, attempt) for run in fused_trainees(wildcards.group)
    )
    return min(minutes, SITE_TIME_LIMIT) if SITE_TIME_LIMIT else minutes
