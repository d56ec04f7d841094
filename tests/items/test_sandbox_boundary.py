"""The sandbox boundary on this machine's real kernel, each attack through the HTTP exec endpoint.

Needs root, bubblewrap and a writable cgroup hierarchy; CI sets WORKSPACE_REQUIRE_ISOLATION=1 so a
missing piece fails these tests instead of skipping them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from django.core.management import call_command

from quotas.models import SandboxActivity, WorkspaceDiskUsage
from tests.fixtures.items import exec_ok, item_url, sandbox_of
from workspace.items import lifecycle
from workspace.items.models import Item
from workspace.sandboxes import volumes
from workspace.sandboxes.filestore import workspace_bytes, workspace_dir
from workspace.sandboxes.registry import backend_named

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("real_boundary")]
MIB = 1024**2
HOG = "a = bytearray(400 * 1024 * 1024); a[::4096] = b'x' * len(a[::4096]); print('survived')"


def _put(api, item: Item, path: str, data: bytes):
    return api.put(item_url(item, f"/files/{path}"), data, content_type="application/octet-stream")


def _sandbox_pidns(item: Item) -> str:
    return sandbox_of(item)[1]["init"]["pidns"]


def _host_pids_in(pidns: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == pidns:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def _sleepers(pidns: str) -> list[int]:
    """The `sleep 300` processes of a sandbox (the background child may still be starting)."""
    found = []
    for pid in _host_pids_in(pidns):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\x00300\x00":
                found.append(pid)
        except OSError:
            continue
    return found


def _eventually(condition: Callable[[], bool], seconds: float = 5.0) -> bool:
    # Polls a kernel fact (process exit), not a clock: SIGKILL lands asynchronously.
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_another_persons_workspace_is_not_visible(api_client_for, make_item):
    # Given bob's item holding a secret, and carol's own item
    bob_item, carol_item = make_item(created_by="bob"), make_item(created_by="carol")
    assert _put(api_client_for("bob"), bob_item, "secret.txt", b"bob-secret").status_code == 200
    host_path = workspace_dir(bob_item.pk) / "secret.txt"
    # When carol's command looks for it by the relative and the host path
    body = exec_ok(
        api_client_for("carol"),
        carol_item,
        f"cat ../{bob_item.pk}/secret.txt {host_path}; ls /; find / -name secret.txt 2>/dev/null",
    )
    # Then nothing of bob's is there; the root holds only system directories and the workspace
    assert "bob-secret" not in body["stdout"]
    assert set(body["stdout"].split()) <= {
        "bin",
        "dev",
        "etc",
        "lib",
        "lib64",
        "proc",
        "sbin",
        "tmp",
        "usr",
        "workspace",
    }


def test_the_project_database_and_secret_key_are_not_visible(settings, api_client_for, make_item):
    # Given a secret key file in the var directory and the code tree on the host
    key = Path(settings.WORKSPACE_VAR_DIR) / "secret_key"
    key.parent.mkdir(parents=True, exist_ok=True)
    key.write_text("server-secret-key")
    # When a sandbox command tries to read them
    body = exec_ok(
        api_client_for("carol"),
        make_item(created_by="carol"),
        f"cat {key}; ls {settings.BASE_DIR}; cat {settings.BASE_DIR / 'db.sqlite3'} | head -c 100",
    )
    # Then it finds neither
    assert "server-secret-key" not in body["stdout"]
    assert "manage.py" not in body["stdout"]
    assert "No such file or directory" in body["stderr"]


def test_the_servers_environment_is_not_visible(monkeypatch, api_client_for, make_item):
    # Given a secret in the server's environment
    monkeypatch.setenv("DJANGO_SECRET_KEY", "env-secret-value")
    # When sandbox code reads every environ it can reach
    body = exec_ok(
        api_client_for("carol"), make_item(created_by="carol"), f"env; cat /proc/*/environ /proc/{os.getpid()}/environ"
    )
    # Then the secret is nowhere, and the server's pid does not exist in the sandbox
    assert "env-secret-value" not in body["stdout"]
    assert "DJANGO" not in body["stdout"]


def test_the_server_and_other_sandboxes_cannot_be_signalled(api_client_for, make_item):
    # Given bob's sandbox running a background process
    bob_api, bob_item = api_client_for("bob"), make_item(created_by="bob")
    exec_ok(bob_api, bob_item, "sleep 300 >/dev/null 2>&1 &")
    pidns = _sandbox_pidns(bob_item)
    assert _eventually(lambda: len(_sleepers(pidns)) == 1)
    (victim,) = _sleepers(pidns)
    # When carol's command tries to kill it and the server by their host pids
    body = exec_ok(api_client_for("carol"), make_item(created_by="carol"), f"kill -9 {victim} {os.getpid()}; echo $?")
    # Then the kill fails and both still run
    assert body["stdout"].strip() != "0"
    assert Path(f"/proc/{victim}").exists()
    assert Path(f"/proc/{os.getpid()}").exists()


def test_no_connection_to_loopback_succeeds(api_client_for, make_item):
    # Given a server listening on the host's loopback
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    probe = (
        "import socket\n"
        f"for port in ({port}, 5432, 8000):\n"
        "    s = socket.socket(); s.settimeout(2)\n"
        "    print(s.connect_ex(('127.0.0.1', port)))\n"
    )
    try:
        # When sandbox code connects to it, to PostgreSQL and to the service
        body = exec_ok(api_client_for("carol"), make_item(created_by="carol"), ["python3", "-c", probe])
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    # Then every connection is refused inside the sandbox's own network namespace
    assert body["exit_code"] == 0
    assert all(code != "0" for code in body["stdout"].split())


def test_writes_outside_the_workspace_fail(api_client_for, make_item):
    # Given a sandbox
    item = make_item(created_by="carol")
    # When its command writes into system directories, the root and /tmp
    body = exec_ok(
        api_client_for("carol"),
        item,
        "for f in /etc/x /usr/x /x /workspace/../y; do touch $f 2>/dev/null && echo wrote $f; done;"
        " echo tmp > /tmp/ok && cat /tmp/ok",
    )
    # Then only its private /tmp takes the write
    assert body["stdout"] == "tmp\n"
    assert not Path("/etc/x").exists()
    assert not Path("/usr/x").exists()


def test_dev_is_read_only_and_shared_memory_is_bounded(settings, api_client_for, make_item):
    # Given a sandbox whose private /tmp and /dev/shm hold 8M each
    settings.WORKSPACE_SANDBOX_TMP_BYTES = 8 * MIB
    # When its command writes into /dev, and 32M into /dev/shm and /tmp
    body = exec_ok(
        api_client_for("carol"),
        make_item(created_by="carol"),
        "touch /dev/planted 2>/dev/null && echo dev-writable; "
        "for d in /dev/shm /tmp; do head -c 33554432 /dev/zero > $d/big 2>/dev/null; du -m $d/big | cut -f1; done",
    )
    # Then /dev refuses and each tmpfs stops at its size
    assert "dev-writable" not in body["stdout"]
    sizes = [int(size) for size in body["stdout"].split()]
    assert len(sizes) == 2
    assert max(sizes) <= 8


def test_sandbox_code_runs_as_an_unprivileged_host_uid(api_client_for, make_item):
    # Given a sandbox
    item = make_item(created_by="carol")
    # When its command writes a file and reports its ids
    body = exec_ok(api_client_for("carol"), item, "id -u; touch mine; grep NoNewPrivs /proc/self/status")
    # Then the file's owner on the host is neither root nor the server's uid, and no_new_privs is on
    owner = (workspace_dir(item.pk) / "mine").stat().st_uid
    assert owner not in (0, os.geteuid())
    assert body["stdout"].split()[0] == str(owner)
    assert "NoNewPrivs:\t1" in body["stdout"]


def test_a_memory_hog_is_killed_even_after_trying_to_leave_its_cgroup(api_client_for, make_item):
    # Given a sandbox with a 64M memory limit
    item = make_item(created_by="carol")
    escape = (
        "for f in /sys/fs/cgroup/cgroup.procs /sys/fs/cgroup/memory/cgroup.procs; do echo $$ > $f; done 2>/dev/null"
    )
    # When its command tries to move itself to the root cgroup and then allocates 400M
    body = exec_ok(api_client_for("carol"), item, f'{escape}; python3 -c "{HOG}"')
    # Then the kernel kills it
    assert body["exit_code"] == 137
    assert "survived" not in body["stdout"]


def test_nothing_survives_close(api_client_for, make_item):
    # Given a sandbox that left a setsid process with a cleared environment
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(carol_api, item, "setsid env -i sh -c 'sleep 300' >/dev/null 2>&1 &")
    survivors = _host_pids_in(_sandbox_pidns(item))
    assert survivors
    # When its payer closes it from My resources
    assert carol_api.delete(f"/me/resources/live/{item.pk}").status_code == 204
    # Then every process it started is gone
    assert _eventually(lambda: not any(Path(f"/proc/{pid}").exists() for pid in survivors))


def test_a_command_cannot_grow_the_workspace_past_its_disk_limit(api_client_for, make_item):
    # Given an item whose app allows 1M of disk
    item = make_item(created_by="carol")
    # When a command writes eight 1M files and one 8M file
    exec_ok(
        api_client_for("carol"),
        item,
        "for i in 1 2 3 4 5 6 7 8; do head -c 1048576 /dev/zero > f$i; done; head -c 8388608 /dev/zero > big; true",
    )
    # Then the kernel stopped it at the limit
    assert workspace_bytes(workspace_dir(item.pk)) <= MIB


def test_python_and_the_shell_work_inside(api_client_for, make_item):
    # Given carol's notebook inside the real boundary
    # When she runs python3 there as an argument list
    body = exec_ok(api_client_for("carol"), make_item(created_by="carol"), ["python3", "-c", "print(sum(range(10)))"])
    # Then it prints its answer and exits 0
    assert (body["exit_code"], body["stdout"]) == (0, "45\n")


def test_file_api_writes_land_in_the_bounded_workspace_and_sandbox_code_may_change_them(api_client_for, make_item):
    # Given a file written through the file API into a folder it creates
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    assert _put(carol_api, item, "notes/a.txt", b"from the api").status_code == 200
    # When sandbox code reads it, appends to it and adds a file beside it
    body = exec_ok(carol_api, item, "cat notes/a.txt && echo ' and the sandbox' >> notes/a.txt && touch notes/b")
    # Then both sides see one workspace
    assert body["exit_code"] == 0, body["stderr"]
    assert body["stdout"] == "from the api"
    downloaded = carol_api.get(item_url(item, "/files/notes/a.txt"))
    assert b"".join(downloaded.streaming_content) == b"from the api and the sandbox\n"
    assert (workspace_dir(item.pk) / "notes" / "b").exists()


def test_the_file_api_answers_its_exact_507_before_the_kernel_would(api_client_for, make_item):
    # Given an item with 1M of disk
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    # When a 2M upload arrives
    response = _put(carol_api, item, "big.bin", b"x" * (2 * MIB))
    # Then the spec's 507 answers and nothing is stored
    assert response.status_code == 507
    assert response.json()["error"] == "workspace_quota_exceeded"
    assert not (workspace_dir(item.pk) / "big.bin").exists()


def test_a_write_into_a_workspace_a_command_filled_gets_the_507_not_a_server_error(api_client_for, make_item):
    # Given a command used up every inode of the workspace's image with empty files
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(carol_api, item, "for i in $(seq 1000); do : > f$i || break; done 2>/dev/null; true")
    before = sorted(p.name for p in workspace_dir(item.pk).iterdir())
    # When a small file that the byte count alone would admit is uploaded, and a folder made
    response = _put(carol_api, item, "small.txt", b"tiny")
    folder = carol_api.post(item_url(item, "/files:mkdir"), {"path": "sub"}, format="json")
    # Then the kernel's refusal comes back as the workspace's 507, and nothing is stored
    assert (response.status_code, folder.status_code) == (507, 507)
    assert response.json()["error"] == "workspace_quota_exceeded"
    assert sorted(p.name for p in workspace_dir(item.pk).iterdir()) == before


def _filled(carol_api, item: Item) -> int:
    """Fills the item's image as far as sandbox code can; returns the filler's length."""
    exec_ok(carol_api, item, "dd if=/dev/zero of=filler bs=1024 count=4096 2>/dev/null; true")
    return (workspace_dir(item.pk) / "filler").stat().st_size


def test_same_size_and_shrinking_overwrites_of_a_full_workspace_pass(api_client_for, make_item):
    # Given a command filled the workspace's image as far as it could
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    size = _filled(carol_api, item)
    assert size > MIB // 2
    # When the filler is overwritten with as many bytes, then with half as many
    same = _put(carol_api, item, "filler", b"s" * size)
    shrunk = _put(carol_api, item, "filler", b"h" * (size // 2))
    # Then both pass (spec "Errors" 2), each landing whole
    assert (same.status_code, shrunk.status_code) == (200, 200)
    assert (workspace_dir(item.pk) / "filler").read_bytes() == b"h" * (size // 2)


def test_a_same_size_batch_replace_in_a_full_workspace_passes(api_client_for, make_item):
    # Given a text file, then a command that filled the workspace's image as far as it could
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    assert _put(carol_api, item, "notes.txt", b"old text " * 1000).status_code == 200
    _filled(carol_api, item)
    # When "old" is replaced by "new" across the workspace
    operations = [{"op": "replace", "search": "old", "replace": "new", "glob": "*.txt"}]
    response = carol_api.post(item_url(item, "/files:batch"), {"operations": operations}, format="json")
    # Then it passes and the text changed
    assert response.status_code == 200, response.content
    assert (workspace_dir(item.pk) / "notes.txt").read_bytes() == b"new text " * 1000


def test_a_fifo_made_by_sandbox_code_never_blocks_the_file_api(client, api_client_for, make_item, fifo_guard):
    # Given sandbox code made FIFOs beside a text file, in the workspace and in a folder
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    body = exec_ok(carol_api, item, "mkfifo p1 && mkdir d && mkfifo d/p2 && echo old > d/a.txt")
    assert body["exit_code"] == 0, body["stderr"]
    root = workspace_dir(item.pk)
    # When carol downloads a FIFO, replaces text everywhere, copies the folder and writes a file
    with fifo_guard(root / "p1", root / "d" / "p2"):
        download = carol_api.get(item_url(item, "/files/p1"))
        replaced = carol_api.post(
            item_url(item, "/files:batch"),
            {"operations": [{"op": "replace", "search": "old", "replace": "new"}]},
            format="json",
        )
        copied = carol_api.post(
            item_url(item, "/files:batch"), {"operations": [{"op": "copy", "from": "d", "to": "e"}]}, format="json"
        )
        written = _put(carol_api, item, "after.txt", b"still writable")
        health = client.get("/healthz")
    # Then the download is a 400, everything else answers, and the FIFOs were never opened
    assert (download.status_code, download.json()["error"]) == (400, "not_a_regular_file")
    assert (replaced.status_code, copied.status_code, written.status_code) == (200, 200, 200)
    assert health.status_code != 500
    assert (root / "e" / "a.txt").read_text() == "new\n"
    assert not (root / "e" / "p2").exists()


def test_an_image_and_its_mounted_workspace_are_private_on_the_host(api_client_for, make_item):
    # Given a workspace on its image, with a file written through the file API
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    assert _put(carol_api, item, "a.txt", b"secret").status_code == 200
    root = workspace_dir(item.pk)
    image = root.parent / ".images" / f"{item.pk}.img"
    # When the modes are read / Then only the owner reaches the workspace, and only root the image
    assert volumes.is_bounded(root)
    assert (root.stat().st_mode & 0o777, (root / "a.txt").stat().st_mode & 0o777) == (0o700, 0o600)
    assert (image.parent.stat().st_mode & 0o777, image.stat().st_mode & 0o777) == (0o700, 0o600)
    # And sandbox code, running as the owner, still reads and changes it
    body = exec_ok(carol_api, item, "cat a.txt && echo more >> a.txt && mkdir sub && touch sub/b")
    assert (body["exit_code"], body["stdout"]) == (0, "secret")


def test_the_disk_ledger_counts_what_commands_wrote(per_user_disk, api_client_for, make_item):
    # Given carol has a per-user disk limit
    per_user_disk("carol", "10M")
    item = make_item(created_by="carol")
    # When a command writes 512K
    exec_ok(api_client_for("carol"), item, "head -c 524288 /dev/zero > half")
    # Then the disk ledger already holds it, without waiting for a sweep
    assert WorkspaceDiskUsage.objects.get(item_id=str(item.pk)).bytes >= 512 * 1024


def test_where_images_are_not_used_an_overrunning_sandbox_is_stopped(settings, api_client_for, make_item):
    # Given workspaces measured after each exec instead of bounded by images
    settings.WORKSPACE_DISK_ENFORCEMENT = "measure"
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    # When a command writes 2M into a workspace whose app allows 1M
    body = exec_ok(carol_api, item, "head -c 2097152 /dev/zero > big")
    # Then the reply says so and the sandbox is closed, its ledger row forgotten
    assert "over its app's disk limit" in body["stderr"]
    assert SandboxActivity.current.filter(item_id=str(item.pk)).count() == 0
    assert SandboxActivity.objects.get(item_id=str(item.pk)).close_reason == "disk"


def test_an_exec_whose_sandbox_was_stopped_says_so_in_its_result(settings, api_client_for, make_item):
    # Given workspaces measured after each exec instead of bounded by images
    settings.WORKSPACE_DISK_ENFORCEMENT = "measure"
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    # When one command stays within the app's 1M and the next writes 2M
    within = exec_ok(carol_api, item, "true")
    past = exec_ok(carol_api, item, "head -c 2097152 /dev/zero > big")
    # Then only the second result says its sandbox was closed
    assert (within["sandbox_closed"], past["sandbox_closed"]) == (False, True)


# The start of a script run as an unprivileged server: a local backend of its own, one sandbox open.
UNPRIVILEGED_BACKEND = """
import json, os, sys
from pathlib import Path
import django
os.environ["DJANGO_SETTINGS_MODULE"] = "workspace.settings"
django.setup()
from quotas.values import SandboxSize
from workspace.sandboxes.boundary import configured_boundary
from workspace.sandboxes.isolation import PrlimitDriver
from workspace.sandboxes.local import LocalBackend
# Started as root only to load the code, which may live where uid 65534 cannot go (a clone under
# root's 0700 home); from here on it is an ordinary user that reads no file of the clone.
var = Path(sys.argv[1])
os.chdir(var)
os.setgroups([])
os.setgid(65534)
os.setuid(65534)
backend = LocalBackend(
    state_dir=var / "state", workspace_root=var / "ws", driver=PrlimitDriver(), boundary=configured_boundary()
)
opened = backend.open(workspace_id="3", spec=SandboxSize())
"""
UNPRIVILEGED_SERVER = (
    UNPRIVILEGED_BACKEND
    + """
