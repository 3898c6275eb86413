"""Session run hooks (``tf.train.SessionRunHook`` and the stock hooks of TensorFlow 1.x).

A hook watches a ``MonitoredSession`` (``dsl/train/monitored_session.py``): ``begin`` before
the graph is used (add ops here), ``after_create_session`` each time a session is created or
re-created after a lost task, ``before_run``/``after_run`` around every ``run`` (a hook may ask
for more fetches and feeds with ``SessionRunArgs``; they run in the same step as the caller's),
and ``end`` when the monitored session closes without an error.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any, Dict, NamedTuple, Optional

import numpy as np

from dsl.saver import Saver
from dsl.train.global_step import get_global_step
from runtime.errors import FlowcError

__all__ = ["SessionRunHook", "SessionRunArgs", "SessionRunContext", "SessionRunValues",
           "SecondOrStepTimer", "StopAtStepHook", "CheckpointSaverHook", "StepCounterHook",
           "LoggingTensorHook", "NanTensorHook", "NanLossDuringTrainingError", "SummarySaverHook"]

log = logging.getLogger("flowc.train")


class NanLossDuringTrainingError(FlowcError):
    """``NanTensorHook`` saw a NaN loss (``fail_on_nan_loss=True``)."""


class SessionRunArgs(NamedTuple):
    """What a hook adds to a step: ``fetches`` (any fetch structure) and ``feed_dict``."""
    fetches: Any
    feed_dict: Optional[Dict] = None
    options: Any = None


class SessionRunValues(NamedTuple):
    """The values of a hook's ``SessionRunArgs.fetches`` after the step."""
    results: Any
    options: Any = None
    run_metadata: Any = None


class SessionRunContext:
    """The step being run: the caller's arguments, the session, and a way to stop training."""

    def __init__(self, original_args: SessionRunArgs, session):
        self.original_args = original_args
        self.session = session
        self._stop_requested = False

    def request_stop(self) -> None:
        self._stop_requested = True

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested


class SessionRunHook:
    """Base class: every method does nothing."""

    def begin(self) -> None:
        """Called once, before the session is created; the graph may still change."""

    def after_create_session(self, session, coord) -> None:
        """Called when a session has been created (and after each re-creation on recovery),
        with its variables initialized or restored."""

    def before_run(self, run_context: SessionRunContext) -> Optional[SessionRunArgs]:
        """Called before each ``run``; may return more fetches and feeds for the same step."""
        return None

    def after_run(self, run_context: SessionRunContext, run_values: SessionRunValues) -> None:
        """Called after each successful ``run`` with the values this hook asked for."""

    def end(self, session) -> None:
        """Called when the monitored session closes without an error."""


class SecondOrStepTimer:
    """Triggers every ``every_secs`` seconds or every ``every_steps`` steps (exactly one)."""

    def __init__(self, every_secs: Optional[float] = None, every_steps: Optional[int] = None):
        if (every_secs is None) == (every_steps is None):
            raise ValueError("exactly one of every_secs and every_steps must be given")
        if every_steps is not None and every_steps < 1:
            raise ValueError(f"every_steps must be positive, got {every_steps}")
        self.every_secs = every_secs
        self.every_steps = every_steps
        self._last_step: Optional[int] = None
        self._last_time: Optional[float] = None

    def reset(self) -> None:
        self._last_step = self._last_time = None

    def should_trigger_for_step(self, step: int) -> bool:
        if self._last_step is None:
            return True
        if step == self._last_step:
            return False
        if self.every_steps is not None:
            return step >= self._last_step + self.every_steps
        return time.monotonic() >= self._last_time + self.every_secs

    def update_last_triggered_step(self, step: int):
        """Record a trigger at ``step``; returns (seconds, steps) since the previous one, or
        (None, None) for the first."""
        now = time.monotonic()
        elapsed = (None, None) if self._last_step is None else \
            (now - self._last_time, step - self._last_step)
        self._last_step, self._last_time = step, now
        return elapsed

    def last_triggered_step(self) -> Optional[int]:
        return self._last_step


