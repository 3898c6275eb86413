"""``fl.train.MonitoredTrainingSession``: a training session that initializes or restores the
model, runs hooks around every step, and recovers when a task of the cluster dies.

As in TensorFlow 1.x::

    hooks = [fl.train.StopAtStepHook(last_step=1000)]
    with fl.train.MonitoredTrainingSession(master="grpc://localhost:2223", is_chief=True,
                                           checkpoint_dir="runs/a", hooks=hooks) as sess:
        while not sess.should_stop():
            sess.run(train_op, {x: batch})

Creating the session: the chief restores the variables from the latest checkpoint of
``checkpoint_dir`` or, without one, runs their initializers; another worker waits (bounded by
``max_wait_secs``) until the chief has initialized them. Recovery: a step that fails because a
task is unreachable (``UnavailableError``), was aborted, or failed after a task restarted and
lost its registered steps, closes the session and creates a new one (retrying with backoff,
bounded by ``recovery_timeout_secs``): the chief restores the latest checkpoint, so at most the
steps since that checkpoint are lost, and the step is run again. ``OutOfRangeError`` (an input
is exhausted) ends training cleanly: ``should_stop()`` turns true and the ``with`` block ends
without an error.
"""
from __future__ import annotations

import logging
import time
from typing import List, Optional, Sequence

import numpy as np

from dsl.context import get_default_graph
from dsl.queues import Coordinator
from dsl.saver import Saver, latest_checkpoint
from dsl.session import Session
from dsl.train.global_step import get_global_step
from dsl.train.hooks import (CheckpointSaverHook, SessionRunArgs, SessionRunContext,
                             SessionRunHook, SessionRunValues, StepCounterHook,
                             SummarySaverHook)
from dsl.summary import merge_all
from dsl.variables import global_variables, global_variables_initializer, local_variables, \
    local_variables_initializer, report_uninitialized_variables
from runtime.errors import AbortedError, FlowcError, OutOfRangeError, PeerUnavailableError
from runtime.transport import StepNotRegisteredError, UnavailableError

__all__ = ["MonitoredTrainingSession", "MonitoredSession", "Scaffold", "ChiefSessionCreator",
           "WorkerSessionCreator", "SessionNotReadyError"]

log = logging.getLogger("flowc.train")

PREEMPTION_ERRORS = (UnavailableError, PeerUnavailableError, AbortedError,
                     StepNotRegisteredError)


class SessionNotReadyError(FlowcError):
    """The model's variables are still uninitialized (a non-chief worker waited too long for
    the chief, or a checkpoint did not cover every variable); names them."""


class Scaffold:
    """What creating a session needs: the initializer (``init_op`` with ``init_feed_dict``,
    then ``init_fn(scaffold, session)``), a ready check, the local initializer run in every new
    session (``local_init_op``: the local variables'), the summary op and a saver (built by
    ``finalize`` when not given)."""

    def __init__(self, init_op=None, init_feed_dict=None, init_fn=None, ready_op=None,
                 ready_for_local_init_op=None, local_init_op=None, summary_op=None,
                 saver: Optional[Saver] = None, copy_from_scaffold=None):
        if copy_from_scaffold is not None:
            init_op = init_op or copy_from_scaffold.init_op
            init_feed_dict = init_feed_dict or copy_from_scaffold.init_feed_dict
            init_fn = init_fn or copy_from_scaffold.init_fn
            ready_op = ready_op or copy_from_scaffold.ready_op
            local_init_op = local_init_op or copy_from_scaffold.local_init_op
            summary_op = summary_op or copy_from_scaffold.summary_op
            saver = saver or copy_from_scaffold.saver
        self.init_op = init_op
        self.init_feed_dict = init_feed_dict
        self.init_fn = init_fn
        self.ready_op = ready_op
        self.ready_for_local_init_op = ready_for_local_init_op
        self.local_init_op = local_init_op
        self.summary_op = summary_op
        self.saver = saver
        self._ready_vars: List = []

    def finalize(self) -> "Scaffold":
        if self.ready_op is None:
            self._ready_vars = list(global_variables())
            self.ready_op = report_uninitialized_variables(self._ready_vars)
        if self.init_op is None:
            self.init_op = global_variables_initializer()
        if self.local_init_op is None and local_variables():
            self.local_init_op = local_variables_initializer()
        if self.summary_op is None:
            self.summary_op = merge_all()
        if self.saver is None and global_variables():
            self.saver = Saver(sharded=True)     # as TF's: each PS task saves its own shard
        return self

    def initialize(self, session) -> None:
        """Run the initializer and ``init_fn`` (a new model: nothing to restore)."""
        session.run(self.init_op, self.init_feed_dict)
        if self.init_fn is not None:
            self.init_fn(self, session)

    def initialize_local(self, session) -> None:
        if self.local_init_op is not None:
            session.run(self.local_init_op)

    def uninitialized(self, session) -> List[str]:
        """Names of the variables ``session`` still has to initialize."""
        flags = np.asarray(session.run(self.ready_op)).reshape(-1)
        if not self._ready_vars:
            return [str(i) for i in np.flatnonzero(flags)]
        return [v.op.name for v, f in zip(self._ready_vars, flags) if f]


