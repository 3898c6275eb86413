"""``fl.train.MonitoredTrainingSession`` and its hooks: on a local session (hooks, stopping,
checkpoints, restore, NaN, end of input), and on a cluster of real task processes whose PS task
is killed with SIGKILL mid-training and restarted (recovery from the latest checkpoint)."""
import os
import threading

import numpy as np
import pytest

import dsl as fl
from cluster_fixture import Cluster
from repo_paths import ROOT

FEED_X = np.arange(6, dtype=np.float32).reshape(2, 3) / 5


def _model(ps_device=None, worker_device=None):
    """A tiny regression model; the variables (and the global step) on ``ps_device``."""
    x = fl.placeholder(fl.float32, [None, 3], name="x")
    with fl.device(ps_device):
        w = fl.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), name="w")
        b = fl.Variable(np.full([4], 0.25, np.float32), name="b")
        gstep = fl.train.get_or_create_global_step()
    with fl.device(worker_device):
        loss = fl.reduce_sum(fl.square(fl.matmul(x, w) + b))
    train = fl.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=gstep)
    return x, w, b, gstep, loss, train


def _reference_values(steps):
    """w and b after ``steps`` plain steps of the same model in a local session."""
    with fl.Graph().as_default():
        x, w, b, gstep, loss, train = _model()
        with fl.Session() as sess:
            sess.run(fl.global_variables_initializer())
            for _ in range(steps):
                sess.run(train, {x: FEED_X})
            return sess.run([w, b])


class CountingHook(fl.train.SessionRunHook):
    """Records the calls it gets, asks for the loss and feeds nothing."""

    def __init__(self, loss):
        self.loss = loss
        self.calls = []
        self.losses = []

    def begin(self):
        self.calls.append("begin")

    def after_create_session(self, session, coord):
        self.calls.append("after_create_session")

    def before_run(self, run_context):
        self.calls.append("before_run")
        return fl.train.SessionRunArgs(self.loss)

    def after_run(self, run_context, run_values):
        self.calls.append("after_run")
        self.losses.append(float(run_values.results))

    def end(self, session):
        self.calls.append("end")


def test_stop_at_step_and_checkpoints_on_a_local_session(tmp_path, graph):
    x, w, b, gstep, loss, train = _model()
    counting = CountingHook(loss)
    hooks = [fl.train.StopAtStepHook(last_step=5), counting]
    ckpt_dir = str(tmp_path / "ckpt")
    steps = 0
    with fl.train.MonitoredTrainingSession(checkpoint_dir=ckpt_dir, hooks=hooks,
                                           save_checkpoint_steps=2) as sess:
        while not sess.should_stop():
            assert sess.run(train, {x: FEED_X}) is None
            steps += 1
        final = sess.run([w, b, gstep], {x: FEED_X})
    assert steps == 5 and final[2] == 5
    assert counting.calls[:2] == ["begin", "after_create_session"]
    assert counting.calls[-1] == "end" and counting.calls.count("after_run") == 6
    assert counting.losses[0] > counting.losses[4]               # it trains
    for got, want in zip(final[:2], _reference_values(5)):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert fl.train.latest_checkpoint(ckpt_dir).endswith("model.ckpt-5")
    state = fl.train.get_checkpoint_state(ckpt_dir)
    assert [p.rsplit("-", 1)[1] for p in state.all_model_checkpoint_paths] == ["0", "2", "4", "5"]
    np.testing.assert_array_equal(fl.train.load_variable(ckpt_dir, "w"), final[0])

    # A new chief restores the latest checkpoint and goes on from its global step.
    with fl.train.MonitoredTrainingSession(checkpoint_dir=ckpt_dir,
                                           hooks=[fl.train.StopAtStepHook(num_steps=3)],
                                           save_checkpoint_steps=100) as sess:
        assert sess.run(gstep) == 5
        np.testing.assert_array_equal(sess.run(w), final[0])
        while not sess.should_stop():
            sess.run(train, {x: FEED_X})
        assert sess.run(gstep) == 8
    for got, want in zip(fl.train.load_variable(ckpt_dir, "w"), _reference_values(8)[0]):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_chief_without_a_checkpoint_initializes_and_a_worker_waits_for_it(tmp_path, graph):
    x, w, b, gstep, loss, train = _model()
    with pytest.raises(fl.train.SessionNotReadyError, match="w, b, global_step"):
        fl.train.MonitoredTrainingSession(is_chief=False, max_wait_secs=0.3)
    with fl.train.MonitoredTrainingSession(checkpoint_dir=None) as sess:
        np.testing.assert_array_equal(sess.run(b), np.full([4], 0.25, np.float32))
        assert sess.run(gstep) == 0


