"""Placement over a pool of sandbox hosts (DESIGN.md §5 "Many sandbox machines"): the config, the
choice by free capacity, drains and silent hosts, races, and where people see the host. The hosts
here are rows with the reports real hosts would give; tests/items/test_sandbox_pool_hosts.py runs
real `runsandboxhost` processes."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from collab import clock
from collab.edge import status_of
from collab.errors import DomainError, Unavailable
from quotas import ledger
from quotas.models import SandboxActivity
from quotas.values import SandboxSize
from tests.fixtures.items import item_url
from tests.fixtures.quotas import GIB
from workspace.items import pool
from workspace.items.admission import before_sandbox_open
from workspace.items.config import get_config, load_config
from workspace.items.models import SandboxHost
from workspace.sandboxes import share
from workspace.sandboxes.registry import backend_named, host_token
from workspace.settings import _host_tokens

pytestmark = pytest.mark.django_db
HOSTS = ("http://sandbox-1:8100", "http://sandbox-2:8100", "http://sandbox-3:8100")
ONE_CORE_APP = 'slug = "notebook"\nname = "Notebook"\n[resources]\ncpu = 1\nmemory = "1G"\n'


def _pool_config(write_config, hosts=HOSTS, app: str = ONE_CORE_APP) -> None:
    listed = ", ".join(f'"{url}"' for url in hosts)
    write_config(f'[sandbox]\nbackend = "http"\nhosts = [{listed}]\n', apps={"notebook.toml": app})


def _host(url: str, *, cpu: float = 4, memory: int = 8 * GIB, count: int | None = None, **fields) -> SandboxHost:
    """A host row as a refresh leaves it when the host answered just now."""
    now = fields.pop("checked_at", clock.now())
    report = {
        "capacity": {"cpu_cores": cpu, "memory_bytes": memory, "sandboxes": count},
        "defaults": {"cpu_cores": 0.5, "memory_bytes": GIB // 2},
    }
    return SandboxHost.objects.create(url=url, report=report, seen_at=now, checked_at=now, answered=True, **fields)


def _admitted_on(item) -> str:
    return before_sandbox_open(item=item, app=get_config().app("notebook"), backend="http").activity.host


@pytest.fixture
def pool_of_three(workspace_dirs, write_config):
    """Three hosts of 4, 2 and 1 cores (8 GiB each) that answered a moment ago; one-core sandboxes."""
    _pool_config(write_config)
    return [_host(HOSTS[0], cpu=4), _host(HOSTS[1], cpu=2), _host(HOSTS[2], cpu=1)]


def test_hosts_are_read_as_a_list_and_host_url_is_a_pool_of_one(tmp_path, write_config):
    # Given one config with `hosts` and one with the older `host_url`
    pool_config = tmp_path / "pool.toml"
    pool_config.write_text('[sandbox]\nbackend = "http"\nhosts = ["http://a:8100/", "https://b.example:9000"]\n')
    single = tmp_path / "single.toml"
    single.write_text('[sandbox]\nbackend = "http"\nhost_url = "http://a:8100"\n')
    apps = write_config("[sandbox]\n").parent / "apps"
    apps.mkdir()
    # When they are loaded / Then both are pools, trailing slashes gone
    assert load_config(pool_config, apps).sandbox.hosts == ("http://a:8100", "https://b.example:9000")
    assert load_config(single, apps).sandbox.hosts == ("http://a:8100",)


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('hosts = ["http://a:8100"]\nhost_url = "http://b:8100"', "not both"),
        ("hosts = []", "needs `hosts`"),
        ('hosts = "http://a:8100"', "a list"),
        ('hosts = ["ftp://a"]', "http\\(s\\) URLs"),
        ('hosts = ["http://a:8100?x=1"]', "http\\(s\\) URLs"),
        ('hosts = ["http://a:8100", "http://a:8100/"]', "named twice"),
        ("hosts = [8100]", "http\\(s\\) URLs"),
    ],
)
def test_a_pool_that_makes_no_sense_stops_start_up_naming_the_key(tmp_path, table, problem):
    # Given an http config whose hosts are missing, doubled or not URLs
    config = tmp_path / "bad.toml"
    config.write_text(f'[sandbox]\nbackend = "http"\n{table}\n')
    (tmp_path / "apps").mkdir()
    # When it is loaded / Then start-up fails naming the key and the problem
    with pytest.raises(ImproperlyConfigured, match=rf"sandbox\.(hosts|host_url).*{problem}"):
        load_config(config, tmp_path / "apps")


def test_each_host_gets_its_own_token_and_others_the_shared_one(settings):
    # Given a shared token and one of the pool's hosts with its own
    settings.WORKSPACE_SANDBOX_HOST_TOKEN = "shared"
    settings.WORKSPACE_SANDBOX_HOST_TOKENS = {HOSTS[0]: "first-only"}
    # When the backends for two hosts are built / Then each sends its own secret
    assert backend_named("http", host_url=HOSTS[0]).token == "first-only"
    assert backend_named("http", host_url=HOSTS[1]).token == "shared"
    assert host_token(HOSTS[2]) == "shared"


@pytest.mark.parametrize("raw", ["not json", "[]", '{"http://a": 5}', '{"http://a": ""}'])
def test_a_host_tokens_setting_that_is_not_an_object_of_tokens_stops_start_up(raw):
    # When WORKSPACE_SANDBOX_HOST_TOKENS holds something else than URL -> token / Then it is refused
    with pytest.raises(ImproperlyConfigured, match="WORKSPACE_SANDBOX_HOST_TOKENS"):
        _host_tokens(raw)


def test_a_new_sandbox_goes_to_the_host_with_the_most_room_left(pool_of_three, make_item, clock):
    # Given hosts of 4, 2 and 1 cores, none used, and one-core sandboxes
    # When seven items open one each
    placed = [_admitted_on(make_item(title=f"n{n}")) for n in range(7)]
    # Then each went where the most room was left, until every core is taken
    assert [placed.count(url) for url in HOSTS] == [4, 2, 1]
    assert placed[:3] == [HOSTS[0], HOSTS[0], HOSTS[1]]


def test_a_full_pool_is_a_503_with_retry_after_and_stores_nothing(pool_of_three, make_item):
    # Given every core of the pool taken
    for n in range(7):
        _admitted_on(make_item(title=f"n{n}"))
    rows = SandboxActivity.objects.count()
    # When another item opens a sandbox
    with pytest.raises(Unavailable) as refused:
        _admitted_on(make_item(title="one too many"))
    # Then it is 503 sandbox_pool_full with Retry-After, and no row was written
    assert (status_of(refused.value), refused.value.error) == (503, "sandbox_pool_full")
    assert refused.value.retry_after == pool.HOST_RETRY_AFTER_SECONDS
    assert SandboxActivity.objects.count() == rows


def test_a_host_bounded_by_count_takes_no_more_than_its_count(workspace_dirs, write_config, make_item):
    # Given one roomy host that runs at most two sandboxes, and a small one
    _pool_config(write_config, hosts=HOSTS[:2])
    _host(HOSTS[0], cpu=64, count=2)
    _host(HOSTS[1], cpu=2)
    # When four items open one each
    placed = [_admitted_on(make_item(title=f"n{n}")) for n in range(4)]
    # Then the count bound the first host at two
    assert [placed.count(url) for url in HOSTS[:2]] == [2, 2]


def test_an_undeclared_size_is_charged_the_hosts_default(workspace_dirs, write_config, make_item):
    # Given an app that declares no size, on a host of one core whose default is half a core
    _pool_config(write_config, hosts=HOSTS[:1], app='slug = "notebook"\nname = "Notebook"\n')
    _host(HOSTS[0], cpu=1)
    # When three items open one each / Then two fit (two halves) and the third finds the pool full
    _admitted_on(make_item(title="a"))
    _admitted_on(make_item(title="b"))
    with pytest.raises(Unavailable, match="full"):
        _admitted_on(make_item(title="c"))


def test_a_drained_host_takes_no_new_sandbox_and_keeps_its_own(pool_of_three, make_item):
    # Given a sandbox on the biggest host, which an operator then drains
    first = make_item(title="before")
    assert _admitted_on(first) == HOSTS[0]
    pool.host_drain(url=HOSTS[0], draining=True, by="ops")
    # When more items open sandboxes
    placed = [_admitted_on(make_item(title=f"n{n}")) for n in range(3)]
    # Then none went to the drained host, whose sandbox still counts there
    assert HOSTS[0] not in placed
    assert ledger.live_usage_by_host([HOSTS[0]])[HOSTS[0]].sandboxes == 1


@pytest.mark.parametrize("silence", ["problem", "stale"])
def test_a_host_that_does_not_answer_takes_no_new_sandbox(pool_of_three, make_item, silence):
    # Given the biggest host's last health call failed (or it has not been heard from for long)
    if silence == "problem":
        SandboxHost.objects.filter(url=HOSTS[0]).update(answered=False, problem="connection refused")
    else:
        SandboxHost.objects.filter(url=HOSTS[0]).update(seen_at=clock.now() - pool.REPORT_STALE - timedelta(1))
    # When an item opens a sandbox / Then it goes to the next roomiest host
    assert _admitted_on(make_item()) == HOSTS[1]


def test_no_host_answering_is_a_503_naming_them(pool_of_three, make_item):
    # Given no host of the pool answers
    SandboxHost.objects.update(answered=False, problem="connection refused")
    # When an item opens a sandbox
    with pytest.raises(Unavailable) as refused:
        _admitted_on(make_item())
    # Then it is 503 sandbox_host_unreachable naming the hosts, with Retry-After
    assert refused.value.error == "sandbox_host_unreachable"
    assert refused.value.extra["host"] == "sandbox-1:8100, sandbox-2:8100, sandbox-3:8100"
    assert refused.value.retry_after == pool.HOST_RETRY_AFTER_SECONDS


def test_every_host_drained_is_a_503_saying_so(pool_of_three, make_item):
    # Given an operator drained every host / When an item opens a sandbox / Then 503 sandbox_hosts_drained
    SandboxHost.objects.update(draining=True)
    with pytest.raises(Unavailable) as refused:
        _admitted_on(make_item())
    assert refused.value.error == "sandbox_hosts_drained"


def test_a_host_without_a_capacity_report_takes_no_sandbox(pool_of_three, make_item):
    # Given the biggest host answered without a capacity (an older host)
    SandboxHost.objects.filter(url=HOSTS[0]).update(report={"defaults": {}})
    # When an item opens a sandbox / Then it goes to a host that says what it offers
    assert _admitted_on(make_item()) == HOSTS[1]


def test_a_closed_or_expired_sandbox_gives_its_room_back(pool_of_three, make_item, clock):
    # Given the one-core host's only core taken
    SandboxHost.objects.filter(url__in=HOSTS[:2]).update(draining=True)
    item = make_item(title="a")
    assert _admitted_on(item) == HOSTS[2]
    with pytest.raises(Unavailable, match="full"):
        _admitted_on(make_item(title="b"))
    # When its lease runs out / Then the core is free again
    clock.advance(seconds=get_config().sandbox.lease.total_seconds() + 1)
    assert _admitted_on(make_item(title="c")) == HOSTS[2]


@pytest.mark.postgres(reason="SQLite runs one writer at a time, so there is no race to lose")
@pytest.mark.django_db(transaction=True)
def test_twenty_concurrent_opens_never_put_more_on_a_host_than_it_holds(workspace_dirs, write_config, make_item):
    # Given PostgreSQL, three hosts that hold two sandboxes each, and twenty items
    _pool_config(write_config)
    for url in HOSTS:
        _host(url, cpu=64, count=2)
    items = [make_item(title=f"Race {n}") for n in range(20)]
    app = get_config().app("notebook")
    start = threading.Barrier(len(items))
    outcomes: list[str] = []
    lock = threading.Lock()

    def open_one(item) -> None:
        try:
            start.wait()
            outcome = before_sandbox_open(item=item, app=app, backend="http").activity.host
        except DomainError as exc:
            outcome = exc.error
        finally:
            connection.close()
        with lock:
            outcomes.append(outcome)

    # When they all open a sandbox at once
    threads = [threading.Thread(target=open_one, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then exactly two went to each host and the other fourteen heard the pool is full
    assert sorted(outcomes) == sorted([*HOSTS, *HOSTS, *["sandbox_pool_full"] * 14])
    assert {url: usage.sandboxes for url, usage in ledger.live_usage_by_host(HOSTS).items()} == dict.fromkeys(HOSTS, 2)


def test_placement_reads_the_pool_in_a_bounded_number_of_queries(
    pool_of_three, make_item, django_assert_max_num_queries
):
    # Given many sandboxes already live over the pool
    for n in range(6):
        _admitted_on(make_item(title=f"n{n}"))
    item = make_item(title="next")
    # When one more is placed / Then the queries do not grow with what runs there
    with django_assert_max_num_queries(12):
        _admitted_on(item)


def test_the_items_sandbox_and_my_resources_name_its_host(pool_of_three, make_item, alice_api, client):
    # Given alice's item with a live sandbox placed on the biggest host (and its id stored)
    item = make_item()
    activity = before_sandbox_open(item=item, app=get_config().app("notebook"), backend="http").activity
    SandboxActivity.objects.filter(pk=activity.pk).update(backend_sandbox_id="sbx-1")
    # When she reads the item, her resources and the item's page
    detail = alice_api.get(item_url(item)).json()
    mine = alice_api.get("/me/resources").json()
    page = client.get(item_url(item), HTTP_X_USER_ID="alice", HTTP_ACCEPT="text/html").content.decode()
    resources_page = client.get("/my-resources", HTTP_X_USER_ID="alice").content.decode()
    # Then each names the host by its address and port
    assert detail["sandbox"]["host"] == "sandbox-1:8100"
    assert mine["live"][0]["host"] == "sandbox-1:8100"
    assert 'data-testid="sandbox-host">sandbox-1:8100<' in page
    assert f'data-testid="live-host-{item.pk}">sandbox-1:8100<' in resources_page


def test_a_local_sandbox_names_no_host(workspace_dirs, write_config, make_item, alice_api):
    # Given the local backend and alice's item with a live sandbox
    write_config("[sandbox]\n")
    item = make_item()
    activity = before_sandbox_open(item=item, app=get_config().app("notebook"), backend="local").activity
    SandboxActivity.objects.filter(pk=activity.pk).update(backend_sandbox_id="loc-1")
    # When she reads the item / Then its sandbox has a blank host
    assert alice_api.get(item_url(item)).json()["sandbox"]["host"] == ""


def test_staff_health_lists_each_host_with_its_state_capacity_and_use(pool_of_three, make_item, client, settings):
    # Given one sandbox on the biggest host, the second drained and the third silent
    _admitted_on(make_item())
    pool.host_drain(url=HOSTS[1], draining=True, by="ops")
    SandboxHost.objects.filter(url=HOSTS[2]).update(answered=False, problem="connection refused")
    # When staff ask for health
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    body = client.get("/healthz", HTTP_X_USER_ID="alice").json()
    # Then each host is there, in config order, with its state, capacity and what the ledger counts
    hosts = {entry["host"]: entry for entry in body["hosts"]}
    assert [entry["url"] for entry in body["hosts"]] == list(HOSTS)
    assert hosts["sandbox-1:8100"]["state"] == "ok"
    assert hosts["sandbox-1:8100"]["used"] == {"cpu_cores": 1.0, "memory_bytes": GIB, "sandboxes": 1}
    assert hosts["sandbox-1:8100"]["capacity"]["cpu_cores"] == 4
    assert (hosts["sandbox-2:8100"]["state"], hosts["sandbox-3:8100"]["state"]) == ("draining", "unreachable")
    assert hosts["sandbox-3:8100"]["problem"] == "connection refused"


@pytest.mark.django_db(transaction=True)
def test_placement_outside_a_transaction_is_a_programming_error(pool_of_three):
    # When placement is asked for outside the admission's transaction / Then it refuses to guess
    with pytest.raises(RuntimeError):
        pool.placed_host(size=SandboxSize(cpu_cores=1))


@pytest.fixture
def shared_root(tmp_path):
    """A workspaces root with a marker a host wrote there, and that host's report of it."""
    root = tmp_path / "workspaces"
    marker = share.share_marker_written(root, tmp_path / "host-state")
    return root, share.share_report(marker, disk_enforcement="measure")