def _new_session(master: str, config):
    return Session(master, config=config)


class ChiefSessionCreator:
    """Creates a session and gives it a model: restored from the latest checkpoint of
    ``checkpoint_dir`` when there is one, else initialized."""

    def __init__(self, scaffold: Scaffold, master: str = "", config=None,
                 checkpoint_dir: Optional[str] = None):
        self.scaffold = scaffold
        self.master = master
        self.config = config
        self.checkpoint_dir = checkpoint_dir

    def create_session(self):
        sess = _new_session(self.master, self.config)
        try:
            ckpt = latest_checkpoint(self.checkpoint_dir) if self.checkpoint_dir else None
            if ckpt is not None and self.scaffold.saver is not None:
                self.scaffold.saver.restore(sess, ckpt)
                log.info("restored the model from %s", ckpt)
            else:
                self.scaffold.initialize(sess)
            self.scaffold.initialize_local(sess)
            missing = self.scaffold.uninitialized(sess)
            if missing:
                raise SessionNotReadyError(f"variables still uninitialized after "
                                           f"{'restoring ' + ckpt if ckpt else 'initializing'}: "
                                           f"{', '.join(missing)}")
        except BaseException:
            sess.close()
            raise
        return sess


class WorkerSessionCreator:
    """Creates a session for a non-chief worker: waits, checking every ``recovery_wait_secs``
    and for at most ``max_wait_secs``, until the chief has initialized the model."""

    def __init__(self, scaffold: Scaffold, master: str = "", config=None,
                 max_wait_secs: float = 7200.0, recovery_wait_secs: float = 1.0):
        self.scaffold = scaffold
        self.master = master
        self.config = config
        self.max_wait_secs = max_wait_secs
        self.recovery_wait_secs = recovery_wait_secs

    def create_session(self):
        deadline = time.monotonic() + self.max_wait_secs
        while True:
            sess = _new_session(self.master, self.config)
            try:
                missing = self.scaffold.uninitialized(sess)
            except BaseException:
                sess.close()
                raise
            if not missing:
                try:
                    self.scaffold.initialize_local(sess)
                except BaseException:
                    sess.close()
                    raise
                return sess
            sess.close()
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionNotReadyError(f"the chief did not initialize the model within "
                                           f"{self.max_wait_secs} s; uninitialized: "
                                           f"{', '.join(missing)}")
            log.info("waiting for the chief to initialize %s", ", ".join(missing))
            time.sleep(min(self.recovery_wait_secs, left))