def _require_global_step(hook: str):
    step = get_global_step()
    if step is None:
        raise RuntimeError(f"{hook} needs a global step (fl.train.get_or_create_global_step())")
    return step


class StopAtStepHook(SessionRunHook):
    """Requests a stop when the global step reaches ``last_step``, or ``num_steps`` steps after
    the global step the first session started from (exactly one of the two)."""

    def __init__(self, num_steps: Optional[int] = None, last_step: Optional[int] = None):
        if (num_steps is None) == (last_step is None):
            raise ValueError("exactly one of num_steps and last_step must be given")
        self._num_steps = num_steps
        self._last_step = last_step
        self._global_step = None

    def begin(self) -> None:
        self._global_step = _require_global_step("StopAtStepHook")

    def after_create_session(self, session, coord) -> None:
        if self._last_step is None:          # counted from where the first session started
            self._last_step = int(session.run(self._global_step)) + self._num_steps

    @property
    def last_step(self) -> Optional[int]:
        return self._last_step

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values) -> None:
        # The value read in the step may precede the step's own increment: confirm with a read.
        if int(run_values.results) + 1 >= self._last_step:
            if int(run_context.session.run(self._global_step)) >= self._last_step:
                run_context.request_stop()


class CheckpointSaverHook(SessionRunHook):
    """Saves a checkpoint every ``save_steps`` global steps or ``save_secs`` seconds (exactly
    one), right after a session is created, and at the end."""

    def __init__(self, checkpoint_dir: str, save_secs: Optional[float] = None,
                 save_steps: Optional[int] = None, saver: Optional[Saver] = None,
                 checkpoint_basename: str = "model.ckpt", scaffold=None):
        self._dir = os.fspath(checkpoint_dir)
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._saver = saver
        self._scaffold = scaffold
        self._prefix = os.path.join(self._dir, checkpoint_basename)
        self._global_step = None
        self.saved: list = []                # checkpoint paths written, oldest first

    def begin(self) -> None:
        self._global_step = _require_global_step("CheckpointSaverHook")
        if self._saver is None and self._scaffold is None:
            self._saver = Saver(sharded=True)

    def _get_saver(self) -> Saver:
        return self._saver if self._saver is not None else self._scaffold.saver

    def after_create_session(self, session, coord) -> None:
        self._timer.reset()
        self._save(session, int(session.run(self._global_step)))

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values) -> None:
        if self._timer.should_trigger_for_step(int(run_values.results) + 1):
            step = int(run_context.session.run(self._global_step))
            if self._timer.should_trigger_for_step(step):
                self._save(run_context.session, step)

    def end(self, session) -> None:
        step = int(session.run(self._global_step))
        if step != self._timer.last_triggered_step():
            self._save(session, step)

    def _save(self, session, step: int) -> None:
        self._timer.update_last_triggered_step(step)
        os.makedirs(self._dir, exist_ok=True)
        path = self._get_saver().save(session, self._prefix, global_step=step)
        self.saved.append(path)
        log.info("saved checkpoint %s", path)


class StepCounterHook(SessionRunHook):
    """Measures global steps per second every ``every_n_steps`` steps (or ``every_n_secs``)
    and logs it; the measured rates are kept in ``rates``."""

    def __init__(self, every_n_steps: Optional[int] = 100, every_n_secs: Optional[float] = None):
        if every_n_secs is not None:
            every_n_steps = None
        self._timer = SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_steps)
        self._global_step = None
        self.rates: list = []                # (global step, steps per second)

    def begin(self) -> None:
        self._global_step = _require_global_step("StepCounterHook")

    def before_run(self, run_context):
        return SessionRunArgs(self._global_step)

    def after_run(self, run_context, run_values) -> None:
        step = int(run_values.results)
        if self._timer.should_trigger_for_step(step):
            secs, steps = self._timer.update_last_triggered_step(step)
            if secs:
                rate = steps / secs
                self.rates.append((step, rate))
                log.info("global_step/sec: %g", rate)


