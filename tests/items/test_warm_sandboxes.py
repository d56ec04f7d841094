"""Warm sandbox skeletons (workspace/sandboxes/warm.py), on this machine's real kernel.

A skeleton's cgroups hold a waiting root process before any item asks for a sandbox; opening one
must still give the item its own uid, limits and workspace, and nothing of a skeleton may
outlive its server process or a release.
"""

from __future__ import annotations

import json
import os
import platform
import signal
from pathlib import Path

import pytest

from quotas.models import SandboxActivity
from tests.fixtures.items import exec_ok
from workspace.sandboxes import exec_agent
from workspace.sandboxes.boundary import configured_boundary
from workspace.sandboxes.registry import backend_named, local_sandboxes_release
from workspace.sandboxes.warm import SKELETON_FILE, Skeleton, make_skeleton, sweep_orphans

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("real_boundary")]
MIB = 1024**2


@pytest.fixture
def warm_backend(settings):
    """The local backend with one warm skeleton made (synchronously) and ready."""
    settings.WORKSPACE_SANDBOX_WARM = 1
    backend = backend_named("local")
    backend.warm.fill()
    assert len(backend.warm.ready) == 1
    return backend


@pytest.fixture
def orphan(settings, warm_backend) -> Skeleton:
    """A skeleton whose server process has ended: its waiter killed, its owner a process gone."""
    skeleton = make_skeleton(Path(settings.WORKSPACE_VAR_DIR) / "sandboxes", warm_backend.driver)
    assert skeleton is not None
    os.killpg(skeleton.process.pid, signal.SIGKILL)
    skeleton.process.wait()
    record = json.loads((skeleton.home / SKELETON_FILE).read_text())
    (skeleton.home / SKELETON_FILE).write_text(json.dumps({**record, "owner": "999999999:1"}))
    return skeleton


def _memory_limit(confinement_groups: list[str]) -> int:
    (memory,) = [Path(group) for group in confinement_groups if "/memory/" in group or group.endswith("memory")]
    return int((memory / "memory.limit_in_bytes").read_text())


def test_an_open_takes_the_warm_skeleton_and_gives_it_the_items_uid_and_limits(warm_backend, api_client_for, make_item):
    # Given a warm skeleton, made before any item asked for a sandbox
    (skeleton,) = warm_backend.warm.ready
    api, item = api_client_for("carol"), make_item(created_by="carol")
    # When carol's first command opens her sandbox
    body = exec_ok(api, item, "id -u; grep NoNewPrivs /proc/self/status; pwd; echo hi > note.txt")
    # Then it runs in the skeleton, as her item's uid with no_new_privs, in her workspace, under her app's memory limit
    assert body["sandbox_id"] == skeleton.sandbox_id
    assert body["stdout"].split("\n")[:3] == [
        str(configured_boundary().uid_for(str(item.pk))),
        "NoNewPrivs:\t1",
        "/workspace",
    ]
    state = warm_backend.state(skeleton.sandbox_id)
    if state["confinement"]["driver"] == "cgroup-v1":
        assert _memory_limit(state["confinement"]["groups"]) == 64 * MIB
    assert not (warm_backend.home(skeleton.sandbox_id) / SKELETON_FILE).exists()
    assert exec_ok(api, item, "cat note.txt")["stdout"] == "hi\n"


def _host_ids(pid: int) -> dict[str, list[str]]:
    """A process's ids and capabilities as the host sees them (/proc/<pid>/status)."""
    wanted = ("Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapAmb")
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {key: value.split() for key, _, value in (line.partition(":") for line in lines) if key in wanted}


def test_a_sandbox_opened_from_a_skeleton_holds_no_id_no_group_and_no_capability_of_root(
    warm_backend, api_client_for, make_item
):
    # Given a warm skeleton, whose waiter runs as root and drops to the uid itself (this machine's
    # syscall numbers are known)
    (skeleton,) = warm_backend.warm.ready
    assert skeleton.drops_uid == (platform.machine() in exec_agent._SYSCALLS)
    api, item = api_client_for("carol"), make_item(created_by="carol")
    # When carol's first command opens her sandbox from it
    exec_ok(api, item, "true")
    # Then the sandbox's first process and its agent have the item's uid as their real,
    # effective, saved and filesystem uid and gid, no other group, and no capability on the host
    uid = str(configured_boundary().uid_for(str(item.pk)))
    init = warm_backend.state(skeleton.sandbox_id)["init"]
    for pid in (init["pid"], init["holder"]):
        ids = _host_ids(pid)
        assert ids["Uid"] == ids["Gid"] == [uid] * 4
        assert set(ids["Groups"]) <= {uid}
        assert {ids[caps][0] for caps in ("CapInh", "CapPrm", "CapEff", "CapAmb")} == {"0000000000000000"}


def test_on_a_machine_whose_syscall_numbers_are_unknown_the_init_drops_through_setpriv(
    settings, monkeypatch, api_client_for, make_item
):
    # Given a warm skeleton made where the server knows no syscall numbers (its waiter cannot drop)
    monkeypatch.setattr("workspace.sandboxes.exec_agent._SYSCALLS", {})
    settings.WORKSPACE_SANDBOX_WARM = 1
    backend = backend_named("local")
    backend.warm.fill()
    (skeleton,) = backend.warm.ready
    assert not skeleton.drops_uid
    api, item = api_client_for("carol"), make_item(created_by="carol")
    # When carol's first command opens her sandbox from it
    body = exec_ok(api, item, "id -u")
    # Then it ran in the skeleton, and its processes hold the item's uid and nothing of root
    assert body["sandbox_id"] == skeleton.sandbox_id
    uid = str(configured_boundary().uid_for(str(item.pk)))
    assert body["stdout"] == f"{uid}\n"
    init = backend.state(skeleton.sandbox_id)["init"]
    for pid in (init["pid"], init["holder"]):
        ids = _host_ids(pid)
        assert ids["Uid"] == ids["Gid"] == [uid] * 4
        assert {ids[caps][0] for caps in ("CapInh", "CapPrm", "CapEff", "CapAmb")} == {"0000000000000000"}