def test_a_host_whose_marker_the_app_sees_shares_its_workspaces(shared_root):
    # Given a host's marker under the app's root, both measuring / Then the app finds no problem
    root, report = shared_root
    assert share.share_problem(report, root, disk_enforcement="measure") == ""


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"marker": "0" * 32}, "not this app's"),
        ({"marker": "../../etc/passwd"}, "not this app's"),
        ({"marker": None}, "does not report"),
        ({"disk_enforcement": "image"}, "the same on the app"),
        ({"disk_enforcement": "image", "machine": "elsewhere"}, "the same on the app"),
    ],
)
def test_a_host_that_cannot_be_shown_to_share_the_workspaces_is_refused_with_the_reason(shared_root, change, problem):
    # Given a host whose report names another marker, a path, none, or another disk bound
    root, report = shared_root
    # When the app checks it / Then it names the problem
    assert problem in share.share_problem({**report, **change}, root, disk_enforcement="measure")


def test_images_on_another_machine_are_refused_even_when_both_sides_use_them(shared_root):
    # Given a host on another machine that mounts images, as the app does
    root, report = shared_root
    report = {**report, "disk_enforcement": "image", "machine": "another-boot-id"}
    # When the app checks it / Then images across machines are refused, measuring named as the fix
    assert "WORKSPACE_DISK_ENFORCEMENT=measure" in share.share_problem(report, root, disk_enforcement="image")


