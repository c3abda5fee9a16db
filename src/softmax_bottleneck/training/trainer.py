"""The training loop: one model from its preset to ``model.pt``, ``metrics.json``, ``curve.csv`` (paper §4; SM §2).

Per batch (:mod:`.step`, :mod:`.schedule`): variable-length BPTT, lr scaled by ``seq_len/bptt``;
gradients accumulate over ``small_batch_size`` column chunks, each with its own carried hidden state;
loss = mean NLL + α·mean(dropped h³²) + β·mean((raw h³_t − raw h³_{t−1})²); global grad-norm clip;
SGD/ASGD step. Losses stay on the device until a logging interval closes.

End of epoch: validate (averaged weights swapped in during the ASGD phase), keep the best checkpoint
by validation loss, then, still in the SGD phase, apply the ET or NT switch rule.

Reported numbers: valid ppl of the best checkpoint; test ppl of that checkpoint at batch 1;
"train ppl" = exp of the mean of the interval means logged during the best epoch (training mode, raw
SGD iterates), with the authors' interval bookkeeping (:mod:`.intervals`).

Following a run (:mod:`.run_files`): ``<out>/.resume/progress.json`` says after every epoch where the run stands
(epoch, best validation perplexity, each epoch's wall time), and why an attempt stopped.

Crash safety (:mod:`.state`): the whole training state is written atomically to
``<out>/.resume/state.pt`` at most every ``checkpoint_seconds`` (between batches) and always on
SIGTERM/SIGINT (then the process exits with status 143). Rerunning the same command resumes from it.
At the very end the outputs ``model.pt``, ``metrics.json``, ``curve.csv`` are written to the kept final
set ``<out>/.resume/final/`` (committed by one rename), ``state.pt`` is removed, and the outputs get
their declared names as hard links. Rerunning a finished run whose declared outputs were deleted (what
Snakemake does to a job that failed, e.g. one killed right after training) verifies the kept set and
restores them: nothing is trained again. A finished run is never trained over.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from softmax_bottleneck import presets
from softmax_bottleneck.atomic import WriteError, atomic_write_json, atomic_write_text, fsync_dir
from softmax_bottleneck.corpora.corpus import Corpus, batchify, load_corpus
from softmax_bottleneck.corpora.integrity import file_sha256
from softmax_bottleneck.models.awd_lstm import AWDLSTM
from softmax_bottleneck.readback import error_line
from softmax_bottleneck.training.checkpoint import save_model
from softmax_bottleneck.training.environment import check_model_fits, configure_precision, environment, resolve_device
from softmax_bottleneck.training.evaluation import evaluate, perplexity
from softmax_bottleneck.training.identity import folder_hash, twin_folders, twin_refusal
from softmax_bottleneck.training.intervals import epoch_train_loss, interval_batches
from softmax_bottleneck.training.lock import LOCK_NAME, run_lock
from softmax_bottleneck.training.preflight import preflight
from softmax_bottleneck.training.run_files import PROGRESS_NAME, ProgressFile, curve_csv, time_left_text
from softmax_bottleneck.training.run_rng import RunRNG
from softmax_bottleneck.training.schedule import AveragedWeights, asgd_trigger, longest_seq_len, make_optimizer
from softmax_bottleneck.training.state import (
    FINAL_DIR,
    PUBLISH_ORDER,
    FinalSetError,
    Progress,
    ResumeError,
    check_progress,
    check_resumed_tensors,
    commit_final,
    legacy_fingerprint,
    load_resume,
    publish_final,
    run_fingerprint,
    save_resume,
    seed_everything,
    set_rng_state,
    verify_final,
)
from softmax_bottleneck.training.step import LossSums, train_batch
from softmax_bottleneck.training.stop_flag import StopFlag

__all__ = [
    "AveragedWeights",
    "FinalSetError",
    "Preempted",
    "RunFinished",
    "Trainer",
    "asgd_trigger",
    "resolve_device",
    "train",
]

log = logging.getLogger("softmax_bottleneck.train")


#: the attribute of a trainer's log record that holds its run's label (a fused group's per-run logs select by it)
RUN_LABEL = "run_label"


class RunLog(logging.LoggerAdapter):
    """The trainer's log lines, each prefixed with the run's label when a process trains several (fused)."""

    def __init__(self, label: str = ""):
        super().__init__(log, {RUN_LABEL: label})
        self.label = label

    def process(self, msg, kwargs):
        kwargs["extra"] = {**self.extra, **(kwargs.get("extra") or {})}
        return (f"{self.label}: {msg}" if self.label else msg), kwargs


PREEMPTED_EXIT = 143  # 128 + SIGTERM


class Preempted(Exception):
    """SIGTERM/SIGINT arrived; the state was saved and the run can be resumed."""


class RunFinished(ValueError):
    """The run folder already holds a finished run: it is never trained over."""


class Diverged(FloatingPointError):
    """The training loss became non-finite (or left the sane range); the message names epoch and batch."""


class Trainer:
    """One run: ``fit()`` trains (resuming from ``<out>/.resume/state.pt`` when there is one) and writes the outputs.

    ``checkpoint_seconds`` is how often, at most, the resume state is written (and always on
    SIGTERM/SIGINT); it is not a hyper-parameter: it changes neither the run's numbers nor its identity.
    """

    def __init__(
        self, *, dataset: str, variant: str, hp: dict, corpus: Corpus, out_dir, device="cpu",
        checkpoint_seconds: float = 600.0,
    ):  # fmt: skip
        self.dataset, self.variant, self.hp = dataset, variant, dict(hp)
        self.checkpoint_seconds = float(checkpoint_seconds)
        self.log, self.fused_runs = RunLog(), None  # a fused group sets the number of its runs
        self._epoch_walls: list[float] = []  # wall seconds of the epochs this process ran (time left)
        self._epoch_started = time.monotonic()
        self.corpus = corpus
        self.out_dir = Path(out_dir)
        self.resume_dir = self.out_dir / ".resume"
        self.state_path = self.resume_dir / "state.pt"
        self.final_dir = self.resume_dir / FINAL_DIR
        self.device = torch.device(device)
        self.fingerprint = run_fingerprint(self.hp, corpus)
        run = {"dataset": dataset, "variant": variant, "schedule": self.hp["schedule"], "seed": self.hp["seed"]}
        self.progress_file = ProgressFile(self.resume_dir / PROGRESS_NAME, run=run, epochs=self.hp["epochs"],
                                          checkpoint_seconds=self.checkpoint_seconds)  # fmt: skip
        self.legacy_fingerprint = legacy_fingerprint(dataset, variant, self.hp, corpus)
        claimed = folder_hash(self.out_dir.name)
        if claimed and claimed != self.fingerprint[: len(claimed)]:
            raise ResumeError(
                f"{self.out_dir}: its name claims run identity {claimed}, but these hyper-parameters, seed and data "
                f"are run {self.fingerprint[: len(claimed)]}; train into the folder the workflow names for them, or a "
                "folder whose name does not end in -<8 hex digits>"
            )
        twins = twin_folders(self.out_dir)
        if twins:
            raise ResumeError(twin_refusal(self.out_dir, twins[0]))

        check_model_fits(self.hp, corpus.vocab_size, self.device)
        configure_precision(self.hp.get("tf32", False))
        seed_everything(self.hp["seed"])
        self.model = AWDLSTM(corpus.vocab_size, self.hp).to(self.device)
        self.train_data = batchify(corpus.train, self.hp["batch_size"]).to(self.device)
        self.val_data = batchify(corpus.valid, self.hp["eval_batch_size"]).to(self.device)
        self.test_data = batchify(corpus.test, self.hp["test_batch_size"]).to(self.device)
        self.progress = Progress()
        self.sums = LossSums(self.device)
        self.optimizer = make_optimizer(self.model, self.hp, "sgd")
        self.hidden = self._fresh_hidden()
        self.best_weights: dict | None = None  # CPU copy of the best checkpoint so far
        self.resumed = False
        self._last_save = time.monotonic()
        # where the run's random streams stand now: a fused group swaps them in for each of the run's draws
        self.rng = RunRNG(self.device).capture()

    # ----------------------------------------------------------------- state
    def _fresh_hidden(self):
        chunks = self.hp["batch_size"] // self.hp["small_batch_size"]
        return [self.model.init_hidden(self.hp["small_batch_size"]) for _ in range(chunks)]

    def _save_state(self) -> None:
        p = self.progress
        p.interval_loss = self._read_sums(p.epoch + 1, p.batch - p.batch % self.hp["log_interval"])
        try:
            save_resume(self.state_path, fingerprint=self.fingerprint, progress=self.progress, model=self.model,
                        optimizer=self.optimizer, hidden=self.hidden, best=self.best_weights)  # fmt: skip
        except WriteError as err:
            kept = "the previous resume state is kept" if self.state_path.is_file() else "no resume state yet"
            raise WriteError(self.state_path, f"{err.reason}; {kept}: make room, then rerun the same command to resume",
                             err.errno) from None  # fmt: skip
        self._last_save = time.monotonic()

    def _checkpoint_due(self) -> bool:
        return time.monotonic() - self._last_save >= self.checkpoint_seconds

    def _maybe_resume(self) -> bool:
        if not self.state_path.is_file():
            return False
        state = load_resume(self.state_path)
        if state["fingerprint"] not in (self.fingerprint, self.legacy_fingerprint):
            raise ResumeError(
                f"{self.state_path}: the resume state of another configuration or corpus (fingerprint "
                f"{str(state['fingerprint'])[:12]}, this run {self.fingerprint[:12]}), never resumed nor deleted; use "
                f"another --out, or delete {self.state_path} to start this run there (that run's progress is lost)"
            )
        try:
            self.progress = Progress(**state["progress"])
            check_progress(self.progress, self.hp["epochs"], self.train_data.size(0), longest_seq_len(self.hp))
            check_resumed_tensors(state, self._fresh_hidden(), self.model.state_dict())
            self.model.load_state_dict(state["model"])
            self.optimizer = make_optimizer(self.model, self.hp, self.progress.phase)
            self.optimizer.load_state_dict(state["optimizer"])
            self.hidden = [[(h.to(self.device), c.to(self.device)) for h, c in chunk] for chunk in state["hidden"]]
            set_rng_state(state["rng"])
            self.best_weights = state["best"]
            self.sums.reset(self.progress.interval_loss)
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as err:
            raise ResumeError(
                f"{self.state_path}: damaged resume state ({error_line(err)}); delete {self.resume_dir} to restart "
                "this run from scratch (its progress is lost)"
            ) from None
        p = self.progress
        self.log.info(
            "resumed from %s: epoch %d done, batch %d of epoch %d", self.state_path, p.epoch, p.batch, p.epoch + 1
        )
        return True

    # ----------------------------------------------------------------- epoch
    def _train_epoch(self, epoch: int, stop: StopFlag) -> None:
        self.start_epoch_clock()
        while not self.epoch_over():
            seq_len = train_batch(self.model, self.optimizer, self.hp, self.train_data, self.progress.position,
                                  self.hidden, self.sums)  # fmt: skip
            self.batch_done(epoch, seq_len, stop)
        self.stop_epoch_clock()

    def start_epoch_clock(self) -> None:
        self.model.train()
        self._clock = self._interval_clock = time.monotonic()

    def stop_epoch_clock(self) -> None:
        self.progress.epoch_seconds += time.monotonic() - self._clock

    def epoch_over(self) -> bool:
        return self.progress.position >= self.train_data.size(0) - 2

    def batch_done(self, epoch: int, seq_len: int, stop: StopFlag) -> None:
        """The bookkeeping after one update of ``seq_len`` rows: position, logging interval, resume state, signal."""
        p = self.progress
        p.position += seq_len
        p.batch += 1
        n = interval_batches(p.batch, p.position, self.train_data.size(0), self.hp["log_interval"])
        if n:
            self._close_interval(epoch, n, time.monotonic() - self._interval_clock)
            self._interval_clock = time.monotonic()
        if stop.signum is not None or self._checkpoint_due():
            self.stop_epoch_clock()
            self._clock = time.monotonic()
            self._save_state()
            if stop.signum is not None:
                raise Preempted(f"signal {stop.signum} at epoch {epoch}, batch {p.batch}")

    def _read_sums(self, epoch: int, first_batch: int) -> float:
        """The open interval's raw-loss sum; stops the run at the first non-finite loss since ``first_batch``."""
        raw, finite, finite_batches = self.sums.read()
        if not finite:
            raise Diverged(
                f"training diverged: non-finite loss at epoch {epoch}, batch {first_batch + finite_batches + 1}; "
                "lower lr or check the data"
            )
        return raw

    def _close_interval(self, epoch: int, n: int, seconds: float) -> None:
        p = self.progress
        cur = self._read_sums(epoch, p.batch - n) / n
        self.log.info(
            "epoch %3d | %5d batches | lr %.4g | ms/batch %6.1f | loss %5.2f | ppl %8.2f",
            epoch, p.batch, self.optimizer.param_groups[0]["lr"], seconds * 1000 / n, cur, perplexity(cur),
        )  # fmt: skip
        self._check_bound(cur, f"batches {p.batch - n + 1}-{p.batch} of epoch {epoch}")
        p.interval_means.append(cur)
        self.sums.reset()

    def _check_bound(self, loss: float, where: str) -> None:
        """Stop a run whose mean loss left the sane range [0, 2·log V] (a uniform guess scores log V)."""
        bound = 2 * math.log(self.corpus.vocab_size)
        if not loss <= bound:
            raise Diverged(
                f"training diverged: mean loss {loss:.4g} nats over {where} exceeds 2·log V = {bound:.2f}; "
                "lower lr or check the data"
            )

    def epoch_train_loss(self, epoch: int) -> float:
        """The epoch's training loss (:func:`.intervals.epoch_train_loss`); :class:`Diverged` if not finite or sane."""
        p = self.progress
        pending = p.batch % self.hp["log_interval"]
        pending_sum = self._read_sums(epoch, p.batch - pending)  # also checks a dropped last interval
        loss = epoch_train_loss(p.interval_means, pending_sum, pending)
        if not p.interval_means:
            self._check_bound(loss, f"the {p.batch} batches of epoch {epoch}")
        return loss

    # ----------------------------------------------------------------- main loop
    def fit(self) -> dict:
        """Train to the end (resuming when a state exists) holding the run folder's lock; returns the metrics.

        A finished run whose declared outputs were deleted is restored from its kept final set instead.
        """
        with run_lock(self.out_dir):
            restored = self.open()
            if restored is not None:
                return restored
            p = self.progress
            with self.progress_file.attempt(p, stops=(Preempted,)), StopFlag() as stop:
                while p.epoch < self.hp["epochs"]:
                    epoch = self.begin_epoch()
                    self._train_epoch(epoch, stop)
                    self.close_epoch(epoch, stop)
                return self.finish()

    def open(self) -> dict | None:
        """Under the run's lock, before its first update: the finished run's metrics (:meth:`_restore_finished`), or
        None after resuming from the saved state (if any) and the preflight."""
        self._remove_stale_temporaries()
        restored = self._restore_finished()
        if restored is not None:
            return restored
        self.resumed = self._maybe_resume()
        preflight(self.model, self.hp, self.train_data, self.val_data, self.test_data, self.log)  # before any epoch
        self._last_save = time.monotonic()
        hp = self.hp
        self.log.info(
            "training %s/%s schedule=%s seed=%d on %s: %d parameters, %d rows of %d columns, epochs %d",
            self.dataset, self.variant, hp["schedule"], hp["seed"], self.device,
            presets.parameter_count(hp, self.corpus.vocab_size), self.train_data.size(0), hp["batch_size"],
            hp["epochs"],
        )  # fmt: skip
        return None

    def begin_epoch(self) -> int:
        self._epoch_started = time.monotonic()
        return self.progress.epoch + 1

    def close_epoch(self, epoch: int, stop: StopFlag, losses: tuple[float, float] | None = None) -> None:
        """Validation, best checkpoint, switch rule (:meth:`_end_epoch`); the resume state when due or signalled.

        A fused group passes the ``losses`` it found for the run: its :meth:`epoch_train_loss`, and its validation loss
        on :meth:`validation_weights` (:func:`.fused_evaluation.evaluate_group`)."""
        self._end_epoch(epoch, losses)
        if stop.signum is not None or self._checkpoint_due():
            self._save_state()
        if stop.signum is not None:
            raise Preempted(f"signal {stop.signum} after epoch {epoch}")

    def _remove_stale_temporaries(self) -> None:
        """The temporaries of the resume state and the progress file that a killed write left in ``.resume/`` (the
        caller holds the run's lock: no other process writes them)."""
        for name in (self.state_path.name, PROGRESS_NAME):
            for stale in self.resume_dir.glob(f".{name}.*.tmp"):
                stale.unlink(missing_ok=True)

    def _restore_finished(self) -> dict | None:
        """A finished run is never trained over: its metrics when the kept final set restored missing outputs, or
        when every output is there and equals it (see :mod:`.state`; e.g. Snakemake re-running a job whose
        finish it did not record); None when there is no finished run; :class:`RunFinished` for a finished run
        without a kept set."""
        present = [self.out_dir / name for name in PUBLISH_ORDER if (self.out_dir / name).exists()]
        kept = self.final_dir.is_dir()
        if not kept and (len(present) == len(PUBLISH_ORDER) or (self.out_dir / "metrics.json").exists()):
            raise RunFinished(
                f"{self.out_dir} already holds a finished run (metrics.json); use another --out, or delete the "
                "whole folder to train it again"
            )
        if not kept and present:
            raise RunFinished(
                f"{present[0]}: there without a finished run (no metrics.json, no {FINAL_DIR} in {self.resume_dir}), "
                "and never overwritten; delete it (or use another --out) to train this run"
            )
        if not kept:
            return None
        vocab = self.corpus.dictionary.sha256()
        accepted = (self.fingerprint, self.legacy_fingerprint)
        metrics = verify_final(self.final_dir, fingerprint=accepted, dataset=self.dataset,
                               variant=self.variant, hp=self.hp, vocab_sha256=vocab)  # fmt: skip
        made = publish_final(self.final_dir, self.out_dir)
        self.state_path.unlink(missing_ok=True)  # left by a finish killed before it removed it
        self.progress_file.remove()
        (self.out_dir / LOCK_NAME).unlink(missing_ok=True)
        if made:
            self.log.info("restored the finished run from %s (%s), nothing retrained", self.final_dir, ", ".join(made))
        else:
            self.log.info(
                "%s already holds this finished run (equal to %s): nothing to do", self.out_dir, self.final_dir
            )
        return metrics

    def validation_weights(self) -> AveragedWeights:
        """While entered, the model holds the weights validation sees (in the ASGD phase the averages)."""
        return AveragedWeights(self.model, self.optimizer, self.progress.phase == "asgd")

    def _end_epoch(self, epoch: int, losses: tuple[float, float] | None = None) -> None:
        hp, p = self.hp, self.progress
        # the training loss first: a non-finite one is located exactly
        train_loss, val_loss = losses or (self.epoch_train_loss(epoch), None)
        with self.validation_weights():
            if val_loss is None:
                val_loss = evaluate(self.model, self.val_data, hp["bptt"])
            is_best = val_loss < p.best_val_loss
            if is_best:
                p.best_val_loss, p.best_epoch = val_loss, epoch
                self.best_weights = {k: v.detach().cpu().clone() for k, v in self.model.state_dict().items()}
        self._check_bound(val_loss, f"the validation set after epoch {epoch}")
        p.curve.append(
            {
                "epoch": epoch,
                "phase": p.phase,
                "train_ppl": perplexity(train_loss),
                "valid_loss": val_loss,
                "valid_ppl": perplexity(val_loss),
                "seconds": p.epoch_seconds,
                "is_best": is_best,
            }
        )
        self._epoch_walls.append(time.monotonic() - self._epoch_started)
        self.progress_file.epoch_done(epoch, self._epoch_walls[-1])
        self.log.info(
            "end of epoch %3d | %5d batches | %7.2fs | train ppl %8.2f | valid loss %6.3f | valid ppl %8.2f | %s%s"
            " | %s",
            epoch, p.batch, p.epoch_seconds, perplexity(train_loss), val_loss, perplexity(val_loss), p.phase.upper(),
            " | saved best" + (" (averaged)" if p.phase == "asgd" else "") if is_best else "",
            time_left_text(epoch, hp["epochs"], self._epoch_walls),
        )  # fmt: skip
        if p.phase == "sgd":
            switch = asgd_trigger(epoch, val_loss, p.val_history, hp["switch_epoch"], hp["nonmono"])
            p.val_history.append(val_loss)
            if switch:
                reason = "Epoch triggered" if hp["switch_epoch"] != -1 else "Non monotonically triggered"
                self.log.info("%s! Switching to ASGD after epoch %d", reason, epoch)
                p.phase, p.switch_epoch = "asgd", epoch
                self.optimizer = make_optimizer(self.model, hp, "asgd")
        p.epoch, p.position, p.batch = epoch, 0, 0
        p.interval_loss, p.interval_means, p.epoch_seconds = 0.0, [], 0.0
        self.sums.reset()
        self.hidden = self._fresh_hidden()
        self.progress_file.write(p)

    def load_best(self) -> None:
        """The best epoch's weights into the model: what the test scores."""
        self.model.load_state_dict(self.best_weights)

    def finish(self, test_loss: float | None = None) -> dict:
        """Test the best weights (a fused group passes the ``test_loss`` it found for them), write the run's outputs and
        publish them (see the module docstring); the metrics."""
        hp, p = self.hp, self.progress
        self.load_best()
        if test_loss is None:
            test_loss = evaluate(self.model, self.test_data, hp["bptt"])
        best = next(row for row in p.curve if row["epoch"] == p.best_epoch)
        total = self.corpus
        metrics = {
            "dataset": self.dataset,
            "variant": self.variant,
            "schedule": hp["schedule"],
            "seed": hp["seed"],
            "hyperparameters": hp,
            "parameters": presets.parameter_count(hp, total.vocab_size),
            "trainable_parameters": sum(q.numel() for q in self.model.parameters() if q.requires_grad),
            "train_ppl": best["train_ppl"],
            "valid_ppl": perplexity(p.best_val_loss),
            "valid_loss": p.best_val_loss,
            "test_ppl": perplexity(test_loss),
            "test_loss": test_loss,
            "epochs_run": p.epoch,
            "best_epoch": p.best_epoch,
            "switch_epoch": p.switch_epoch,
            "seconds_per_epoch": float(np.mean([row["seconds"] for row in p.curve])),
            "tokens": {"train": len(total.train), "valid": len(total.valid), "test": len(total.test)},
            "device": str(self.device),
            "environment": environment(self.device, output_layer=self.hp["output_layer"], fused_runs=self.fused_runs),
        }
        metrics["versions"] = metrics["environment"]["versions"]
        metrics["run_fingerprint"] = self.fingerprint
        staging = self.resume_dir / f"{FINAL_DIR}.partial"  # left by a finish killed before its commit: not a run
        shutil.rmtree(staging, ignore_errors=True)
        try:
            metrics["model_sha256"] = save_model(self.model, staging / "model.pt", dataset=self.dataset,
                                                 variant=self.variant, hyperparameters=hp,
                                                 vocab=total.dictionary.idx2word)  # fmt: skip
            atomic_write_text(curve_csv(p.curve), staging / "curve.csv")
            metrics["curve_sha256"] = file_sha256(staging / "curve.csv")
            atomic_write_json(metrics, staging / "metrics.json")
            commit_final(staging, self.final_dir)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)  # nothing partial is left; the resume state is kept
            raise
        self.state_path.unlink(missing_ok=True)
        self.progress_file.remove()
        self._remove_stale_temporaries()
        fsync_dir(self.resume_dir)
        publish_final(self.final_dir, self.out_dir)
        (self.out_dir / LOCK_NAME).unlink(missing_ok=True)  # still held: a later writer sees the finished run
        self.log.info(
            "done: train ppl %.2f | valid ppl %.2f | test ppl %.2f | best epoch %d | switch epoch %s",
            metrics["train_ppl"], metrics["valid_ppl"], metrics["test_ppl"], p.best_epoch, p.switch_epoch,
        )  # fmt: skip
        return metrics