# A syscall that succeeds and changes nothing, by machine: a wrong number in the server's table.
_SCHED_YIELD = {"x86_64": 24, "aarch64": 124, "riscv64": 124}


@pytest.mark.parametrize(
    ("wrong", "said"),
    [
        ({"setresuid": 99999}, "setresuid: Function not implemented"),
        ({"setresuid": _SCHED_YIELD.get(platform.machine(), 24)}, "an id, group or capability of root is left"),
    ],
    ids=["a number the kernel does not have", "a number of another syscall that succeeds"],
)
def test_a_waiter_that_could_not_drop_to_the_uid_starts_nothing_and_says_why(
    settings, monkeypatch, api_client_for, make_item, caplog, wrong, said
):
    # Given a warm skeleton whose table of syscall numbers is wrong for setresuid
    known = exec_agent._SYSCALLS.get(platform.machine())
    if known is None:
        pytest.fail(f"no syscall numbers for {platform.machine()}: this test needs them")
    monkeypatch.setitem(exec_agent._SYSCALLS, platform.machine(), {**known, **wrong})
    settings.WORKSPACE_SANDBOX_WARM = 1
    backend = backend_named("local")
    backend.warm.fill()
    (skeleton,) = backend.warm.ready
    api, item = api_client_for("carol"), make_item(created_by="carol")
    # When carol's first command would open her sandbox from it
    response = api.post(f"/a/notebook/items/{item.pk}/exec", {"command": ["id", "-u"]}, format="json")
    # Then nothing ran (503, no sandbox counted), the log says why, and the skeleton is gone
    assert response.status_code == 503
    assert response.json()["error"] == "sandbox_host_unavailable"
    assert SandboxActivity.current.filter(item_id=item.pk).count() == 0
    assert f"could not drop to its uid: {said}" in caplog.text
    assert skeleton.process.poll() is not None
    assert not any(Path(group).exists() for group in skeleton.confinement.groups)


def test_a_skeleton_whose_waiter_died_is_not_used(warm_backend, api_client_for, make_item):
    # Given a warm skeleton whose waiting process was killed
    (skeleton,) = warm_backend.warm.ready
    os.killpg(skeleton.process.pid, signal.SIGKILL)
    skeleton.process.wait()
    api, item = api_client_for("carol"), make_item(created_by="carol")
    # When carol's first command opens her sandbox
    body = exec_ok(api, item, "echo hi")
    # Then it opens the usual way, and the dead skeleton is gone
    assert (body["stdout"], body["exit_code"]) == ("hi\n", 0)
    assert body["sandbox_id"] != skeleton.sandbox_id
    assert not skeleton.home.exists()
    assert not any(Path(group).exists() for group in skeleton.confinement.groups)


def test_release_discards_warm_skeletons_and_their_cgroups(warm_backend):
    # Given a warm skeleton
    (skeleton,) = warm_backend.warm.ready
    # When the sandboxes are released (tests, `release_sandboxes`)
    local_sandboxes_release()
    # Then its waiter, its state directory and its cgroups are gone
    assert skeleton.process.poll() is not None
    assert not skeleton.home.exists()
    assert not any(Path(group).exists() for group in skeleton.confinement.groups)


def test_skeletons_of_a_server_process_that_ended_are_removed(settings, warm_backend, orphan):
    # Given two skeletons: one of this process, one whose server process has ended
    state_dir = Path(settings.WORKSPACE_VAR_DIR) / "sandboxes"
    (ours,) = warm_backend.warm.ready
    # When a pool sweeps the state directory
    removed = sweep_orphans(state_dir, warm_backend.driver)
    # Then the orphan's directory and cgroups are gone, and this process's skeleton is untouched
    assert removed == 1
    assert not orphan.home.exists()
    assert not any(Path(group).exists() for group in orphan.confinement.groups)
    assert ours.home.exists()
    assert ours.process.poll() is None


def test_release_removes_the_skeletons_a_server_process_that_ended_left(warm_backend, orphan):
    # Given a skeleton left by a server process that has ended (its waiter gone with it)
    # When the sandboxes are released (`manage.py release_sandboxes`)
    local_sandboxes_release()
    # Then its directory and cgroups are gone too
    assert not orphan.home.exists()
    assert not any(Path(group).exists() for group in orphan.confinement.groups)


def test_a_skeleton_takes_itself_away_when_its_server_process_ends(settings, warm_backend):
    # Given a skeleton whose server process ends (its waiter reads EOF on its stdin)
    skeleton = warm_backend.warm.take()
    # When the pipe only that process held closes
    skeleton.process.stdin.close()
    skeleton.process.wait(timeout=10)
    # Then the waiter has removed its cgroups and its state directory itself
    assert not any(Path(group).exists() for group in skeleton.confinement.groups)
    assert not skeleton.home.exists()
    os.close(skeleton.info_read)
