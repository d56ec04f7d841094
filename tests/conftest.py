"""Fixtures every test package shares: a movable clock, switchable identity, API clients."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from rest_framework.test import APIClient

from collab import clock as clock_module
from collab.identity import MockUserProvider, get_user_provider

# Fixtures shared across suites, registered once; a suite that works on items makes
# `workspace_dirs` (and, for quotas, `fresh_memos`) autouse in its own conftest.
pytest_plugins = [
    "tests.fixtures.items",
    "tests.fixtures.quotas",
    "tests.fixtures.knowledge",
    "tests.fixtures.investigations",
    "tests.fixtures.workflows",
    "tests.fixtures.llm",
    "tests.fixtures.agent",
    "tests.fixtures.exec_agent",
    "tests.fixtures.workers",
    "tests.fixtures.terminals",
    "tests.fixtures.schema",
    "tests.fixtures.sandbox_pool",
]


# The fixtures through which a test reaches the suite's database (pytest-django's).
_SUITE_DATABASE_FIXTURES = frozenset(
    {"db", "transactional_db", "live_server", "django_db_reset_sequences", "django_db_serialized_rollback"}
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skips what needs the other database, then keeps the tests of this CI half."""
    _skip_what_needs_the_other_database(items)
    _keep_this_half(config, items)


# A marker naming a database, and the `connection.vendor` it names.
_VENDOR_OF_MARKER = {"postgres": "postgresql", "sqlite": "sqlite"}
_NAME_OF_VENDOR = {"postgresql": "PostgreSQL", "sqlite": "SQLite"}


def _skip_what_needs_the_other_database(items: list[pytest.Item]) -> None:
    """A test marked `postgres` (or `sqlite`) that reaches the suite's database needs it to be that
    database, and is skipped on the other one. The marker carries why:
    `@pytest.mark.postgres(reason="SQLite runs one writer at a time, so there is no race to lose")`
    skips as "needs PostgreSQL: SQLite runs one writer...". A `postgres` test that never reaches
    the suite's database (tests/production) starts PostgreSQL databases of its own and runs
    whatever the suite's database is."""
    from django.db import connection

    for item in items:
        for name, vendor in _VENDOR_OF_MARKER.items():
            markers = list(item.iter_markers(name))
            if not markers or connection.vendor == vendor or not _uses_suite_database(item):
                continue
            reasons = (marker.kwargs.get("reason") or next(iter(marker.args), "") for marker in markers)
            reason = next((reason for reason in reasons if reason), "")
            item.add_marker(
                pytest.mark.skip(reason=f"needs {_NAME_OF_VENDOR[vendor]}" + (f": {reason}" if reason else ""))
            )


