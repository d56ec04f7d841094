"""Warm sandbox skeletons: cgroups with a waiting process already inside, made ahead of opens.

Moving a process into a cgroup (writing `cgroup.procs`) makes the kernel wait for an RCU grace
period whenever no other move happened just before; on the machines measured that is 8-25 ms,
more than half of opening a sandbox. A warm skeleton pays it in the background: its cgroups are
made, its state directory, its agent's listening socket and bubblewrap's info pipe too, and a
small root process (the waiter) sits inside the cgroups reading its stdin. Opening a sandbox
takes one, writes the limits, then hands the waiter the sandbox's uid, the init's argv (the uid
and the workspace are only known then) and the agent's program; the waiter drops to the uid and
execs the init, already in place.

A skeleton is its server process's own (the waiter's stdin is a pipe only that process holds):
when the process ends the waiter reads EOF and exits, and the next process to fill a pool
removes skeletons whose owner is gone.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import struct
import subprocess
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from quotas.values import SandboxSize
from workspace.sandboxes.boundary import SANDBOX_PATH
from workspace.sandboxes.exec_agent import PERL, agent_listen, syscall_numbers
from workspace.sandboxes.isolation import Confinement, IsolationDriver
from workspace.sandboxes.runner import MARKER_VARIABLE

logger = logging.getLogger(__name__)

SKELETON_FILE = "warm.json"
# The waiter: reads a length-prefixed, NUL-separated list from stdin (unbuffered, so what follows
# stays for the agent): the uid, then the init's argv. It drops to the uid (no `setpriv` exec:
# about a millisecond of the open) by the syscall numbers it was started with, checks in
# /proc/self/status that no id, group or capability of root is left, and execs the argv. An empty
# uid means the argv drops itself (a machine whose numbers the server does not know). EOF first
# means its server process is gone: it then takes the skeleton away itself (out of its cgroups to
# their hierarchy's root, the groups and the state directory removed), since the directory that
# would let another process find it may be gone too.
_WAITER = r"""
my ($home, $numbers, @groups) = @ARGV;
sub gone {
    for my $group (@groups) {
        (my $root = $group) =~ s{/[^/]+/[^/]+$}{};
        if (open(my $procs, '>', "$root/cgroup.procs")) { print $procs $$; close $procs }
    }
    rmdir $_ for @groups;
    unlink "$home/warm.json", "$home/agent.sock";
    rmdir "$home/pids";
    rmdir $home;
    exit 0;
}
sub refuse { print "the sandbox could not drop to its uid: $_[0]\n"; exit 126 }
my ($h, $a) = ('', '');
while (length($h) < 4) { sysread(STDIN, $h, 4 - length($h), length($h)) or gone() }
my $n = unpack('N', $h);
while (length($a) < $n) { sysread(STDIN, $a, $n - length($a), length($a)) or gone() }
my ($uid, @argv) = split /\0/, $a, -1;
if (length $uid) {
    $uid =~ /^[1-9][0-9]*$/ && $numbers =~ /^\d+,\d+,\d+,\d+$/ or refuse('no uid or no syscall numbers');
    # Numbers, not strings: perl's syscall passes a string as a pointer.
    my ($setgroups, $setresgid, $setresuid, $capset) = map { $_ + 0 } split /,/, $numbers;
    my ($id, $none) = ($uid + 0, 0);  # variables: perl's syscall refuses read-only constants
    syscall($setgroups, $none, $none) == 0 or refuse("setgroups: $!");
    syscall($setresgid, $id, $id, $id) == 0 or refuse("setresgid: $!");
    syscall($setresuid, $id, $id, $id) == 0 or refuse("setresuid: $!");
    # The inheritable set too, as `setpriv --inh-caps=-all` (version 3 header, both halves empty).
    my ($header, $sets) = (pack('LL', 0x20080522, 0), pack('L6', (0) x 6));
    syscall($capset, $header, $sets) == 0 or refuse("capset: $!");
    open(my $status, '<', '/proc/self/status') or refuse("/proc/self/status: $!");
    my $said = do { local $/; <$status> };
    $said =~ /^Uid:\t$uid\t$uid\t$uid\t$uid$/m && $said =~ /^Gid:\t$uid\t$uid\t$uid\t$uid$/m
        && $said =~ /^Groups:[ \t]*$/m && $said !~ /^Cap(?:Inh|Prm|Eff|Amb):\t0*[1-9a-f]/m
        or refuse('an id, group or capability of root is left');
}
exec { $argv[0] } @argv;
exit 127;
"""


@dataclass
class Skeleton:
    """A warm sandbox's parts; `info_fd` and `listen_fd` are the waiter's descriptor numbers."""

    sandbox_id: str
    home: Path
    confinement: Confinement
    process: subprocess.Popen
    info_read: int
    info_fd: int
    listen_fd: int
    # The waiter knows this machine's syscall numbers: it drops to the sandbox's uid itself.
    drops_uid: bool

    def start(self, argv: list[str], *, uid: int | None, then: str) -> None:
        """Hands the waiter the uid to drop to (None: `argv` drops itself, or runs as this
        process), the init's argv, then `then` (the agent's program), and EOF."""
        if uid is not None and not self.drops_uid:
            raise ValueError("this skeleton's waiter cannot drop to a uid")
        body = "\0".join(["" if uid is None else str(uid), *argv]).encode()
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.write(struct.pack(">I", len(body)) + body + then.encode())
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        (self.home / SKELETON_FILE).unlink(missing_ok=True)

    def discard(self, driver: IsolationDriver) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()
        os.close(self.info_read)
        driver.destroy(self.confinement)
        shutil.rmtree(self.home, ignore_errors=True)


class WarmPool:
    """Up to `size` skeletons of this process; `take` returns one (or None) and refills in the
    background."""

    def __init__(self, *, size: int, state_dir: Path, driver: IsolationDriver) -> None:
        self.size = size
        self.state_dir = state_dir
        self.driver = driver
        self._ready: list[Skeleton] = []
        self._lock = threading.Lock()
        self._filling = False
        self._filler: threading.Thread | None = None
        self._swept = False

    @property
    def ready(self) -> tuple[Skeleton, ...]:
        """The skeletons waiting to be taken, now."""
        with self._lock:
            return tuple(self._ready)

    def take(self) -> Skeleton | None:
        if self.size <= 0:
            return None
        with self._lock:
            skeleton = self._ready.pop() if self._ready else None
            start = not self._filling
            self._filling = True
        if start:
            self._filler = threading.Thread(target=self.fill, name="sandbox-warm-pool", daemon=True)
            self._filler.start()
        if skeleton is not None and skeleton.process.poll() is not None:
            skeleton.discard(self.driver)  # its waiter died (killed by hand): open the usual way
            return None
        return skeleton

    def drain(self) -> int:
        """Discards every ready skeleton (tests, `release_sandboxes`); returns how many."""
        if self._filler is not None:
            self._filler.join(timeout=10)
        with self._lock:
            ready, self._ready = self._ready, []
        for skeleton in ready:
            skeleton.discard(self.driver)
        return len(ready)

    def sweep(self) -> int:
        """Removes the skeletons that ended server processes left (`release_sandboxes`)."""
        return sweep_orphans(self.state_dir, self.driver)

    def fill(self) -> None:
        """Makes skeletons until there are `size` (the background thread after a take runs this)."""
        try:
            if not self._swept:
                self._swept = True
                sweep_orphans(self.state_dir, self.driver)
            while True:
                with self._lock:
                    if len(self._ready) >= self.size:
                        return
                skeleton = make_skeleton(self.state_dir, self.driver)
                if skeleton is None:
                    return
                with self._lock:
                    self._ready.append(skeleton)
        except Exception:
            logger.exception("could not make a warm sandbox")
        finally:
            with self._lock:
                self._filling = False


def make_skeleton(state_dir: Path, driver: IsolationDriver) -> Skeleton | None:
    """A skeleton with its waiter joined to its cgroups; None where there are no kernel cgroups
    (nothing to gain: no process is moved)."""
    sandbox_id = f"loc-{uuid.uuid4().hex[:16]}"
    confinement = driver.create(sandbox_id, SandboxSize())
    if not confinement.kernel:
        driver.destroy(confinement)
        return None
    home = state_dir / sandbox_id
    (home / "pids").mkdir(parents=True)
    (home / SKELETON_FILE).write_text(json.dumps({"owner": _this_process(), "confinement": confinement.as_dict()}))
    info_read, info_write = os.pipe()
    listener = agent_listen(home)
    numbers = syscall_numbers("setgroups", "setresgid", "setresuid", "capset")
    try:
        process = subprocess.Popen(
            confinement.wrap([PERL, "-e", _WAITER, str(home), ",".join(map(str, numbers or [])), *confinement.groups]),
            cwd="/",
            env={"PATH": SANDBOX_PATH, MARKER_VARIABLE: sandbox_id},
            pass_fds=(info_write, listener.fileno()),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return Skeleton(
            sandbox_id, home, confinement, process, info_read, info_write, listener.fileno(), drops_uid=bool(numbers)
        )
    except OSError:
        os.close(info_read)
        driver.destroy(confinement)
        shutil.rmtree(home, ignore_errors=True)
        raise
    finally:
        os.close(info_write)
        listener.close()


def sweep_orphans(state_dir: Path, driver: IsolationDriver, alive: Callable[[str], bool] | None = None) -> int:
    """Removes the skeletons whose server process is gone (their waiters exited at its end)."""
    alive = alive or _process_alive
    removed = 0
    if not state_dir.is_dir():
        return 0
    for home in state_dir.iterdir():
        try:
            raw = json.loads((home / SKELETON_FILE).read_text())
        except (OSError, ValueError):
            continue
        if alive(str(raw.get("owner", ""))):
            continue
        with contextlib.suppress(KeyError, TypeError, ValueError):
            driver.destroy(Confinement.from_dict(raw["confinement"]))
        shutil.rmtree(home, ignore_errors=True)
        removed += 1
    return removed


def _this_process() -> str:
    return f"{os.getpid()}:{_started_at(os.getpid())}"


def _started_at(pid: int) -> str:
    """The process's start time in clock ticks since boot: with the pid, it names one process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return ""


def _process_alive(owner: str) -> bool:
    pid, _, started = owner.partition(":")
    return pid.isdigit() and bool(started) and _started_at(int(pid)) == started
