"""A pool of real sandbox hosts (three `runsandboxhost` processes, each with its own workspaces,
capacity and token) behind the app: spread by capacity, a full pool, a host killed with SIGKILL
mid-command, a drained host (DESIGN.md §5 "Many sandbox machines")."""

from __future__ import annotations

import threading

import pytest

from quotas import ledger
from quotas.models import SandboxActivity
from tests.fixtures.items import isolation_or_skip, item_url
from tests.fixtures.sandbox_pool import PoolHost, await_sandbox_command, pool_tokens
from workspace.items import pool
from workspace.items.config import get_config
from workspace.items.models import SandboxHost
from workspace.sandboxes.filestore import workspace_bytes, workspace_dir

pytestmark = pytest.mark.django_db
CPU, MEMORY, SHARED = "SANDBOX_HOST_CAPACITY_CPU", "SANDBOX_HOST_CAPACITY_MEMORY", "SANDBOX_HOST_WORKSPACES"
ONE_CORE_APP = 'slug = "notebook"\nname = "Notebook"\n[resources]\ncpu = 1\nmemory = "256M"\ndisk = "4M"\n'
OCTETS = "application/octet-stream"
MEASURED = "WORKSPACE_DISK_ENFORCEMENT"
MIB = 1024**2


@pytest.fixture
def app_on_pool(sandbox_pool, workspace_dirs, write_config, settings):
    """Starts hosts of the given core counts and points the app at them, each with its own token and
    state, all on the app's workspaces (the pool's shared storage, here one directory)."""
    isolation_or_skip()
    # One machine: the app and its hosts bound workspaces by the same images, which all of them see.
    settings.WORKSPACE_DISK_ENFORCEMENT = "image"
    shared = {SHARED: str(workspace_dirs / "workspaces"), "WORKSPACE_DISK_ENFORCEMENT": "image"}

    def start(*cores: str) -> list[PoolHost]:
        hosts = sandbox_pool([{CPU: count, MEMORY: "8G", **shared} for count in cores])
        settings.WORKSPACE_SANDBOX_HOST_TOKEN = ""
        settings.WORKSPACE_SANDBOX_HOST_TOKENS = pool_tokens(hosts)
        listed = ", ".join(f'"{host.url}"' for host in hosts)
        write_config(
            f'[sandbox]\nbackend = "http"\nhosts = [{listed}]\nlease = "90s"\n', apps={"notebook.toml": ONE_CORE_APP}
        )
        return hosts

    return start


def _exec(api, item, command="true", **extra):
    return api.post(item_url(item, "/exec"), {"command": command, **extra}, format="json")


def _host_of(item) -> str:
    return ledger.live_row_of_item(item.pk).host


def _running_on(host: PoolHost) -> int:
    status, listed = host.call("GET", "/sandboxes?older_than=0")
    assert status == 200, host.stderr_tail()
    return len(listed["sandboxes"])


def test_sandboxes_spread_over_real_hosts_by_capacity_until_the_pool_is_full(app_on_pool, make_item, alice_api):
    # Given three real hosts of 4, 2 and 1 cores and an app of one-core sandboxes
    hosts = app_on_pool("4", "2", "1")
    items = [make_item(title=f"n{n}") for n in range(8)]
    # When seven items run a command each
    answers = [_exec(alice_api, item) for item in items[:7]]
    # Then every command ran, and the sandboxes landed four, two and one, as each host itself lists
    assert [answer.status_code for answer in answers] == [200] * 7, answers[-1].content
    assert [_running_on(host) for host in hosts] == [4, 2, 1]
    assert sorted(_host_of(item) for item in items[:7]) == sorted(
        [hosts[0].url] * 4 + [hosts[1].url] * 2 + [hosts[2].url]
    )
    # And the item says where its sandbox runs
    assert alice_api.get(item_url(items[0])).json()["sandbox"]["host"] == pool.host_name(_host_of(items[0]))
    # When an eighth item runs one
    refused = _exec(alice_api, items[7])
    # Then the pool is full: 503 with Retry-After, and nothing opened anywhere
    assert refused.status_code == 503
    assert refused.json()["error"] == "sandbox_pool_full"
    assert refused["Retry-After"] == str(pool.HOST_RETRY_AFTER_SECONDS)
    assert [_running_on(host) for host in hosts] == [4, 2, 1]


