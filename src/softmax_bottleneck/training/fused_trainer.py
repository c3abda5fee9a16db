"""K runs of one shape trained by one process, their LSTM recurrences fused (:mod:`.fused_step`): ``train-fused``.

Each run of the group is a :class:`.Trainer` of its own: its run folder and lock, resume state, progress file,
curve, logging intervals, validation, best weights, ET/NT switch and final files are the very ones a solo ``train``
writes, by the same code; only its updates are made together with the group's (:func:`.fused_update`), each from its
own random streams (:class:`.RunRNG`) and its own data position. A run starts and ends its epochs on its own schedule
(its batch lengths are its own); the runs whose epochs end at one update (runs of one seed, which step in lock-step)
are validated together, and the runs that end together are tested together (:mod:`.fused_evaluation`). A run that
finishes, diverges or fails leaves the group and the others go on. A run already finished is restored, never trained
again; a run whose folder another process holds is left to it. On SIGTERM/SIGINT every run saves its state and the
process exits 143; the same command resumes every run from its own last state (:mod:`.state`).

On the CPU each run's numbers equal its solo training's bit for bit when the solo training runs PyTorch's own LSTM
(oneDNN's LSTM off); on CUDA the recurrences are batched (:mod:`.fused_lstm`) and a run's numbers are meant not to
depend on its group (to be measured on a card: ``benchmarks/gpu_session.py``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from softmax_bottleneck import presets
from softmax_bottleneck.atomic import atomic_write_json, os_error_reason
from softmax_bottleneck.corpora.corpus import Corpus, load_corpus
from softmax_bottleneck.training.environment import check_group_fits, resolve_device
from softmax_bottleneck.training.fused_evaluation import evaluate_group
from softmax_bottleneck.training.fused_step import check_fusable, fused_update
from softmax_bottleneck.training.host_memory import keep_freed_host_memory
from softmax_bottleneck.training.lock import RunFolderBusy, run_lock
from softmax_bottleneck.training.state import make_read_only
from softmax_bottleneck.training.step import next_batch
from softmax_bottleneck.training.stop_flag import StopFlag
from softmax_bottleneck.training.train_command import add_data_and_device, data_folder, training_device
from softmax_bottleneck.training.trainer import PREEMPTED_EXIT, RUN_LABEL, Preempted, RunLog, Trainer

log = logging.getLogger("softmax_bottleneck.train")


@dataclass(frozen=True)
class RunSpec:
    """One run of a group: its variant, schedule, seed, run folder and own hyper-parameter values (``sets``, over the
    group's ``--set``; the dataset is the group's)."""

    variant: str
    schedule: str
    seed: int
    out: Path
    sets: tuple = ()

    @property
    def label(self) -> str:
        return f"{self.variant}/{self.schedule}/seed {self.seed}"


class _Member:
    """A run while it trains in the group: its trainer, its open lock and progress attempt, its current epoch (None
    between epochs) and, once that is over, its training loss."""

    def __init__(self, trainer: Trainer, stack: contextlib.ExitStack):
        self.trainer, self.stack, self.epoch, self.train_loss = trainer, stack, None, None

    @property
    def done(self) -> bool:
        return self.epoch is None and self.trainer.progress.epoch >= self.trainer.hp["epochs"]

    def begin(self) -> None:
        self.epoch = self.trainer.begin_epoch()
        self.trainer.start_epoch_clock()

    def end(self) -> None:
        """The epoch is over: its clock stops and its training loss is read (:class:`.Diverged` if not finite)."""
        self.trainer.stop_epoch_clock()
        self.train_loss = self.trainer.epoch_train_loss(self.epoch)

    def close(self, val_loss: float, stop: StopFlag) -> None:
        self.trainer.close_epoch(self.epoch, stop, (self.train_loss, val_loss))
        self.epoch = self.train_loss = None


#: ``on_end(k, exception)``: run ``k`` of the group has left it without finishing
Ended = Callable[[int, Exception], None]


class _Outcomes(dict):
    """Run index → metrics or the exception that ended it; an exception is told to ``on_end`` when it is recorded."""

    def __init__(self, on_end: Ended | None):
        super().__init__()
        self.on_end = on_end

    def __setitem__(self, k: int, outcome) -> None:
        super().__setitem__(k, outcome)
        if self.on_end is not None and isinstance(outcome, Exception):
            self.on_end(k, outcome)


class FusedGroup:
    """Trainers of one shape (:func:`.check_fusable`) on one device (each with its random streams in ``rng``)."""

    def __init__(self, trainers: list[Trainer], labels: list[str], on_end: Ended | None = None):
        check_fusable([t.hp for t in trainers], [str(t.out_dir) for t in trainers])
        if len({t.device for t in trainers}) != 1:
            raise ValueError("the runs of a fused group train on one device")
        self.trainers = trainers
        self.on_end = on_end
        for trainer, label in zip(trainers, labels, strict=True):
            trainer.log, trainer.fused_runs = RunLog(label), len(trainers)

    def fit(self) -> list:
        """Every run's metrics, or the exception that ended it, in the group's order; ``on_end(k, exception)`` is
        called as soon as run ``k`` leaves the group without finishing (its log says so then, not when the others
        end, maybe days later)."""
        outcomes = _Outcomes(self.on_end)
        with StopFlag() as stop:
            members = []
            for k, trainer in enumerate(self.trainers):
                stack = contextlib.ExitStack()
                try:
                    stack.enter_context(run_lock(trainer.out_dir))
                    with trainer.rng:
                        restored = trainer.open()
                    if restored is not None:
                        outcomes[k] = restored
                        stack.close()
                        continue
                    stack.enter_context(trainer.progress_file.attempt(trainer.progress, stops=(Preempted,)))
                except Exception as err:
                    stack.close()
                    outcomes[k] = err
                    continue
                members.append((k, _Member(trainer, stack)))
            while members:
                members = self._one_update(self._advance(members, outcomes, stop), outcomes, stop)
        return [outcomes[k] for k in range(len(self.trainers))]

    @staticmethod
    def _settle(k: int, member: _Member, outcomes: dict, step) -> bool:
        """Run ``step`` under the run's streams; True while the run goes on (its outcome recorded when it ends:
        ``step`` returned its metrics or raised)."""
        try:
            with member.trainer.rng:
                done = step()
        except Exception as err:  # the attempt records why (stopped by a signal, or the error); the lock is released
            member.stack.__exit__(type(err), err, err.__traceback__)
            outcomes[k] = err
            return False
        if done is None:
            return True
        member.stack.close()
        outcomes[k] = done
        return False

    @staticmethod
    def _fail(members: list, outcomes: dict, err: Exception) -> list:
        """A failure of a step the runs share ends every run of it."""
        for k, member in members:
            member.stack.__exit__(type(err), err, err.__traceback__)
            outcomes[k] = err
        return []

    def _advance(self, members: list, outcomes: dict, stop: StopFlag) -> list:
        """Bring every run to its next update: runs past their last epoch are tested together and finish, the
        others begin their next epoch; runs whose epoch is over are validated together and close it, and so on."""
        while True:
            done = [(k, m) for k, m in members if m.done]
            if done:
                self._finish(done, outcomes)
                members = [(k, m) for k, m in members if not m.done]
            members = [(k, m) for k, m in members if m.epoch is not None or self._settle(k, m, outcomes, m.begin)]
            over = [(k, m) for k, m in members if m.trainer.epoch_over()]
            if not over:
                return members
            going_on = [(k, m) for k, m in members if not m.trainer.epoch_over()]
            going_on += self._close_epochs(over, outcomes, stop)
            members = sorted(going_on, key=lambda member: member[0])  # the group's order: a run's slot never moves

    def _close_epochs(self, over: list, outcomes: dict, stop: StopFlag) -> list:
        """Validate the runs whose epoch is over together (each on its :meth:`.Trainer.validation_weights`) and close
        their epochs; the runs that go on."""
        over = [(k, m) for k, m in over if self._settle(k, m, outcomes, m.end)]
        try:
            with contextlib.ExitStack() as weights:
                for _, member in over:
                    weights.enter_context(member.trainer.validation_weights())
                losses = evaluate_group([m.trainer for _, m in over], [m.trainer.val_data for _, m in over])
        except Exception as err:
            return self._fail(over, outcomes, err)
        return [
            (k, m)
            for (k, m), loss in zip(over, losses, strict=True)
            if self._settle(k, m, outcomes, lambda m=m, loss=loss: m.close(loss, stop))
        ]

    def _finish(self, done: list, outcomes: dict) -> None:
        """Test the best weights of the runs past their last epoch together, then write each run's outputs."""
        done = [(k, m) for k, m in done if self._settle(k, m, outcomes, m.trainer.load_best)]
        try:
            losses = evaluate_group([m.trainer for _, m in done], [m.trainer.test_data for _, m in done])
        except Exception as err:
            self._fail(done, outcomes, err)
            return
        for (k, m), loss in zip(done, losses, strict=True):
            self._settle(k, m, outcomes, lambda m=m, loss=loss: m.trainer.finish(loss))

    def _one_update(self, members: list, outcomes: dict, stop: StopFlag) -> list:
        if not members:
            return []
        batches = []
        for _, member in members:
            t = member.trainer
            with t.rng:
                batches.append(next_batch(t.hp, t.train_data, t.progress.position))
        try:
            fused_update([m.trainer for _, m in members], batches)
        except Exception as err:
            return self._fail(members, outcomes, err)

        def after(member, seq_len):
            member.trainer.batch_done(member.epoch, seq_len, stop)

        return [
            (k, m)
            for (k, m), (_, _, seq_len) in zip(members, batches, strict=True)
            if self._settle(k, m, outcomes, lambda m=m, seq_len=seq_len: after(m, seq_len))
        ]


