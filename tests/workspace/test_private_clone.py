"""The two commands from a clone under a directory only its owner may enter (root's home is 0700,
so is a `mktemp -d` folder): the sandbox tests pass there, and the server started there runs
commands, its workspaces where sandbox uids can reach them.

The repository is copied into a fresh `mktemp -d` folder and run with this interpreter (no new
virtualenv): a nested pytest on SQLite, then `make run`'s steps (migrate, load the demo,
runserver). About 30 seconds; `pytest -m private_clone` runs only these.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.live import REPO, free_port
from workspace.sandboxes.reach import FALLBACK_PARENT, default_var_dir

pytestmark = pytest.mark.private_clone
# A deadline for polling a subprocess, never an assertion about speed.
DEADLINE_SECONDS = 60
# What a fresh clone does not have: build output, local state, the virtualenv.
_NOT_IN_A_CLONE = {".git", ".venv", "var", "db.sqlite3", "staticfiles", ".pytest_cache", ".ruff_cache", "results"}
# The tests that need sandbox uids (or uid 65534) to reach files, and the private var dir's own.
SUBSET = [
    "tests/items/test_sandbox_boundary.py::test_an_unprivileged_server_still_confines_sandboxes_in_namespaces",
    "tests/items/test_sandbox_boundary.py::test_python_and_the_shell_work_inside",
    "tests/items/test_exec.py::test_exec_opens_a_sandbox_and_runs_in_the_workspace",
    "tests/items/test_private_var_dir.py",
]


def _not_in_a_clone(directory: str, names: list[str]) -> set[str]:
    return {name for name in names if name in _NOT_IN_A_CLONE or name == "__pycache__" or name.startswith("db.sqlite3")}


def _clone_env(**extra: str) -> dict[str, str]:
    """A new user's shell: none of this run's database, settings or pytest state, on SQLite."""
    kept = ("WORKSPACE_REQUIRE_ISOLATION", "WORKSPACE_REQUIRE_BROWSER")
    env = {
        key: value
        for key, value in os.environ.items()
        if key in kept or not key.startswith(("DATABASE_URL", "DJANGO_", "WORKSPACE_", "PYTEST", "PYTHONPATH"))
    }
    env.update(PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


@pytest.fixture(scope="module")
def private_clone() -> Iterator[Path]:
    """The repository copied into a fresh `mktemp -d` folder (0700); its var directory removed after."""
    home = Path(tempfile.mkdtemp(prefix="ws-private-"))
    assert home.stat().st_mode & 0o777 == 0o700
    clone = home / "clone"
    shutil.copytree(REPO, clone, ignore=_not_in_a_clone)
    yield clone
    _manage(clone, "release_sandboxes")
    moved = default_var_dir(clone, as_root=os.geteuid() == 0)
    if moved.parent == FALLBACK_PARENT:
        shutil.rmtree(moved, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def root_server() -> None:
    """Only a root server runs sandbox code as other uids, which must pass through the clone's parents."""
    if os.geteuid() != 0:
        if os.environ.get("WORKSPACE_REQUIRE_ISOLATION"):
            pytest.fail("sandbox uid tests must run here: the process is not root")
        pytest.skip("the process is not root, so sandboxes keep its uid")


def _manage(clone: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=clone,
        env=_clone_env(**env),
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS * 2,
        check=False,
    )


def _call(url: str, body: dict | None = None) -> tuple[int, dict]:
    request = urllib.request.Request(
        url,
        data=None if body is None else json.dumps(body).encode(),
        headers={"X-User-Id": "alice", "Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=DEADLINE_SECONDS) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def _wait_until_up(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:
        assert server.poll() is None, log.read_text(errors="replace")
        try:
            _call(url)
            return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"the server did not answer within {DEADLINE_SECONDS}s: {log.read_text(errors='replace')}")


def test_the_sandbox_tests_pass_in_a_clone_under_a_private_directory(private_clone):
    # Given the repository in a folder only its owner may enter
    # When the tests that need other uids to reach files run there
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUBSET],
        cwd=private_clone,
        env=_clone_env(),
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS * 5,
        check=False,
    )
    # Then they pass
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout


def test_the_server_started_in_a_clone_under_a_private_directory_runs_commands(private_clone, tmp_path):
    # Given `make run`'s steps in the private clone: migrate, the demo, the server
    demo = {"WORKSPACE_CONFIG": "workspace/demo.toml"}
    for step in (["migrate", "--noinput"], ["load_demo"]):
        done = _manage(private_clone, *step, **demo)
        assert done.returncode == 0, done.stderr
    item = next(line.split()[4] for line in done.stdout.splitlines() if "created notebook item" in line)
    port, log = free_port(), tmp_path / "server.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=private_clone,
            env=_clone_env(**demo),
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_up(f"{base}/healthz", server, log)
        # When alice runs a command in her notebook and staff ask for health
        status, body = _call(f"{base}/a/notebook/items/{item}/exec", {"command": "echo ran in $(pwd)"})
        _, health = _call(f"{base}/healthz")
    finally:
        server.terminate()
        server.wait(timeout=DEADLINE_SECONDS)
    # Then the command ran and the sandbox check is ok
    assert status == 200, (body, log.read_text(errors="replace"))
    assert body["exit_code"] == 0
    assert body["stdout"].startswith("ran in /")
    assert health["sandbox_backend"] == "ok", health
    # And a root server keeps its workspaces outside the private folder, in a directory it made 0711
    var_dir = default_var_dir(private_clone, as_root=os.geteuid() == 0)
    assert (var_dir / "workspaces" / item).is_dir()
    if os.geteuid() == 0:
        assert var_dir.parent == FALLBACK_PARENT
        assert var_dir.stat().st_mode & 0o777 == 0o711


def test_a_server_told_to_keep_its_var_dir_in_the_private_clone_refuses_to_start(root_server, private_clone):
    # Given the private clone with its var directory set inside it
    var_dir = private_clone / "var"
    # When the server is started
    done = _manage(private_clone, "runserver", "--noreload", f"127.0.0.1:{free_port()}", WORKSPACE_VAR_DIR=str(var_dir))
    # Then it stops at once, naming the directory in the way and the fix
    assert done.returncode != 0
    assert f"{private_clone.parent} is mode 0700" in done.stderr
    assert f"chmod o+x {private_clone.parent}" in done.stderr