def train(
    *,
    dataset: str,
    variant: str,
    schedule: str,
    out_dir,
    seed: int | None = None,
    overrides: dict | None = None,
    data_dir=None,
    corpus_cache=None,
    device: str = "auto",
    corpus: Corpus | None = None,
    checkpoint_seconds: float = 600.0,
) -> dict:
    """Resolve the preset, load the corpus, train (resuming when possible) and write the outputs."""
    overrides = dict(overrides or {})
    if seed is not None:
        overrides["seed"] = int(seed)
    hp = presets.resolve(dataset, variant, schedule, overrides)
    device = resolve_device(device)
    check_model_fits(hp, presets.VOCAB_SIZES[dataset], device)  # before the run folder is made
    with run_lock(out_dir):  # a second writer fails before loading anything
        if corpus is None:
            corpus = load_corpus(data_dir, corpus_cache)
            expected = presets.VOCAB_SIZES[dataset]
            if corpus.vocab_size != expected:
                raise ValueError(
                    f"{data_dir}: {dataset} must have a vocabulary of {expected} words, "
                    f"this corpus has {corpus.vocab_size}"
                )
        corpus = corpus.limited(hp["train_tokens"], hp["valid_tokens"], hp["test_tokens"])
        trainer = Trainer(dataset=dataset, variant=variant, hp=hp, corpus=corpus, out_dir=out_dir, device=device,
                          checkpoint_seconds=checkpoint_seconds)  # fmt: skip
        return trainer.fit()