def train_group(
    *, dataset: str, runs: list[RunSpec], overrides: dict | None = None, data_dir=None, corpus_cache=None,
    device: str = "auto", corpus: Corpus | None = None, checkpoint_seconds: float = 600.0,
    on_end: Ended | None = None,
) -> list:  # fmt: skip
    """Resolve every run's preset, load the corpus once, train the group; every run's metrics or exception
    (``on_end``: :meth:`FusedGroup.fit`)."""
    folders = [spec.out.resolve() for spec in runs]
    twice = next((spec.out for spec, folder in zip(runs, folders, strict=True) if folders.count(folder) > 1), None)
    if twice is not None:
        raise ValueError(f"two runs of the group name the same run folder, {twice}")
    hps = []
    for spec in runs:
        own = {**(overrides or {}), **dict(spec.sets), "seed": int(spec.seed)}
        hp = presets.resolve(dataset, spec.variant, spec.schedule, own)
        hps.append(hp)
    check_fusable(hps, [str(spec.out) for spec in runs])  # before loading anything
    device = resolve_device(device)
    if corpus is None:
        corpus = load_corpus(data_dir, corpus_cache)
        if corpus.vocab_size != presets.VOCAB_SIZES[dataset]:
            raise ValueError(f"{data_dir}: {dataset} must have a vocabulary of {presets.VOCAB_SIZES[dataset]} words, "
                             f"this corpus has {corpus.vocab_size}")  # fmt: skip
    check_group_fits(hps, corpus.vocab_size, device)
    trainers = []
    for spec, hp in zip(runs, hps, strict=True):
        limited = corpus.limited(hp["train_tokens"], hp["valid_tokens"], hp["test_tokens"])
        trainer = Trainer(dataset=dataset, variant=spec.variant, hp=hp, corpus=limited, out_dir=spec.out,
                          device=device, checkpoint_seconds=checkpoint_seconds)  # fmt: skip
        trainers.append(trainer)
    return FusedGroup(trainers, group_labels(runs), on_end).fit()