def test_a_host_killed_mid_command_is_named_and_its_items_move_on_after_the_lease(
    app_on_pool, make_item, alice_api, clock
):
    # Given two real hosts and alice's item whose sandbox runs on one of them
    hosts = app_on_pool("4", "4")
    item = make_item()
    assert _exec(alice_api, item).status_code == 200
    row = ledger.live_row_of_item(item.pk)
    doomed = next(host for host in hosts if host.url == row.host)
    survivor = next(host for host in hosts if host is not doomed)
    # When that host is killed with SIGKILL while a command of hers runs there
    killer = threading.Thread(target=_kill_once_running, args=(doomed, row.backend_sandbox_id), daemon=True)
    killer.start()
    answer = _exec(alice_api, item, "sleep 300", timeout=120)
    killer.join(timeout=30)
    # Then her command gets 503 sandbox_host_unreachable naming the host, with Retry-After, never a 500
    assert answer.status_code == 503, answer.content
    assert answer.json()["error"] == "sandbox_host_unreachable"
    assert answer.json()["host"] == pool.host_name(doomed.url)
    assert answer["Retry-After"] == str(pool.HOST_RETRY_AFTER_SECONDS)
    # And asking again is the same answer, without keeping the dead sandbox billed
    assert _exec(alice_api, item).json()["error"] == "sandbox_host_unreachable"
    assert SandboxActivity.current.get(pk=row.pk).lease_expires_at <= row.last_seen_at + get_config().sandbox.lease
    assert SandboxHost.objects.get(url=doomed.url).problem
    # When the lease runs out
    clock.advance(seconds=get_config().sandbox.lease.total_seconds() + 1)
    moved = _exec(alice_api, item)
    # Then the dead host's row left the ledger (not billed) and her next command runs on the living host
    assert moved.status_code == 200, moved.content
    assert SandboxActivity.objects.get(pk=row.pk).close_reason == "expired"
    assert _host_of(item) == survivor.url
    assert ledger.live_rows_of_payer("alice").count() == 1


def test_a_drained_host_takes_nothing_new_keeps_its_own_and_its_sandboxes_close_from_admin(
    app_on_pool, make_item, alice_api, admin_client_logged_in
):
    # Given two real hosts and alice's item with a sandbox on the roomier one
    roomy, small = app_on_pool("4", "2")
    early = make_item(title="early")
    assert _exec(alice_api, early).status_code == 200
    assert _host_of(early) == roomy.url
    host_row = SandboxHost.objects.get(url=roomy.url)
    # When an operator drains the roomy host from admin
    drained = admin_client_logged_in.post(
        "/admin/items/sandboxhost/", {"action": "drain", "_selected_action": [host_row.pk]}, follow=True
    )
    assert drained.status_code == 200
    assert SandboxHost.objects.get(url=roomy.url).draining
    # Then new sandboxes go to the other host, and the drained host's own sandbox still runs commands
    later = make_item(title="later")
    assert _exec(alice_api, later).status_code == 200
    assert _host_of(later) == small.url
    assert _exec(alice_api, early, "echo still here").json()["stdout"] == "still here\n"
    assert _running_on(roomy) == 1
    # When the operator closes the drained host's sandboxes from admin
    admin_client_logged_in.post(
        "/admin/items/sandboxhost/", {"action": "close_sandboxes", "_selected_action": [host_row.pk]}, follow=True
    )
    # Then nothing runs there any more, and the early item's next command opens on the other host
    assert _running_on(roomy) == 0
    assert SandboxActivity.objects.filter(host=roomy.url).get().close_reason == "closed"
    assert _exec(alice_api, early).status_code == 200
    assert _host_of(early) == small.url


def test_app_health_reports_each_real_host_and_one_that_died(app_on_pool, client, settings):
    # Given three real hosts, one of which is then killed
    hosts = app_on_pool("4", "2", "1")
    hosts[2].kill()
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    # When staff ask the app for health
    body = client.get("/healthz", HTTP_X_USER_ID="alice").json()
    # Then it is ok (hosts take sandboxes) and lists each host: two answering with their capacity, one not
    assert body["sandbox_backend"] == "ok"
    states = [(entry["url"], entry["state"], (entry["capacity"] or {}).get("cpu_cores")) for entry in body["hosts"]]
    assert states == [(hosts[0].url, "ok", 4.0), (hosts[1].url, "ok", 2.0), (hosts[2].url, "unreachable", None)]


def _kill_once_running(host: PoolHost, sandbox_id: str) -> None:
    await_sandbox_command(host, sandbox_id, b"sleep\x00300\x00")
    host.kill()