class MonitoredSession:
    """A session created by ``session_creator``, run through ``hooks``, and re-created when a
    task is lost. Threads registered with its ``coord`` are asked to stop and joined on close
    (for at most ``stop_grace_period_secs``). ``recovery_timeout_secs`` bounds each re-creation (retries back off from
    ``retry_initial_secs`` up to ``retry_max_secs``); ``max_consecutive_recoveries`` bounds
    recoveries with no successful step between them."""

    def __init__(self, session_creator, hooks: Sequence[SessionRunHook] = (),
                 stop_grace_period_secs: float = 120.0, recovery_timeout_secs: float = 300.0,
                 retry_initial_secs: float = 0.5, retry_max_secs: float = 8.0,
                 max_consecutive_recoveries: int = 10):
        self._creator = session_creator
        self._hooks = list(hooks)
        self.stop_grace_period_secs = stop_grace_period_secs
        self.recovery_timeout_secs = recovery_timeout_secs
        self._retry_initial = retry_initial_secs
        self._retry_max = retry_max_secs
        self._max_recoveries = max_consecutive_recoveries
        self.graph = get_default_graph()
        for h in self._hooks:
            h.begin()
        scaffold = getattr(session_creator, "scaffold", None)
        if scaffold is not None:
            scaffold.finalize()
        self.coord = Coordinator()
        self._sess = None
        self._stop = False
        self._closed = False
        self.sessions_created = 0            # 1 + the number of recoveries
        self.recoveries: List[str] = []      # why each recovery happened
        self._create()

    # --- creating and recovering --------------------------------------------------------
    def _create(self) -> None:
        deadline = time.monotonic() + self.recovery_timeout_secs
        delay = self._retry_initial
        while True:
            try:
                sess = self._creator.create_session()
                break
            except PREEMPTION_ERRORS as e:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise type(e)(f"{e} (gave up re-creating the session after "
                                  f"{self.recovery_timeout_secs} s)") from None
                log.warning("cannot create the session yet (%s); retrying in %.1f s", e, delay)
                time.sleep(min(delay, left))
                delay = min(delay * 2, self._retry_max)
        self._sess = sess
        self.sessions_created += 1
        for h in self._hooks:
            h.after_create_session(sess, self.coord)
        # As TensorFlow's session creator: the queue runners of the graph's QUEUE_RUNNERS
        # collection start with the session, under ``coord`` (stopped and joined on close).
        from dsl.train.input import start_queue_runners
        start_queue_runners(sess, coord=self.coord, daemon=True, start=True)

    def _drop_session(self) -> None:
        sess, self._sess = self._sess, None
        if sess is not None:
            try:
                sess.close()
            except Exception:                    # noqa: BLE001  (its tasks may be gone)
                pass

    def _is_preemption(self, err: BaseException, restarts_before: int) -> bool:
        if isinstance(err, PREEMPTION_ERRORS):
            return True
        # A task restarted during the step (the master re-registered with it): its state is
        # gone, so whatever the step then failed with, the session must be re-created.
        return isinstance(err, FlowcError) and self._task_restarts() > restarts_before

    def _task_restarts(self) -> int:
        master = getattr(self._sess, "master", None)
        return getattr(master, "reregistrations", 0)

    # --- the user's interface -----------------------------------------------------------
    @property
    def session(self):
        """The current underlying session (it changes when the session is re-created)."""
        return self._sess

    def should_stop(self) -> bool:
        return self._stop or self._closed or self.coord.should_stop()

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run ``fetches`` (and what the hooks ask for) in one step; recovers from a lost task
        by re-creating the session and running the step again."""
        if self._closed:
            raise RuntimeError("this MonitoredSession is closed")
        failures = 0
        while True:
            if self._sess is None:
                self._create()
            restarts = self._task_restarts()
            try:
                return self._hooked_run(fetches, feed_dict, options, run_metadata)
            except OutOfRangeError:
                self._stop = True
                raise
            except FlowcError as e:
                if not self._is_preemption(e, restarts):
                    raise
                failures += 1
                if failures > self._max_recoveries:
                    raise
                self.recoveries.append(f"{type(e).__name__}: {e}")
                log.warning("a task was lost (%s: %s); re-creating the session",
                            type(e).__name__, e)
                self._drop_session()

    def _hooked_run(self, fetches, feed_dict, options, run_metadata):
        ctx = SessionRunContext(SessionRunArgs(fetches, feed_dict, options), self._sess)
        feeds = dict(feed_dict or {})
        extra = {}
        for i, h in enumerate(self._hooks):
            req = h.before_run(ctx)
            if req is None:
                continue
            if req.feed_dict:
                clash = [k for k in req.feed_dict if k in feeds]
                if clash:
                    raise RuntimeError(f"a hook feeds {clash}, which is already fed")
                feeds.update(req.feed_dict)
            extra[i] = req.fetches
        outputs = self._sess.run({"caller": fetches, "hooks": extra}, feeds or None,
                                 options=options, run_metadata=run_metadata)
        for i, h in enumerate(self._hooks):
            h.after_run(ctx, SessionRunValues(outputs["hooks"].get(i), options, run_metadata))
        if ctx.stop_requested:
            self._stop = True
        return outputs["caller"]

    def close(self) -> None:
        self._close(run_end_hooks=True)

    def _close(self, run_end_hooks: bool) -> None:
        if self._closed:
            return
        try:
            if run_end_hooks and self._sess is not None:
                for h in self._hooks:
                    h.end(self._sess)
        finally:
            self._closed = True
            self.coord.request_stop()
            self._drop_session()
        if run_end_hooks:             # e.g. queue runners the caller started with ``coord``
            self.coord.join(stop_grace_period_secs=self.stop_grace_period_secs)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        clean = exc_type is None or issubclass(exc_type, (OutOfRangeError, StopIteration))
        self._close(run_end_hooks=clean)
        return clean and exc_type is not None          # swallow OutOfRange: a clean end


def MonitoredTrainingSession(master: str = "", is_chief: bool = True,
                             checkpoint_dir: Optional[str] = None, scaffold: Optional[Scaffold] = None,
                             hooks: Optional[Sequence[SessionRunHook]] = None,
                             chief_only_hooks: Optional[Sequence[SessionRunHook]] = None,
                             save_checkpoint_steps: Optional[int] = None,
                             save_checkpoint_secs: Optional[float] = 600,
                             save_summaries_steps: Optional[int] = 100,
                             save_summaries_secs: Optional[float] = None,
                             log_step_count_steps: Optional[int] = 100,
                             stop_grace_period_secs: float = 120.0, config=None,
                             max_wait_secs: float = 7200.0,
                             recovery_timeout_secs: float = 300.0) -> MonitoredSession:
    """A ``MonitoredSession`` for training (``tf.train.MonitoredTrainingSession``).

    The chief (``is_chief``) restores from ``checkpoint_dir`` or initializes, runs
    ``chief_only_hooks`` as well as ``hooks`` and, with a ``checkpoint_dir``, saves a
    checkpoint every ``save_checkpoint_steps`` steps (else every ``save_checkpoint_secs``
    seconds; both None: no periodic saves), writes the merged summaries there every
    ``save_summaries_steps`` steps (or ``save_summaries_secs`` seconds) and counts steps
    per second every
    ``log_step_count_steps``. Other workers wait for the chief (at most ``max_wait_secs``).
    """
    scaffold = scaffold or Scaffold()
    all_hooks = list(hooks or [])
    if is_chief:
        creator = ChiefSessionCreator(scaffold, master, config, checkpoint_dir)
        all_hooks += list(chief_only_hooks or [])
        if checkpoint_dir and (save_checkpoint_steps or save_checkpoint_secs):
            all_hooks.append(CheckpointSaverHook(
                checkpoint_dir, save_steps=save_checkpoint_steps,
                save_secs=None if save_checkpoint_steps else save_checkpoint_secs,
                scaffold=scaffold))
        if checkpoint_dir and (save_summaries_steps or save_summaries_secs) and \
                get_global_step() is not None:
            all_hooks.append(SummarySaverHook(
                save_steps=save_summaries_steps or None,
                save_secs=None if save_summaries_steps else save_summaries_secs,
                output_dir=checkpoint_dir, scaffold=scaffold))
        if log_step_count_steps and get_global_step() is not None:
            all_hooks.append(StepCounterHook(every_n_steps=log_step_count_steps))
    else:
        creator = WorkerSessionCreator(scaffold, master, config, max_wait_secs)
    return MonitoredSession(creator, all_hooks, stop_grace_period_secs, recovery_timeout_secs)
