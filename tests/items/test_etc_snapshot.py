"""The /etc a sandbox sees: one snapshot of the chosen host entries, bound in one mount (etc_snapshot.py)."""

from __future__ import annotations

import os
import shutil
import stat
import time
from pathlib import Path

import pytest

from tests.fixtures.items import exec_ok
from workspace.sandboxes import etc_snapshot
from workspace.sandboxes.boundary import etc_snapshots_dir
from workspace.sandboxes.etc_snapshot import (
    ETC_ENTRIES,
    at_once,
    forget_snapshots,
    prune_snapshots,
    snapshot_of_etc,
)


@pytest.fixture
def host_etc(tmp_path) -> Path:
    """A host /etc with a few of the chosen entries, a secret beside them, and keys below ssl."""
    etc = tmp_path / "etc"
    (etc / "ssl" / "certs").mkdir(parents=True)
    (etc / "ssl" / "private").mkdir(mode=0o700)
    (etc / "ssl" / "private" / "server.key").write_text("KEY")
    (etc / "ssl" / "certs" / "ca.pem").write_text("CERT")
    (etc / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (etc / "shadow").write_text("root:SECRET\n")
    (etc / "shadow").chmod(0o600)
    (etc / "group").write_text("root:x:0:\n")
    (etc / "group").chmod(0o640)
    # A symlink among the entries that names the secret: it must stay a symlink, never its content.
    (etc / "localtime").symlink_to(etc / "shadow")
    forget_snapshots()
    yield etc
    forget_snapshots()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_snapshot_copies_the_chosen_entries_as_they_are_and_nothing_else(tmp_path, host_etc):
    # Given a host /etc with some of the chosen entries, a secret that is not one of them, and keys below ssl
    # When a snapshot is taken
    snapshot = snapshot_of_etc(tmp_path / "snapshots", source=host_etc, build=at_once)
    # Then it holds the chosen entries only, with their modes; the symlink is still a symlink
    # to the same path, ssl/private is not there, and the entries the host lacks are absent
    assert snapshot is not None
    assert sorted(path.relative_to(snapshot).as_posix() for path in snapshot.rglob("*")) == [
        "group",
        "localtime",
        "passwd",
        "ssl",
        "ssl/certs",
        "ssl/certs/ca.pem",
    ]
    assert (snapshot / "passwd").read_text() == "root:x:0:0::/root:/bin/sh\n"
    assert stat.S_IMODE((snapshot / "group").stat().st_mode) == 0o640
    assert os.readlink(snapshot / "localtime") == str(host_etc / "shadow")
    assert stat.S_IMODE(snapshot.stat().st_mode) == 0o755


def test_a_change_on_the_host_makes_a_new_snapshot_once_the_host_is_looked_at_again(tmp_path, host_etc):
    # Given a snapshot taken, and a clock
    clock, root = Clock(), tmp_path / "snapshots"
    first = snapshot_of_etc(root, source=host_etc, now=clock, build=at_once)
    # When the host's passwd changes, and then the check interval passes
    (host_etc / "passwd").write_text("root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\n")
    clock.now += etc_snapshot.CHECK_SECONDS - 1
    before_the_check = snapshot_of_etc(root, source=host_etc, now=clock, build=at_once)
    clock.now += 2
    after_the_check = snapshot_of_etc(root, source=host_etc, now=clock, build=at_once)
    # Then sandboxes keep the first until the host is looked at again, then get a new one; the
    # first stays for the sandboxes that bound it
    assert before_the_check == first
    assert after_the_check != first
    assert "alice" in (after_the_check / "passwd").read_text()
    assert "alice" not in (first / "passwd").read_text()


def test_pruning_keeps_only_the_snapshot_of_the_host_as_it_is(tmp_path, host_etc):
    # Given two snapshots: one of an earlier host /etc, one of the current
    clock, root = Clock(), tmp_path / "snapshots"
    earlier = snapshot_of_etc(root, source=host_etc, now=clock, build=at_once)
    (host_etc / "group").write_text("root:x:0:\nstaff:x:50:\n")
    clock.now += etc_snapshot.CHECK_SECONDS + 1
    current = snapshot_of_etc(root, source=host_etc, now=clock, build=at_once)
    # When no sandbox runs and the snapshots are pruned
    removed = prune_snapshots(root, source=host_etc)
    # Then only the current one is left
    assert removed == 1
    assert not earlier.exists()
    assert current.is_dir()


def test_a_copy_a_kill_cut_short_is_never_used_and_pruning_keeps_the_current_snapshot(tmp_path, host_etc):
    # Given the current snapshot, and, newer, what a build killed halfway (kill -9) left: a
    # partial copy under its building name, an hour old by now
    root = tmp_path / "snapshots"
    current = snapshot_of_etc(root, source=host_etc, build=at_once)
    partial = root / ".building-killed"
    (partial / "ssl").mkdir(parents=True)
    hour_ago = time.time() - 3600
    os.utime(partial, (hour_ago, hour_ago))
    young = root / ".building-still-copying"
    young.mkdir()
    # When a sandbox asks for /etc again, and then the snapshots are pruned
    forget_snapshots()
    asked = snapshot_of_etc(root, source=host_etc, build=at_once)
    removed = prune_snapshots(root, source=host_etc)
    # Then the sandbox got the complete one; pruning removed the old partial copy, left the one
    # another process may still be making, and kept the current snapshot
    assert asked == current
    assert removed == 1
    assert not partial.exists()
    assert young.is_dir()
    assert current.is_dir()


def test_a_snapshot_removed_under_a_process_that_knew_it_is_not_bound_again(tmp_path, host_etc):
    # Given a snapshot this process found a moment ago, then removed (by hand, or by another process)
    root = tmp_path / "snapshots"
    first = snapshot_of_etc(root, source=host_etc, build=at_once)
    shutil.rmtree(first)
    pending = []
    # When a sandbox starts within the minute
    again = snapshot_of_etc(root, source=host_etc, build=pending.append)
    # Then it binds entry by entry (not a directory that is gone) while a new snapshot is made
    assert again is None
    assert len(pending) == 1


def test_until_its_snapshot_is_made_a_sandbox_binds_each_entry(tmp_path, host_etc):
    # Given no snapshot yet, its making handed to a builder that has not run it
    pending = []
    root = tmp_path / "snapshots"
    # When a sandbox starts before it is made, and another once it is
    before = snapshot_of_etc(root, source=host_etc, build=pending.append)
    (make,) = pending
    make()
    after = snapshot_of_etc(root, source=host_etc, build=pending.append)
    # Then the first binds entry by entry (no snapshot), the second gets the snapshot, made once
    assert before is None
    assert after is not None
    assert (after / "passwd").is_file()
    assert len(pending) == 1


def test_a_snapshot_others_cannot_reach_is_not_used(tmp_path, host_etc):
    # Given a var directory others cannot pass through (bubblewrap, as the sandbox uid, could not bind it)
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    # When a snapshot is asked for under it
    snapshot = snapshot_of_etc(closed / "snapshots", source=host_etc, build=at_once)
    # Then there is none, and sandboxes bind each entry from the host as before
    assert snapshot is None


@pytest.mark.django_db
@pytest.mark.usefixtures("real_boundary")
@pytest.mark.parametrize("snapshot", [True, False], ids=["from a snapshot", "entry by entry"])
def test_a_sandbox_sees_the_chosen_etc_entries_and_nothing_else_of_the_hosts_etc(
    api_client_for, make_item, monkeypatch, snapshot
):
    # Given the host's /etc (bound from a snapshot, or entry by entry where none can be made), and carol's notebook
    forget_snapshots()
    if snapshot:
        assert snapshot_of_etc(etc_snapshots_dir(), build=at_once) is not None
    else:
        monkeypatch.setattr("workspace.sandboxes.boundary.snapshot_of_etc", lambda root: None)
    expected = sorted(name for name in ETC_ENTRIES if os.path.lexists(f"/etc/{name}"))
    api, item = api_client_for("carol"), make_item(created_by="carol")
    # When her command lists /etc, looks for the host's secrets, writes there, and uses the certificates
    body = exec_ok(
        api,
        item,
        "ls -A /etc; test -e /etc/shadow && echo shadow; test -e /etc/ssl/private && echo private; "
        "ls /etc/ssl/private >/dev/null 2>&1 && echo listed; touch /etc/x 2>/dev/null && echo wrote; "
        "grep -c ' /etc ' /proc/self/mounts; "
        "python3 -c 'import ssl; print(len(ssl.create_default_context().get_ca_certs()) >= 0)'",
    )
    # Then she sees exactly the chosen entries (from one mount, with a snapshot), read-only, and
    # nothing else of the host's /etc; the keys below ssl are not in a snapshot at all, and
    # bound entry by entry she cannot list them
    lines = body["stdout"].split("\n")
    assert lines[: len(expected)] == expected
    private = [] if snapshot or not os.path.isdir("/etc/ssl/private") else ["private"]
    assert lines[len(expected) :] == [*private, "1" if snapshot else "0", "True", ""]