def test_files_are_one_workspace_wherever_the_items_sandbox_runs(app_on_pool, make_item, alice_api):
    # Given two real hosts on the app's workspaces, and a file alice uploads through the API
    first, second = app_on_pool("4", "2")
    item = make_item()
    uploaded = alice_api.put(item_url(item, "/files/notes/hello.txt"), b"from the api\n", content_type=OCTETS)
    assert uploaded.status_code == 200, uploaded.content
    # When a command on the host her sandbox lands on reads it and writes another
    read = _exec(alice_api, item, "cat notes/hello.txt && echo from the sandbox > out.txt")
    # Then the sandbox saw the upload, and the API reads what the sandbox wrote
    assert read.json()["stdout"] == "from the api\n"
    assert _host_of(item) == first.url
    assert b"".join(alice_api.get(item_url(item, "/files/out.txt")).streaming_content) == b"from the sandbox\n"
    # When her sandbox is closed, its host drained, and her next command opens one on the other host
    assert alice_api.delete(item_url(item, "/sandbox")).status_code in (200, 204)
    pool.host_drain(url=first.url, draining=True, by="ops")
    moved = _exec(alice_api, item, "cat out.txt notes/hello.txt")
    # Then that sandbox finds the same files
    assert _host_of(item) == second.url
    assert moved.json()["stdout"] == "from the sandbox\nfrom the api\n"


def test_a_host_whose_workspaces_are_not_the_apps_takes_no_sandbox_and_health_says_why(
    sandbox_pool, workspace_dirs, write_config, settings, make_item, alice_api, client
):
    isolation_or_skip()
    # Given a pool of two hosts: one on the app's workspaces, the other (roomier) on a directory of its own
    sharing, apart = sandbox_pool(
        [
            {CPU: "2", MEMORY: "8G", SHARED: str(workspace_dirs / "workspaces"), MEASURED: "measure"},
            {CPU: "8", MEMORY: "8G", MEASURED: "measure"},
        ]
    )
    settings.WORKSPACE_SANDBOX_HOST_TOKENS = pool_tokens([sharing, apart])
    settings.WORKSPACE_MOCK_STAFF = ["alice"]
    write_config(f'[sandbox]\nbackend = "http"\nhosts = ["{sharing.url}", "{apart.url}"]\n')
    # When alice runs commands in two items
    placed = []
    for title in ("a", "b"):
        item = make_item(title=title)
        assert _exec(alice_api, item).status_code == 200
        placed.append(_host_of(item))
    # Then both ran on the sharing host, and staff health says the other is misconfigured, and why
    assert placed == [sharing.url, sharing.url]
    hosts = {entry["url"]: entry for entry in client.get("/healthz", HTTP_X_USER_ID="alice").json()["hosts"]}
    assert hosts[apart.url]["state"] == "misconfigured"
    assert "not this app's" in hosts[apart.url]["problem"]
    assert hosts[sharing.url]["state"] == "ok"


def test_the_owners_disk_total_holds_in_sandboxes_on_pool_hosts(app_on_pool, per_user_disk, api_client_for, make_item):
    # Given a pool host, and carol whose notebooks may hold 4M each and who may hold 5M in all
    app_on_pool("4")
    per_user_disk("carol", "5M")
    carol = api_client_for("carol")
    first, second = make_item(created_by="carol"), make_item(created_by="carol")
    assert _exec(carol, first, "head -c 3145728 /dev/zero > three").json()["exit_code"] == 0
    # When a command in her second notebook writes 4M, which that notebook alone would allow
    body = _exec(carol, second, "head -c 4194304 /dev/zero > big").json()
    # Then it is stopped where her 5M total ends, as on the app's own machine
    assert "No space left on device" in body["stderr"]
    assert workspace_bytes(workspace_dir(first.pk)) + workspace_bytes(workspace_dir(second.pk)) <= 5 * MIB


def test_a_sandbox_on_a_pool_host_sees_no_other_workspace_nor_the_share_marker(app_on_pool, make_item, alice_api):
    # Given two items on a pool host's shared workspaces, the other one holding a secret
    app_on_pool("4")
    mine, other = make_item(title="mine"), make_item(title="other")
    alice_api.put(item_url(other, "/files/secret.txt"), b"not yours\n", content_type=OCTETS)
    # When sandbox code in the first looks for it, for the share marker and for the app's database
    answer = _exec(
        alice_api,
        mine,
        f"cat ../{other.pk}/secret.txt /workspace/../{other.pk}/secret.txt 2>&1; ls -a /workspace/.. 2>&1; "
        "ls ../.share-check 2>&1; ls / | grep -c var",
    ).json()
    # Then none of it is within reach: its workspace is the only one mounted
    assert "not yours" not in answer["stdout"]
    listed = answer["stdout"].split()
    assert ".share-check" not in listed
    assert str(other.pk) not in listed