def group_labels(runs: list[RunSpec]) -> list[str]:
    """Each run's label in its group's log: ``variant/schedule/seed N``, with its folder's name where another run of
    the group has the same (a sweep's points)."""
    labels = [spec.label for spec in runs]
    return [f"{label} ({spec.out.name})" if labels.count(label) > 1 else label
            for label, spec in zip(labels, runs, strict=True)]  # fmt: skip


@contextlib.contextmanager
def run_logs(runs: list[RunSpec], files: dict[Path, Path]):
    """While the block runs, each run's own log lines (and what ``train-fused`` says of it) are also appended to its
    file of ``files`` (run folder → log file), with the line format of the process's first handler."""
    labels = dict(zip((spec.out.resolve() for spec in runs), group_labels(runs), strict=True))
    unknown = [str(out) for out in files if out.resolve() not in labels]
    if unknown:
        raise ValueError(f"--run-log {unknown[0]}: not the folder of a --run of this group")
    handlers = []
    root = logging.getLogger()
    formatter = root.handlers[0].formatter if root.handlers else None
    try:
        for out, file in files.items():
            file.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(file, mode="a", encoding="utf-8")
            handler.setFormatter(formatter)
            label = labels[out.resolve()]
            handler.addFilter(lambda record, label=label: getattr(record, RUN_LABEL, None) == label)
            log.addHandler(handler)
            handlers.append(handler)
        yield
    finally:
        for handler in handlers:
            log.removeHandler(handler)
            handler.close()