class LoggingTensorHook(SessionRunHook):
    """Logs the values of ``tensors`` (a dict name -> tensor, or a list of tensors) every
    ``every_n_iter`` runs (or ``every_n_secs``); ``formatter`` turns the dict of values into
    the line logged."""

    def __init__(self, tensors, every_n_iter: Optional[int] = None,
                 every_n_secs: Optional[float] = None, formatter=None):
        if not isinstance(tensors, dict):
            tensors = {getattr(t, "name", str(t)): t for t in tensors}
        self._tensors = tensors
        self._timer = SecondOrStepTimer(every_secs=every_n_secs, every_steps=every_n_iter)
        self._formatter = formatter or (lambda values: ", ".join(
            f"{k} = {v}" for k, v in values.items()))
        self._iter = 0
        self._logging = False
        self.logged: list = []               # the lines logged

    def before_run(self, run_context):
        self._logging = self._timer.should_trigger_for_step(self._iter)
        return SessionRunArgs(self._tensors) if self._logging else None

    def after_run(self, run_context, run_values) -> None:
        if self._logging:
            self._timer.update_last_triggered_step(self._iter)
            line = self._formatter(run_values.results)
            self.logged.append(line)
            log.info("%s", line)
        self._iter += 1


class NanTensorHook(SessionRunHook):
    """Checks ``loss_tensor`` after every step: a NaN raises ``NanLossDuringTrainingError``
    (``fail_on_nan_loss``) or requests a stop."""

    def __init__(self, loss_tensor, fail_on_nan_loss: bool = True):
        self._loss = loss_tensor
        self._fail = fail_on_nan_loss

    def before_run(self, run_context):
        return SessionRunArgs(self._loss)

    def after_run(self, run_context, run_values) -> None:
        if np.isnan(np.asarray(run_values.results)).any():
            message = f"NaN loss during training ({getattr(self._loss, 'name', self._loss)})"
            if self._fail:
                raise NanLossDuringTrainingError(message)
            log.warning("%s; stopping", message)
            run_context.request_stop()



class SummarySaverHook(SessionRunHook):
    """Runs a summary op every ``save_steps`` global steps (or ``save_secs`` seconds) and
    writes what it gives to ``output_dir`` (``tf.train.SummarySaverHook``). The op is
    ``summary_op``, or the scaffold's, or ``fl.summary.merge_all()`` when the graph is final."""

    def __init__(self, save_steps: Optional[int] = None, save_secs: Optional[float] = None,
                 output_dir: Optional[str] = None, summary_writer=None, scaffold=None,
                 summary_op=None):
        if (save_steps is None) == (save_secs is None):
            raise ValueError("exactly one of save_steps and save_secs should be provided")
        if scaffold is not None and summary_op is not None:
            raise ValueError("You cannot provide both scaffold and summary_op.")
        self._timer = SecondOrStepTimer(every_secs=save_secs, every_steps=save_steps)
        self._dir, self._writer, self._op = output_dir, summary_writer, summary_op
        self._scaffold = scaffold
        self._global_step = None
        self._request = False
        self._next_step = None

    def begin(self) -> None:
        from dsl.summary import FileWriter, merge_all
        self._global_step = _require_global_step("SummarySaverHook")
        if self._op is None:
            self._op = getattr(self._scaffold, "summary_op", None) or merge_all()
        if self._writer is None and self._dir is not None:
            self._writer = FileWriter(self._dir)
        self._next_step = None

    def before_run(self, run_context):
        self._request = (self._op is not None and self._writer is not None and
                         (self._next_step is None or
                          self._timer.should_trigger_for_step(self._next_step)))
        fetches = {"global_step": self._global_step}
        if self._request:
            fetches["summary"] = self._op
        return SessionRunArgs(fetches)

    def after_run(self, run_context, run_values) -> None:
        step = int(run_values.results["global_step"])
        if self._request:
            self._timer.update_last_triggered_step(step)
            self._writer.add_summary(run_values.results["summary"], step)
        self._next_step = step + 1

    def end(self, session) -> None:
        if self._writer is not None:
            self._writer.flush()
            if self._dir is not None:
                self._writer.close()