def _keep_this_half(config: pytest.Config, items: list[pytest.Item]) -> None:
    """.ci/run runs the suite on SQLite and on PostgreSQL side by side (`WORKSPACE_CI_SUITE`
    names the half). A test that never reaches the suite's database (a parser, a browser-free
    unit, a deployment on a database of its own) gives the same result in both, so it runs in one:
    those marked `postgres` (they start PostgreSQL deployments) in the PostgreSQL half, the rest in
    the SQLite half. Without the variable (`make test`, `make test-postgres`) every test runs."""
    half = os.environ.get("WORKSPACE_CI_SUITE", "")
    if not half:
        return
    if half not in ("sqlite", "postgresql"):
        raise pytest.UsageError(f"WORKSPACE_CI_SUITE is {half!r}: name sqlite or postgresql")
    kept, deselected = [], []
    for item in items:
        its_half = "postgresql" if item.get_closest_marker("postgres") is not None else "sqlite"
        (kept if _uses_suite_database(item) or its_half == half else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


def _uses_suite_database(item: pytest.Item) -> bool:
    return item.get_closest_marker("django_db") is not None or bool(
        _SUITE_DATABASE_FIXTURES & set(getattr(item, "fixturenames", ()))
    )


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> Iterator[None]:
    """On SQLite the test database is a file of this run's own (in /dev/shm where there is one),
    not SQLite's in-memory shared cache: there a second connection that meets a writer gets
    "database table is locked" at once, where a file waits out the busy timeout as every
    deployment does, so a browser test's card refresh beside a running command could break the
    command's stream. Removed at the end; never reused (a reused file would keep an old schema)."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] != "django.db.backends.sqlite3" or database.get("TEST", {}).get("NAME"):
        yield
        return
    folder = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else Path(tempfile.gettempdir())
    path = folder / f"workspace-tests-{os.getpid()}.sqlite3"
    database.setdefault("TEST", {})["NAME"] = str(path)
    _remove_sqlite_files(path)
    _remove_databases_of_dead_runs(folder)
    yield
    _remove_sqlite_files(path)


def _remove_databases_of_dead_runs(folder: Path) -> None:
    """A run killed before its end (SIGKILL, a CI timeout) leaves its database behind, in memory
    when the folder is /dev/shm: the next run removes those whose process is gone."""
    for leftover in folder.glob("workspace-tests-*.sqlite3"):
        pid = leftover.name.removeprefix("workspace-tests-").removesuffix(".sqlite3")
        if pid.isdigit() and not _alive(int(pid)):
            _remove_sqlite_files(leftover)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def _remove_sqlite_files(path: Path) -> None:
    for name in (path.name, *(path.name + suffix for suffix in ("-wal", "-shm", "-journal"))):
        path.with_name(name).unlink(missing_ok=True)


class MovableClock:
    """A clock that stands still until a test moves it."""

    def __init__(self, start: datetime) -> None:
        self.current = start

    def now(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> datetime:
        self.current += timedelta(**delta)
        return self.current


@pytest.fixture(scope="session", autouse=True)
def fast_password_hashing() -> Iterator[None]:
    """No test here tests the hash itself, and PBKDF2 costs a noticeable part of a second per
    account (the demo makes five); servers in subprocesses keep the real hashers, and
    PBKDF2 stays listed so that what they stored still verifies in this process."""
    from django.test.utils import override_settings

    with override_settings(
        PASSWORD_HASHERS=[
            "django.contrib.auth.hashers.MD5PasswordHasher",
            "django.contrib.auth.hashers.PBKDF2PasswordHasher",
        ]
    ):
        yield


@pytest.fixture(scope="session", autouse=True)
def system_checks_beside_failing_template_variables() -> Iterator[None]:
    """FAIL_INVALID_TEMPLATE_VARS (pyproject.toml) makes pytest-django put an object that fails the
    test into `string_if_invalid`; Django's check templates.E002 wants a string there, so a test
    that runs the system checks in this process would fail on the harness, not on the project."""
    from django.conf import settings
    from django.test.utils import override_settings

    with override_settings(SILENCED_SYSTEM_CHECKS=[*settings.SILENCED_SYSTEM_CHECKS, "templates.E002"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def one_etc_snapshot_for_the_session(traversable_tmp: Path) -> Iterator[None]:
    """Every test's var directory is new: the /etc snapshots sandboxes bind (etc_snapshot.py) are
    kept in one place for the whole session, so they are copied once, not once per test."""
    from django.test.utils import override_settings

    with override_settings(WORKSPACE_SANDBOX_ETC_DIR=str(traversable_tmp / "sandbox-etc")):
        yield


class AsgiLiveServer:
    """The stack `make run` and `make serve` serve (uvicorn, the ASGI handler of workspace/serving.py),
    in a thread of this process on a free port: what pytest-django's `live_server` gives, over ASGI.
    Static files come from the apps' folders, as WhiteNoise serves them in the demo."""

    def __init__(self, host: str) -> None:
        import socket
        import threading

        import uvicorn
        from django.test.utils import modify_settings, override_settings

        from workspace.serving import WorkspaceASGIHandler
        from workspace.uvicorn_worker import server_options

        # Read by pytest-django's `_live_server_helper` around each test that uses the server.
        self._live_server_modified_settings = modify_settings(ALLOWED_HOSTS={"append": host})
        self._static = override_settings(WHITENOISE_USE_FINDERS=True, WHITENOISE_AUTOREFRESH=True)
        self._static.enable()
        self.host = host
        self.socket = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        self.socket.bind((host, 0))
        self.port = self.socket.getsockname()[1]
        options = {**server_options(), "lifespan": "off", "log_level": "warning"}
        self.server = uvicorn.Server(uvicorn.Config(WorkspaceASGIHandler(), **options))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("the live server did not start")
            self.thread.join(0.01)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def __str__(self) -> str:
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.socket.close()
        self._static.disable()


@pytest.fixture(scope="session")
def live_server(request: pytest.FixtureRequest) -> Iterator[AsgiLiveServer]:
    """A live server on the stack every app process runs (uvicorn over workspace/serving.py)."""
    address = request.config.getvalue("liveserver") or os.getenv("DJANGO_LIVE_TEST_SERVER_ADDRESS") or "localhost"
    server = AsgiLiveServer(address.split(":")[0])
    yield server
    server.stop()


@pytest.fixture(scope="session")
def traversable_tmp() -> Iterator[Path]:
    """A temp root that sandbox uids may pass through (0711): bubblewrap reaches workspaces by path,
    and pytest's own temp root is private to root (0700). Wherever the clone lives; under /tmp
    when TMPDIR is a private directory."""
    from workspace.sandboxes.reach import closed_dir

    candidates = [Path(tempfile.gettempdir()), Path("/tmp")]
    parent = next((path for path in candidates if closed_dir(path) is None), candidates[0])
    base = Path(tempfile.mkdtemp(prefix="ws-tests-", dir=parent))
    base.chmod(0o711)
    yield base
    from workspace.sandboxes.volumes import unmount_under

    unmount_under(base)
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def tmp_path(traversable_tmp: Path, request: pytest.FixtureRequest) -> Path:
    """pytest's `tmp_path`, moved under the traversable root."""
    directory = Path(tempfile.mkdtemp(prefix=re.sub(r"\W", "_", request.node.name)[:40], dir=traversable_tmp))
    directory.chmod(0o711)
    return directory


@pytest.fixture(autouse=True)
def token_holders_forgotten() -> Iterator[None]:
    """Who tokens act for is remembered per process (collab.tokens): no test inherits another's."""
    yield
    from collab.tokens import _holders

    _holders.clear()


@pytest.fixture(autouse=True)
def sandboxes_closed_after_each_test(settings) -> Iterator[None]:
    """Workspaces are measured (not image-bounded) unless a test asks for images; whatever a test
    opened is closed and unmounted after it, while its settings still name its var dir."""
    settings.WORKSPACE_DISK_ENFORCEMENT = "measure"
    # Warm skeletons are made by a thread of their own after an open: only the tests of them
    # (tests/items/test_warm_sandboxes.py) turn them on.
    settings.WORKSPACE_SANDBOX_WARM = 0
    yield
    from workspace.sandboxes.registry import local_sandboxes_release

    local_sandboxes_release()


@pytest.fixture
def clock() -> Iterator[MovableClock]:
    movable = MovableClock(datetime(2026, 1, 5, 9, 0, tzinfo=UTC))
    clock_module.set_source(movable.now)
    yield movable
    clock_module.reset_source()


@pytest.fixture
def run_tasks(db: None) -> Callable[[], list[Any]]:
    """Runs every task due now (and what they enqueue), as `manage.py worker` does, on the test's
    own connection; returns what ran."""
    from workspace.worker import WorkerIdentity, drain

    worker = WorkerIdentity(worker_id="test-worker")
    return lambda: drain(worker)


@pytest.fixture
def admin_client_logged_in(db: None) -> Any:
    """Django admin as a superuser (admin needs a Django account, not the mock identity)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass")
    client = Client()
    client.force_login(root)
    return client


@pytest.fixture
def acting_as() -> Iterator[Callable[[str | None], None]]:
    """Switches the mock provider's user between requests, as the spec's test mock does."""
    provider = get_user_provider()
    assert isinstance(provider, MockUserProvider)
    original = provider.current_user_id()
    yield provider.switch
    provider.switch(original)


@pytest.fixture
def api_client_for() -> Callable[[str], APIClient]:
    """An API client that names its user with the mock-mode `X-User-Id` header."""

    def build(user_id: str) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_X_USER_ID=user_id)
        return client

    return build


@pytest.fixture
def alice_api(api_client_for: Callable[[str], APIClient]) -> APIClient:
    return api_client_for("alice")


@pytest.fixture
def bob_api(api_client_for: Callable[[str], APIClient]) -> APIClient:
    return api_client_for("bob")