def check_stamps(dataset: str, runs: list[RunSpec], overrides: dict, stamps: dict[str, Path]) -> None:
    """ValueError naming the first run whose output layer has a stamp in ``stamps`` (layer → file, written by
    ``check-layer NAME --stamp FILE``) that does not vouch for it as registered now, at the run's values."""
    from softmax_bottleneck.training.conformance_stamp import conformance_stamp_ok

    for spec in runs:
        hp = presets.resolve(dataset, spec.variant, spec.schedule, {**overrides, **dict(spec.sets)})
        stamp = stamps.get(hp["output_layer"])
        if stamp is not None:
            ok, why = conformance_stamp_ok(stamp, hp["output_layer"], hp)
            if not ok:
                raise ValueError(f"{spec.label}: {why}")


def add_cli(parser) -> None:
    parser.add_argument("--dataset", required=True, choices=presets.DATASETS, help="ptb or wt2")
    parser.add_argument(
        "--run", dest="runs", action="append", nargs="+", required=True,
        metavar="VARIANT SCHEDULE SEED OUT [KEY=VALUE ...]",
        help="one run of the group (repeat for each): its variant, schedule (et or nt), seed, run folder, and "
        "values of its own hyper-parameters over --set",
    )  # fmt: skip
    add_data_and_device(parser, "every run's preset", "each run's resume state")
    parser.add_argument(
        "--run-log", nargs=2, action="append", default=[], metavar=("OUT", "FILE"),
        help="also append run OUT's log lines to FILE (repeatable; the workflow gives each run its training log)",
    )  # fmt: skip
    parser.add_argument(
        "--conformance-stamp", action="append", default=[], metavar="LAYER=FILE",
        help="train a run of plug-in output layer LAYER only if FILE (check-layer LAYER --stamp FILE) vouches for "
        "the layer as registered now (repeatable; the workflow passes one per plug-in layer of the group)",
    )  # fmt: skip
    parser.add_argument(
        "--leave-busy", action="store_true",
        help="a run whose folder another process holds is left to it (one line), not a failure: the workflow's group "
        "job names every run of its group, whichever of them runs elsewhere",
    )  # fmt: skip
    parser.add_argument(
        "--record", default=None, metavar="FILE",
        help="where no run failed or was stopped, write FILE: each finished run's folder and test perplexity (the "
        "workflow's record that the group's job is done)",
    )  # fmt: skip


