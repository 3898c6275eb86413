"""A local cluster for the distributed benchmarks: one ``python3 -m compiler.cli serve``
process per task of ``{"ps": P, "worker": W}`` on loopback ports, started together, each
waited for until it answers ``Status``, and killed together by ``stop()``."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from runtime.transport import TaskClient, UnavailableError  # noqa: E402

START_TIMEOUT_S = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalCluster:
    """Task processes for ``jobs`` (job name -> task count); logs go to ``folder``."""

    def __init__(self, jobs: Dict[str, int], folder: str, hosts=None, token=None):
        """With ``hosts`` (``tests/netns_fixture.Hosts``) the tasks run round the hosts, each
        listening on its host's address and requiring ``token``."""
        self.hosts, self.token = hosts, token
        if hosts is None:
            self.spec = {job: [f"localhost:{free_port()}" for _ in range(n)]
                         for job, n in jobs.items()}
        else:
            self.spec, self.place, ports = {}, {}, {}
            i = 0
            for job, n in jobs.items():
                self.spec[job] = []
                for k in range(n):
                    h = self.place[(job, k)] = i % len(hosts)
                    i += 1
                    ports[h] = ports.get(h, 2221) + 1
                    self.spec[job].append(f"{hosts.address(h)}:{ports[h]}")
        path = os.path.join(folder, "cluster.json")
        with open(path, "w") as f:
            json.dump(self.spec, f)
        self.procs = []
        for job, k in self.tasks():
            log = open(os.path.join(folder, f"{job}_{k}.log"), "w")
            cmd = [sys.executable, "-m", "compiler.cli", "serve", "--cluster", path, "--job", job,
                   "--task", str(k)]
            env = dict(os.environ)
            env.pop("FLOWC_TOKEN", None)
            if token:
                env["FLOWC_TOKEN"] = token
            if hosts is not None:
                cmd = hosts.wrap(self.place[(job, k)],
                                 cmd + ["--bind", self.spec[job][k].rsplit(":", 1)[0]])
            self.procs.append(subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log,
                                               stderr=subprocess.STDOUT))
            log.close()
        try:
            for job, k in self.tasks():
                self.status(job, k, wait_s=START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise

    def tasks(self) -> List[Tuple[str, int]]:
        return [(job, k) for job, addrs in self.spec.items() for k in range(len(addrs))]

    def target(self, worker: int = 0) -> str:
        return f"grpc://{self.spec['worker'][worker]}"

    def status(self, job: str, task: int, wait_s: float = 0.0) -> dict:
        """The task's ``Status`` reply, waiting up to ``wait_s`` for it to answer (a task
        process that has exited ends the wait at once)."""
        client = TaskClient(self.spec[job][task], f"/job:{job}/task:{task}", self.token)
        deadline = time.monotonic() + wait_s
        try:
            while True:
                try:
                    return client.call("Status", {}, timeout=5.0)[0]
                except UnavailableError:
                    if time.monotonic() > deadline or any(p.poll() is not None
                                                          for p in self.procs):
                        raise
                    time.sleep(0.2)
        finally:
            client.close()

    def step_bytes(self) -> int:
        """Bytes of the frames that steps moved so far, summed over the tasks' traffic
        counters: ``RunStep`` (the clients' feeds and fetches) and ``RecvTensor`` (tensors
        between tasks), requests and responses."""
        total = 0
        for job, k in self.tasks():
            traffic = self.status(job, k).get("traffic", {})
            for method in ("RunStep", "RecvTensor"):
                t = traffic.get(method, {})
                total += t.get("request_bytes", 0) + t.get("response_bytes", 0)
        return total

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
        for p in self.procs:
            p.wait(timeout=10)