probe = "import socket; s = socket.socket(); s.settimeout(2); print(s.connect_ex(('127.0.0.1', 5432)))"
result = backend.exec(opened.id, command=f"id -u; ls /; python3 -c \\"{probe}\\"", timeout=20)
backend.close(opened.id)
print(json.dumps({"privileged": configured_boundary().privileged, "stdout": result.stdout, "stderr": result.stderr}))
"""
)


def _as_unprivileged_server(traversable_tmp: Path, script: str) -> dict:
    """Runs `script` as the service would as an ordinary user (uid 65534) with a var directory
    of its own; returns the JSON it printed last."""
    var = Path(tempfile.mkdtemp(dir=traversable_tmp))
    os.chown(var, 65534, 65534)
    root = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "DJANGO_DEBUG": "1", "WORKSPACE_LOG_LEVEL": "ERROR"}
    done = subprocess.run(
        [sys.executable, "-c", script, str(var)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_unprivileged_server_still_confines_sandboxes_in_namespaces(traversable_tmp):
    # Given the service running as an ordinary user (uid 65534), with a var directory of its own
    # When it opens a sandbox and runs a command there
    report = _as_unprivileged_server(traversable_tmp, UNPRIVILEGED_SERVER)
    assert report["stdout"], report
    uid, *listing, connected = report["stdout"].split()
    # Then the sandbox keeps the server's uid (all it can do) but sees only its own filesystem and network
    assert report["privileged"] is False
    assert uid == "65534"
    assert "workspace" in listing
    assert "work" not in listing
    assert connected != "0"


UNPRIVILEGED_WORKSPACE = (
    UNPRIVILEGED_BACKEND
    + """
