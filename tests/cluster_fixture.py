"""Local clusters of real task processes for tests: ``Cluster(tmp_path, {"ps": 1, "worker": 2})``
starts each task with ``python3 -m compiler.cli serve`` (ps tasks through ``TF_CONFIG``), waits
until each answers ``Status``, and ``stop()`` kills them all. Every wait is bounded.

With ``hosts`` (``netns_fixture.Hosts``) each task runs in a host of its own address instead of
on loopback (``place`` maps ``(job, task)`` to a host's index; default: the tasks in spec order
round the hosts), listening on that address (``--bind``); such a task needs a ``token``."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

from runtime.transport import TaskClient, UnavailableError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
START_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """Task processes of one cluster spec, started with ``python3 -m compiler.cli serve``."""

    def __init__(self, tmp_path, jobs, token=None, extra_args=(), envs=None, hosts=None,
                 place=None):
        self.hosts = hosts
        self.place = {}
        if hosts is None:
            self.spec = {job: [f"localhost:{free_port()}" for _ in range(n)]
                         for job, n in jobs.items()}
        else:
            tasks = [(job, k) for job, n in jobs.items() for k in range(n)]
            self.place = {t: (place or {}).get(t, i % len(hosts)) for i, t in enumerate(tasks)}
            ports = {}                    # each host has its own address: ports from 2222 on each
            self.spec = {job: [] for job in jobs}
            for job, k in tasks:
                host = self.place[(job, k)]
                ports[host] = ports.get(host, 2221) + 1
                self.spec[job].append(f"{hosts.address(host)}:{ports[host]}")
        self.path = str(tmp_path / "cluster.json")
        with open(self.path, "w") as f:
            json.dump(self.spec, f)
        self.token = token
        self.extra_args = list(extra_args)
        self.envs = dict(envs or {})          # (job, task) -> environment variables of its own
        self.tmp_path = tmp_path
        self.procs = {}
        for job, addrs in self.spec.items():
            for k in range(len(addrs)):
                self.start(job, k, tf_config=(job == "ps"))
        for job, addrs in self.spec.items():
            for k in range(len(addrs)):
                self.wait_ready(job, k)

    def address(self, job, task=0):
        return self.spec[job][task]

    def target(self, job="worker", task=0):
        return f"grpc://{self.address(job, task)}"

    def start(self, job, task, tf_config=False):
        env = dict(os.environ)
        env.pop("FLOWC_TOKEN", None)
        env.update(self.envs.get((job, task), {}))
        cmd = [sys.executable, "-m", "compiler.cli", "serve"]
        if tf_config:             # the TF_CONFIG convention instead of --cluster/--job/--task
            env["TF_CONFIG"] = json.dumps({"cluster": self.spec,
                                           "task": {"type": job, "index": task}})
        else:
            cmd += ["--cluster", self.path, "--job", job, "--task", str(task)]
        if self.token:
            cmd += ["--token", self.token]
        cmd += self.extra_args
        if self.hosts is not None:
            cmd += ["--bind", self.address(job, task).rsplit(":", 1)[0]]
            cmd = self.hosts.wrap(self.place[(job, task)], cmd)
        log = open(self.tmp_path / f"{job}_{task}.log", "w")
        self.procs[(job, task)] = subprocess.Popen(cmd, cwd=ROOT, env=env,
                                                   stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def client(self, job, task=0, token=None):
        return TaskClient(self.address(job, task), f"/job:{job}/task:{task}",
                          token if token is not None else self.token)

    def wait_ready(self, job, task):
        deadline = time.monotonic() + START_TIMEOUT_S
        c = self.client(job, task)
        try:
            while True:
                proc = self.procs[(job, task)]
                if proc.poll() is not None:
                    raise RuntimeError(f"task {job}:{task} exited: {self.log(job, task)}")
                try:
                    return c.call("Status", {}, timeout=2.0)[0]
                except UnavailableError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)
        finally:
            c.close()

    def log(self, job, task):
        with open(self.tmp_path / f"{job}_{task}.log") as f:
            return f.read()

    def kill(self, job, task=0):
        proc = self.procs[(job, task)]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