def test_a_host_removes_its_previous_marker_when_it_starts_again(tmp_path):
    # Given a host that wrote a marker, then starts again / Then only the new marker is left
    root, state = tmp_path / "workspaces", tmp_path / "state"
    first = share.share_marker_written(root, state)
    second = share.share_marker_written(root, state)
    assert sorted(path.name for path in (root / share.SHARE_DIR).iterdir()) == [second]
    assert first != second
    assert oct((root / share.SHARE_DIR).stat().st_mode & 0o777) == "0o711"


def test_a_marker_that_is_a_link_is_not_taken_for_the_file(shared_root):
    # Given the marker's name replaced by a link to a file elsewhere
    root, report = shared_root
    marker = root / share.SHARE_DIR / report["marker"]
    marker.unlink()
    marker.symlink_to("/etc/hostname")
    # When the app checks / Then it does not count as shared
    assert "not this app's" in share.share_problem(report, root, disk_enforcement="measure")


@pytest.mark.django_db(transaction=True)
def test_many_opens_that_find_the_pools_reports_old_ask_each_host_once(workspace_dirs, write_config, monkeypatch):
    # Given three hosts whose reports are old, and ten opens that find them so at once
    _pool_config(write_config)
    for url in HOSTS:
        _host(url, checked_at=clock.now() - timedelta(minutes=1))
    asked: list[str] = []
    lock = threading.Lock()

    def health(url: str) -> tuple[dict, str]:
        with lock:
            asked.append(url)
        return {"capacity": {"cpu_cores": 4, "memory_bytes": GIB}}, ""

    monkeypatch.setattr(pool, "_health", health)
    start = threading.Barrier(10)

    def refresh() -> None:
        try:
            start.wait()
            pool.hosts_refresh()
        finally:
            connection.close()

    # When they each refresh the pool
    threads = [threading.Thread(target=refresh) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then each host was asked once, by whichever open claimed it first
    assert sorted(asked) == sorted(HOSTS)