from workspace.sandboxes import filestore
root = var / "ws" / "3"
filestore.stage(root, "api/a.txt", [b"from the api"]).commit()
result = backend.exec(opened.id, command="cat api/a.txt && echo sandbox > s.txt && mkdir d && ls -d d", timeout=20)
backend.close(opened.id)
modes = {name: oct(path.stat().st_mode & 0o777) for name, path in
         {"ws": var / "ws", "workspace": root, "api": root / "api", "file": root / "api" / "a.txt"}.items()}
print(json.dumps({"stdout": result.stdout, "stderr": result.stderr, "modes": modes}))
"""
)


def test_an_unprivileged_servers_workspaces_are_private_and_its_sandboxes_still_use_them(traversable_tmp):
    # Given the service running as an ordinary user, writing a file into a workspace
    # When its sandbox reads that file and writes files and folders of its own
    report = _as_unprivileged_server(traversable_tmp, UNPRIVILEGED_WORKSPACE)
    # Then the sandbox could, and the workspace is the server's alone on the host
    assert report["stdout"] == "from the apid\n", report
    assert report["modes"] == {"ws": "0o711", "workspace": "0o700", "api": "0o700", "file": "0o600"}


def _capacity(directory: Path) -> int:
    """What sandbox code (not root) may fill: the filesystem less the share reserved for root."""
    stats = os.statvfs(directory)
    reserved = stats.f_bfree - stats.f_bavail
    return (stats.f_blocks - reserved) * stats.f_frsize


def _unmount(directory: Path) -> None:
    """As after a restart: the workspace and its image unmounted."""
    assert volumes.unmount_under(directory.parent) == 1


def test_a_raised_disk_limit_grows_the_image_and_keeps_its_files(tmp_path):
    # Given a workspace on a 1M image holding a file, not mounted now (as after a restart)
    directory = volumes.workspace_prepare(tmp_path / "w", limit_bytes=MIB, uid=None)
    (directory / "a.txt").write_text("kept")
    before = _capacity(directory)
    _unmount(directory)
    # When it is prepared under a 4M limit
    volumes.workspace_prepare(directory, limit_bytes=4 * MIB, uid=None)
    # Then the filesystem is bigger and the file is still there
    assert _capacity(directory) > before + 2 * MIB
    assert (directory / "a.txt").read_text() == "kept"


def test_a_lowered_disk_limit_shrinks_the_image_when_it_is_next_mounted(tmp_path):
    # Given a workspace on a 4M image holding little
    directory = volumes.workspace_prepare(tmp_path / "w", limit_bytes=4 * MIB, uid=None)
    (directory / "small.txt").write_text("small")
    _unmount(directory)
    # When it is mounted again under a 2M limit
    volumes.workspace_prepare(directory, limit_bytes=2 * MIB, uid=None)
    # Then the image is 2M and the file is still there
    assert _capacity(directory) <= 2 * MIB
    assert (directory / "small.txt").read_text() == "small"


def test_files_written_before_images_existed_move_into_the_image(tmp_path):
    # Given a plain workspace directory that already holds files
    directory = tmp_path / "w"
    (directory / "sub").mkdir(parents=True)
    (directory / "sub" / "a.txt").write_text("kept")
    # When images take over
    volumes.workspace_prepare(directory, limit_bytes=MIB, uid=None)
    # Then the files are on the image
    assert volumes.is_bounded(directory)
    assert (directory / "sub" / "a.txt").read_text() == "kept"


def test_files_too_big_for_the_image_leave_the_workspace_a_measured_directory(tmp_path):
    # Given a plain workspace holding 3M
    directory = tmp_path / "w"
    directory.mkdir()
    (directory / "big.bin").write_bytes(b"x" * 3 * MIB)
    # When images take over with a 1M limit
    volumes.workspace_prepare(directory, limit_bytes=MIB, uid=None)
    # Then nothing is lost: it stays a plain directory, measured after each exec
    assert not volumes.is_bounded(directory)
    assert (directory / "big.bin").stat().st_size == 3 * MIB


def test_a_raised_limit_on_a_mounted_image_is_never_lost(tmp_path):
    # Given a mounted 1M workspace whose limit is raised to 4M while it is in use
    directory = volumes.workspace_prepare(tmp_path / "w", limit_bytes=MIB, uid=None)
    volumes.workspace_prepare(directory, limit_bytes=4 * MIB, uid=None)
    # When it is next mounted (online growth may need a capability this host lacks)
    _unmount(directory)
    volumes.workspace_prepare(directory, limit_bytes=4 * MIB, uid=None)
    # Then it has the raised size
    assert _capacity(directory) > 3 * MIB


def test_a_raised_limit_waits_for_an_image_still_held_after_its_lazy_unmount(tmp_path):
    # Given a 1M workspace unmounted lazily while a file on it is still open (the kernel keeps the
    # image attached and may still write it back)
    directory = volumes.workspace_prepare(tmp_path / "w", limit_bytes=MIB, uid=None)
    held = open(directory / "held.txt", "w")  # noqa: SIM115 - closed by the timer below
    held.write("kept")
    _unmount(directory)
    release = threading.Timer(0.3, held.close)
    release.start()
    # When it is prepared again under a raised 4M limit
    try:
        volumes.workspace_prepare(directory, limit_bytes=4 * MIB, uid=None)
    finally:
        release.join()
    # Then it waited for the image to be let go, grew it, and kept the file
    assert _capacity(directory) > 3 * MIB
    assert (directory / "held.txt").read_text() == "kept"


def test_after_release_sandboxes_a_changed_limit_resizes_the_image(settings, api_client_for, make_item, write_config):
    # Given an item whose workspace image was made under a 1M limit, with a sandbox open
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(carol_api, item, "echo kept > note.txt")
    before = _capacity(workspace_dir(item.pk))
    # When the app's limit becomes 4M, and the operator releases sandboxes after the restart
    write_config(
        "[sandbox]\nlease = '90s'\n",
        apps={"notebook.toml": 'slug = "notebook"\nname = "Notebook"\n[resources]\nmemory = "64M"\ndisk = "4M"\n'},
    )
    call_command("release_sandboxes")
    body = exec_ok(carol_api, item, "cat note.txt")
    # Then the next use mounts it at the new size, files intact
    assert body["stdout"] == "kept\n"
    assert _capacity(workspace_dir(item.pk)) > before + 2 * MIB


def _kill_holder(item: Item) -> None:
    """Kills the process execs enter a sandbox through, as a `kill -9 2` from inside would, and
    waits until the kernel has (SIGKILL lands asynchronously)."""
    holder = sandbox_of(item)[1]["init"]["holder"]
    os.kill(holder, 9)

    def dead() -> bool:
        try:
            return Path(f"/proc/{holder}/stat").read_text().rpartition(")")[2].split()[0] in ("Z", "X")
        except OSError:
            return True

    assert _eventually(dead)


def test_killing_the_namespace_holder_from_inside_closes_the_sandbox_and_says_so(api_client_for, make_item):
    # Given carol's sandbox with a background process that keeps its init waiting
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(carol_api, item, "sleep 300 >/dev/null 2>&1 &")
    pidns = _sandbox_pidns(item)
    assert _eventually(lambda: len(_sleepers(pidns)) == 1)
    # When her command kills pid 2, the process every exec enters through, and sees it gone
    body = exec_ok(carol_api, item, "kill -9 2; while kill -0 2 2>/dev/null; do :; done; echo killed")
    # Then the reply says the sandbox was closed, nothing of it runs, and the ledger no longer counts it
    assert body["sandbox_closed"] is True
    assert "stopped working" in body["stderr"]
    assert _eventually(lambda: not _host_pids_in(pidns))
    assert SandboxActivity.objects.get(backend_sandbox_id=body["sandbox_id"]).close_reason == "gone"
    assert not SandboxActivity.current.filter(item_id=str(item.pk)).exists()


def test_after_the_holder_was_killed_the_next_command_runs_in_a_new_sandbox(api_client_for, make_item):
    # Given carol's sandbox whose holder died between two commands (killed from the host), a sleeper left inside
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    first = exec_ok(carol_api, item, "sleep 300 >/dev/null 2>&1 &")
    pidns = _sandbox_pidns(item)
    assert _eventually(lambda: len(_sleepers(pidns)) == 1)
    _kill_holder(item)
    # When she runs a command
    body = exec_ok(carol_api, item, "echo hello")
    # Then it runs in a new sandbox, the reply says why, and the old one's processes are gone
    assert body["stdout"] == "hello\n"
    assert body["sandbox_id"] != first["sandbox_id"]
    assert "had stopped working" in body["stderr"]
    assert _eventually(lambda: not _host_pids_in(pidns))


def test_a_probe_closes_a_sandbox_whose_holder_was_killed(api_client_for, make_item):
    # Given carol's sandbox whose holder died, a sleeper keeping its init alive
    carol_api, item = api_client_for("carol"), make_item(created_by="carol")
    exec_ok(carol_api, item, "sleep 300 >/dev/null 2>&1 &")
    pidns = _sandbox_pidns(item)
    assert _eventually(lambda: len(_sleepers(pidns)) == 1)
    _kill_holder(item)
    # When the worker probes the sandboxes
    closed = lifecycle.sandboxes_probe().closed
    # Then it is closed, not counted, and nothing of it runs
    assert closed == 1
    assert not SandboxActivity.current.filter(item_id=str(item.pk)).exists()
    assert _eventually(lambda: not _host_pids_in(pidns))


def test_an_app_without_a_size_runs_under_the_kernel_cap_and_is_charged_nothing(
    settings, write_config, api_client_for, make_item
):
    # Given rca, which declares no size, in a deployment without a default one, and a 64M memory cap
    write_config("[sandbox]\nlease = '90s'\n", apps={"rca.toml": 'slug = "rca"\nname = "Investigations"\n'})
    settings.WORKSPACE_SANDBOX_CAP_MEMORY = "64M"
    item = make_item(app_slug="rca", created_by="carol")
    # When its command allocates 600M
    hog = "a = bytearray(600 * 1024 * 1024); a[::4096] = b'x' * len(a[::4096]); print('survived')"
    body = exec_ok(api_client_for("carol"), item, ["python3", "-c", hog])
    # Then the kernel kills it at the cap, its cgroup holds the cap, and the ledger charges nothing
    assert body["exit_code"] == 137
    assert "survived" not in body["stdout"]
    backend = backend_named("local")
    (group, *_) = backend.state(body["sandbox_id"])["confinement"]["groups"]
    limit_file = Path(group) / ("memory.max" if (Path(group) / "memory.max").exists() else "memory.limit_in_bytes")
    assert limit_file.read_text().strip() == str(64 * MIB)
    row = SandboxActivity.objects.get(backend_sandbox_id=body["sandbox_id"])
    assert (row.memory_bytes, row.cpu_cores, row.charges_cost) == (None, None, False)