def test_logging_step_counter_and_a_hook_that_stops_training(graph):
    x, w, b, gstep, loss, train = _model()
    logging_hook = fl.train.LoggingTensorHook({"loss": loss, "step": gstep}, every_n_iter=2)
    counter = fl.train.StepCounterHook(every_n_steps=2)

    class StopWhenLossBelow(fl.train.SessionRunHook):
        def before_run(self, run_context):
            return fl.train.SessionRunArgs({"loss": loss})

        def after_run(self, run_context, run_values):
            if run_values.results["loss"] < 3.0:
                run_context.request_stop()

    with fl.train.MonitoredTrainingSession(hooks=[logging_hook, counter, StopWhenLossBelow()],
                                           log_step_count_steps=None) as sess:
        losses = []
        while not sess.should_stop():
            losses.append(sess.run(loss, {x: FEED_X}) if len(losses) % 2 else
                          sess.run([train, loss], {x: FEED_X})[1])
            assert len(losses) < 200
    assert losses[-1] < 3.0 <= losses[0]
    assert len(logging_hook.logged) == (len(losses) + 1) // 2
    assert logging_hook.logged[0].startswith("loss = ")
    assert [s for s, _ in counter.rates] == sorted(s for s, _ in counter.rates)
    assert all(rate > 0 for _, rate in counter.rates)


def test_nan_tensor_hook_fails_or_stops(graph):
    x, w, b, gstep, loss, train = _model()
    bad = np.full([2, 3], np.nan, np.float32)
    with pytest.raises(fl.train.NanLossDuringTrainingError, match="NaN loss"):
        with fl.train.MonitoredTrainingSession(hooks=[fl.train.NanTensorHook(loss)]) as sess:
            sess.run(train, {x: FEED_X})
            sess.run(train, {x: bad})
    with fl.train.MonitoredTrainingSession(
            hooks=[fl.train.NanTensorHook(loss, fail_on_nan_loss=False)]) as sess:
        sess.run(train, {x: FEED_X})
        assert not sess.should_stop()
        sess.run(train, {x: bad})
        assert sess.should_stop()


def test_out_of_range_ends_training_cleanly_and_runs_the_end_hooks(tmp_path, graph):
    q = fl.FIFOQueue(10, [fl.float32], shapes=[[3]])
    w = fl.Variable(np.zeros([3], np.float32), name="w")
    gstep = fl.train.get_or_create_global_step()
    item = q.dequeue()
    train = fl.group(w.assign_add(item), gstep.assign_add(1))
    fill = q.enqueue_many([np.ones([4, 3], np.float32)])
    ckpt_dir = str(tmp_path / "ckpt")
    runs = 0
    with fl.train.MonitoredTrainingSession(checkpoint_dir=ckpt_dir,
                                           save_checkpoint_steps=100) as sess:
        sess.run(fill)
        sess.run(q.close())
        while not sess.should_stop():
            sess.run(train)
            runs += 1
            assert runs <= 4
    assert runs == 4 and sess.should_stop()
    np.testing.assert_array_equal(fl.train.load_variable(ckpt_dir, "w"), np.full([3], 4.0))
    assert fl.train.latest_checkpoint(ckpt_dir).endswith("model.ckpt-4")


def test_hook_arguments_are_checked(graph):
    with pytest.raises(ValueError, match="exactly one"):
        fl.train.StopAtStepHook()
    with pytest.raises(ValueError, match="exactly one"):
        fl.train.CheckpointSaverHook("d", save_secs=1, save_steps=1)
    with pytest.raises(RuntimeError, match="global step"):
        fl.train.MonitoredSession(fl.train.ChiefSessionCreator(fl.train.Scaffold()),
                                  hooks=[fl.train.StopAtStepHook(last_step=1)])


