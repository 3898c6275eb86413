"""Hosts with their own addresses, on one machine: Linux network namespaces joined by a bridge.

``Hosts(n)`` makes ``n`` namespaces, each a "host" with one interface (``eth0``) and its own
address ``10.A.B.(k+1)/24``; a veth pair joins each host to a bridge that lives in a namespace
of its own (the switch), so every host reaches every other one. The test process (the
client, in the machine's own namespace) reaches them through one more veth into the switch,
with the address ``10.A.B.254``: the only thing the fixture adds to the machine's namespace,
and it goes with the switch. Nothing is routed further: traffic stays between these
namespaces.

Commands run in a host with ``ip netns exec`` (``popen``/``run``); ``link_down(k)`` cuts host
``k`` off (the switch's end of its veth goes down, so packets to and from it are dropped, as
on a pulled cable), ``link_up(k)`` puts it back; ``rx_tx_bytes(k)`` reads its interface's
traffic counters. ``close()`` kills every process left in the namespaces and deletes them
(deleting a namespace deletes its veth ends, and a veth pair goes with either end), also when
setting up failed half-way; it runs at exit as well, and a later ``Hosts`` removes what a
killed test process left behind (namespaces named after a process that no longer runs).

``netns_unavailable()`` says why namespaces cannot be made here (not root, no ``ip``, no
permission), or None; tests skip with that reason.
"""
import atexit
import os
import random
import signal
import subprocess
import time

PREFIX = "flt"                    # namespaces: flt<pid>x<n>-h<k>, flt<pid>x<n>-sw
_counter = [0]
_open = []


def _ip(*args, ns=None, check=True):
    cmd = (["ip", "netns", "exec", ns, "ip"] if ns else ["ip"]) + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip() or r.returncode}")
    return r


def netns_unavailable():
    """Why network namespaces cannot be made here, or None."""
    if os.name != "posix" or not os.path.exists("/proc/self/ns/net"):
        return "no Linux network namespaces on this system"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    name = f"{PREFIX}{os.getpid()}probe"
    try:
        r = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True,
                           timeout=30)
    except FileNotFoundError:
        return "the 'ip' command (iproute2) is not installed"
    except subprocess.TimeoutExpired:
        return "'ip netns add' did not finish"
    if r.returncode != 0:
        return f"'ip netns add' failed: {r.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)
    return None


def _namespaces():
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _remove_namespace(ns):
    """Kill the processes in ``ns`` and delete it (and with it its interfaces)."""
    r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=30)
    pids = [int(p) for p in r.stdout.split() if p.isdigit()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while pids and time.monotonic() < deadline:
        pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
        if pids:
            time.sleep(0.05)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def _remove_stale():
    """Namespaces of this fixture whose making process is gone (a killed test run)."""
    for ns in _namespaces():
        if not ns.startswith(PREFIX):
            continue
        pid = ns[len(PREFIX):].split("x", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            _remove_namespace(ns)


def _free_subnet():
    """``10.A.B`` of a /24 that no route of this machine's namespace covers."""
    routes = _ip("-4", "route", "show", "table", "all").stdout + _ip("-4", "addr").stdout
    for _ in range(100):
        a, b = random.randint(200, 254), random.randint(0, 254)
        if f"10.{a}.{b}." not in routes and f"10.{a}.0.0/16" not in routes:
            return f"10.{a}.{b}"
    raise RuntimeError("no free 10.x.y.0/24 subnet for the test hosts")


class Hosts:
    """``n`` network namespaces, each a host with its own address, joined by a bridge."""

    def __init__(self, n):
        if not 1 <= n <= 200:
            raise ValueError(f"1 to 200 hosts, not {n}")
        _remove_stale()
        _counter[0] += 1
        self.tag = f"{PREFIX}{os.getpid()}x{_counter[0]}"
        self.switch = f"{self.tag}-sw"
        self.names = [f"{self.tag}-h{k}" for k in range(n)]
        self.subnet = _free_subnet()
        self.client_address = f"{self.subnet}.254"
        self.client_link = f"fl{os.getpid() % 100000}x{_counter[0]}"[:15]
        self._made = []
        self.closed = False
        _open.append(self)
        try:
            self._make()
        except BaseException:
            self.close()
            raise

    def __len__(self):
        return len(self.names)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _port(self, k):
        return f"p{k}"             # the switch's end of host k's veth (in the switch namespace)

    def _make(self):
        _ip("netns", "add", self.switch)
        self._made.append(self.switch)
        _ip("link", "set", "lo", "up", ns=self.switch)
        _ip("link", "add", "br0", "type", "bridge", ns=self.switch)
        _ip("link", "set", "br0", "up", ns=self.switch)
        for k, ns in enumerate(self.names):
            _ip("netns", "add", ns)
            self._made.append(ns)
            _ip("link", "set", "lo", "up", ns=ns)
            # made inside the host, so that its name is free there; one end moves to the switch
            _ip("link", "add", "eth0", "type", "veth", "peer", "name", self._port(k), ns=ns)
            _ip("link", "set", self._port(k), "netns", self.switch, ns=ns)
            _ip("addr", "add", f"{self.address(k)}/24", "dev", "eth0", ns=ns)
            _ip("link", "set", "eth0", "up", ns=ns)
            _ip("link", "set", self._port(k), "master", "br0", ns=self.switch)
            _ip("link", "set", self._port(k), "up", ns=self.switch)
        # the client's way in: one veth from this namespace into the switch
        _ip("link", "add", self.client_link, "type", "veth", "peer", "name", "pc")
        try:
            _ip("link", "set", "pc", "netns", self.switch)
        except BaseException:
            _ip("link", "del", self.client_link, check=False)
            raise
        _ip("link", "set", "pc", "master", "br0", ns=self.switch)
        _ip("link", "set", "pc", "up", ns=self.switch)
        _ip("addr", "add", f"{self.client_address}/24", "dev", self.client_link)
        _ip("link", "set", self.client_link, "up")

    def address(self, k):
        """Host ``k``'s address (``10.A.B.(k+1)``)."""
        return f"{self.subnet}.{k + 1}"

    def wrap(self, k, cmd):
        """``cmd`` as run in host ``k``."""
        return ["ip", "netns", "exec", self.names[k]] + list(cmd)

    def popen(self, k, cmd, **kwargs):
        return subprocess.Popen(self.wrap(k, cmd), **kwargs)

    def run(self, k, cmd, **kwargs):
        return subprocess.run(self.wrap(k, cmd), **kwargs)

    def link_down(self, k):
        """Cut host ``k`` off: its port on the switch goes down (its own interface stays up,
        so the host does not notice; packets are just lost, as with a pulled cable)."""
        _ip("link", "set", self._port(k), "down", ns=self.switch)

    def link_up(self, k):
        _ip("link", "set", self._port(k), "up", ns=self.switch)

    def rx_tx_bytes(self, k):
        """(received, sent) bytes of host ``k``'s interface, from the kernel's counters."""
        out = []
        for what in ("rx_bytes", "tx_bytes"):
            r = self.run(k, ["cat", f"/sys/class/net/eth0/statistics/{what}"],
                         capture_output=True, text=True, timeout=30, check=True)
            out.append(int(r.stdout))
        return tuple(out)

    def close(self):
        """Kill what runs in the hosts and delete every namespace and link (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for ns in reversed(self._made):
            _remove_namespace(ns)
        # the client's veth goes with its peer in the switch; if the switch never got it
        _ip("link", "del", self.client_link, check=False)
        if self in _open:
            _open.remove(self)


@atexit.register
def _close_all():
    for hosts in list(_open):
        hosts.close()