def _spec(values: list[str]) -> RunSpec:
    if len(values) < 4:
        raise ValueError(f"--run {' '.join(values)}: give VARIANT SCHEDULE SEED OUT, then any KEY=VALUE")
    variant, schedule, seed, out, *sets = values
    if schedule not in presets.SCHEDULES:
        raise ValueError(f"--run {' '.join(values)}: schedule must be one of {', '.join(presets.SCHEDULES)}")
    try:
        number = int(seed)
    except ValueError:
        raise ValueError(f"--run {' '.join(values)}: the seed must be an integer, got {seed!r}") from None
    return RunSpec(variant, schedule, number, Path(out), tuple(presets.parse_overrides(sets).items()))


def _stamps(values: list[str]) -> dict[str, Path]:
    stamps = {}
    for value in values:
        layer, sep, file = value.partition("=")
        if not sep or not layer or not file:
            raise ValueError(f"--conformance-stamp {value}: give LAYER=FILE")
        stamps[layer] = Path(file)
    return stamps


def run_cli(args) -> int:
    data_dir = data_folder(args)
    try:
        specs = [_spec(values) for values in args.runs]
        overrides = presets.parse_overrides(args.overrides)
        for spec in specs:  # as train: the workflow's model_overrides/all may name other layers' keys
            foreign = presets.not_owned_note(spec.variant, {**overrides, **dict(spec.sets)})
            if foreign:
                log.warning("%s: %s (ignored)", spec.out, foreign)
        check_stamps(args.dataset, specs, overrides, _stamps(args.conformance_stamp))
        keep_freed_host_memory(training_device(args))  # this process is the group's alone
        with run_logs(specs, {Path(out): Path(file) for out, file in args.run_log}):
            labels = group_labels(specs)
            said = lambda k, err: say_ended(specs[k], labels[k], err, args.leave_busy)  # noqa: E731
            outcomes = train_group(dataset=args.dataset, runs=specs, overrides=overrides, data_dir=data_dir,
                                   corpus_cache=args.corpus_cache, device=args.device,
                                   checkpoint_seconds=args.checkpoint_seconds, on_end=said)  # fmt: skip
            code = exit_status(outcomes, args.leave_busy)
        finished = [(spec, o) for spec, o in zip(specs, outcomes, strict=True) if isinstance(o, dict)]
        if args.read_only_outputs:
            for spec, _ in finished:
                make_read_only(spec.out)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"train-fused: {err}") from None
    except OSError as err:
        raise SystemExit(f"train-fused: {os_error_reason(err)}") from None
    if code == 0 and args.record:
        atomic_write_json({"runs": [{"run": str(spec.out), "test_ppl": o.get("test_ppl")} for spec, o in finished]},
                          args.record)  # fmt: skip
    return code


def say_ended(spec: RunSpec, label: str, outcome: Exception, leave_busy: bool = False) -> None:
    """One line, in the run's own log too, for a run that left its group without finishing, when it leaves. With
    ``leave_busy``, a run another process holds is left to it (an info line)."""
    extra = {RUN_LABEL: label}
    if leave_busy and isinstance(outcome, RunFolderBusy):
        log.info("%s: left to the process that holds it (%s)", label, outcome)
    elif isinstance(outcome, Preempted):
        log.warning("%s: pre-empted (%s); state saved, rerun the same command to resume", label, outcome, extra=extra)
    else:
        reason = os_error_reason(outcome) if isinstance(outcome, OSError) else str(outcome)
        log.error("%s (%s): %s", label, spec.out, reason, extra=extra)


def exit_status(outcomes: list, leave_busy: bool = False) -> int:
    """1 when a run failed, 143 when one was pre-empted and none failed, else 0. With ``leave_busy``, a run another
    process holds is not a failure."""
    ended = [o for o in outcomes if isinstance(o, BaseException) and not (leave_busy and isinstance(o, RunFolderBusy))]
    if any(not isinstance(o, Preempted) for o in ended):
        return 1
    return PREEMPTED_EXIT if ended else 0