# --- recovery on a cluster of real task processes -----------------------------------------
@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, {"ps": 1, "worker": 1})
    yield c
    c.stop()


class KillPsOnceHook(fl.train.SessionRunHook):
    """After the step that takes the global step to ``at_step``, SIGKILLs the PS task and, as
    a launcher would, starts it again: in the background (the next steps find it gone), or
    before the next step (it finds a fresh task that lost its steps and variables)."""

    def __init__(self, cluster, at_step, restart_at_once):
        self.cluster = cluster
        self.at_step = at_step
        self.restart_at_once = restart_at_once
        self.restarter = None
        self.sessions = 0

    def after_create_session(self, session, coord):
        self.sessions += 1

    def after_run(self, run_context, run_values):
        if self.restarter is None and int(run_context.session.run(
                fl.train.get_global_step())) == self.at_step:
            self.cluster.kill("ps", 0)

            def restart():
                self.cluster.start("ps", 0, tf_config=True)
                self.cluster.wait_ready("ps", 0)
            self.restarter = threading.Thread(target=restart)
            self.restarter.start()
            if self.restart_at_once:
                self.restarter.join(60)


@pytest.mark.parametrize("restart_at_once", [False, True], ids=["ps_gone", "ps_restarted"])
def test_training_recovers_from_a_killed_ps_task_and_ends_at_the_requested_step(
        tmp_path, cluster, graph, restart_at_once):
    x, w, b, gstep, loss, train = _model("/job:ps/task:0", "/job:worker/task:0")
    killer = KillPsOnceHook(cluster, at_step=5, restart_at_once=restart_at_once)
    ckpt_dir = str(tmp_path / "ckpt")
    with fl.train.MonitoredTrainingSession(
            master=cluster.target(), checkpoint_dir=ckpt_dir, save_checkpoint_steps=3,
            hooks=[fl.train.StopAtStepHook(last_step=9), killer],
            recovery_timeout_secs=120) as sess:
        while not sess.should_stop():
            sess.run(train, {x: FEED_X})
        final = sess.run([w, b, gstep])
        recoveries = list(sess.recoveries)
    killer.restarter.join(60)
    assert killer.sessions == 2 and len(recoveries) == 1
    if restart_at_once:          # the fresh task lost the step, then the variables it reads
        assert "UnavailableError" not in recoveries[0]
    else:
        assert "UnavailableError" in recoveries[0] and "/job:ps/task:0" in recoveries[0]
    # Steps 4..5 were lost with the PS and redone from the checkpoint of step 3: the values
    # are those of 9 uninterrupted steps, and the last checkpoint holds them.
    assert final[2] == 9
    for got, want in zip(final[:2], _reference_values(9)):
        np.testing.assert_allclose(got, want, rtol=1e-5)
    assert fl.train.latest_checkpoint(ckpt_dir).endswith("model.ckpt-9")
    np.testing.assert_array_equal(fl.train.load_variable(ckpt_dir, "w"), final[0])


def test_a_receive_from_a_lost_task_is_a_preemption():
    """A worker whose receive cannot reach the ps reports FLOWC_UNAVAILABLE for the receive
    node; the master raises it as PeerUnavailableError, which the session recovers from (as
    from the transport's UnavailableError), not as a kernel's failure."""
    from dsl.train.monitored_session import PREEMPTION_ERRORS
    from runtime.errors import PeerUnavailableError, RuntimeExecutionError
    from runtime.module import _ERROR_CLASSES
    from runtime.transport import _error_classes

    assert _ERROR_CLASSES[10] is PeerUnavailableError            # flowc_rt.h's FLOWC_UNAVAILABLE
    assert _error_classes()["PeerUnavailableError"] is PeerUnavailableError   # over the wire
    assert issubclass(PeerUnavailableError, PREEMPTION_ERRORS)
    assert issubclass(PeerUnavailableError, RuntimeExecutionError)
    assert "FLOWC_UNAVAILABLE = 10" in open(
        os.path.join(ROOT,
                     "runtime", "csrc", "flowc_rt.h")).read()
