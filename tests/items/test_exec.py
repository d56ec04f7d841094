"""Exec over the API: opening, reusing and closing the item's sandbox, and refusing bad input."""

from __future__ import annotations

import pytest

from quotas import ledger
from quotas.models import SandboxActivity
from tests.fixtures.items import item_url
from workspace.items.sandboxes import admission

pytestmark = pytest.mark.django_db
MIB = 1024**2


def _exec(api, item, command, **extra):
    return api.post(item_url(item, "/exec"), {"command": command, **extra}, format="json")


def test_exec_opens_a_sandbox_and_runs_in_the_workspace(alice_api, make_item):
    item = make_item()
    alice_api.put(item_url(item, "/files/hello.txt"), b"hi", content_type="application/octet-stream")
    body = _exec(alice_api, item, "ls").json()
    assert (body["exit_code"], body["stdout"], body["sandbox_opened"]) == (0, "hello.txt\n", True)
    assert body["sandbox_id"].startswith("loc-")


def test_a_second_exec_reuses_the_live_sandbox(alice_api, make_item):
    item = make_item()
    first = _exec(alice_api, item, "true").json()
    second = _exec(alice_api, item, ["echo", "again"]).json()
    assert second["sandbox_id"] == first["sandbox_id"]
    assert second["sandbox_opened"] is False
    assert SandboxActivity.objects.count() == 1


def test_exec_reports_exit_code_and_stderr(alice_api, make_item):
    body = _exec(alice_api, make_item(), "echo oops >&2; exit 3").json()
    assert (body["exit_code"], body["stderr"]) == (3, "oops\n")


def test_exec_past_its_timeout_is_killed_and_reported(alice_api, make_item):
    body = _exec(alice_api, make_item(), "sleep 20", timeout=0.3).json()
    assert body["timed_out"] is True


def test_the_ledger_row_carries_owner_and_resolved_size(alice_api, make_item):
    item = make_item(owner="bob")
    _exec(alice_api, item, "true")
    row = ledger.live_row_of_item(item.pk)
    assert (row.owner, row.app_slug, row.cpu_cores, row.memory_bytes) == ("bob", "notebook", 1.0, 512 * MIB)


def test_an_app_that_declares_nothing_charges_unspecified_not_zero(alice_api, make_item):
    item = make_item(app_slug="rca")
    _exec(alice_api, item, "true")
    row = ledger.live_row_of_item(item.pk)
    assert (row.cpu_cores, row.memory_bytes) == (None, None)


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"command": ""},
        {"command": "   "},
        {"command": []},
        {"command": [""]},
        {"command": 42},
        {"command": ["ls", 3]},
        {"command": "x" * 20000},
        {"command": ["echo"] * 1000},
        {"command": "ls", "timeout": 0},
        {"command": "ls", "timeout": 100000},
        {"command": "ls", "timeout": "soon"},
    ],
)
def test_bad_exec_input_is_400_and_opens_nothing(alice_api, make_item, body):
    item = make_item()
    response = alice_api.post(item_url(item, "/exec"), body, format="json")
    assert response.status_code == 400
    assert set(response.json()) >= {"error", "detail"}
    assert not SandboxActivity.objects.exists()


def test_exec_on_someone_elses_item_is_404_and_opens_nothing(bob_api, make_item):
    response = _exec(bob_api, make_item(), "ls")
    assert response.status_code == 404
    assert not SandboxActivity.objects.exists()


def test_exec_on_an_unknown_item_or_app_is_404(alice_api):
    assert alice_api.post("/a/notebook/items/424242/exec", {"command": "ls"}, format="json").status_code == 404
    assert alice_api.post("/a/nope/items/1/exec", {"command": "ls"}, format="json").status_code == 404


def test_closing_the_sandbox_soft_deletes_the_row_and_the_next_exec_opens_a_new_one(alice_api, make_item):
    item = make_item()
    first = _exec(alice_api, item, "true").json()["sandbox_id"]
    assert alice_api.delete(item_url(item, "/sandbox")).status_code == 204
    closed = SandboxActivity.objects.get()
    assert (closed.is_deleted, closed.close_reason) == (True, "closed")
    second = _exec(alice_api, item, "true").json()
    assert second["sandbox_id"] != first
    assert second["sandbox_opened"] is True


def test_sandbox_state_is_served_and_404_when_none_is_live(alice_api, make_item):
    item = make_item()
    assert alice_api.get(item_url(item, "/sandbox")).json()["error"] == "no_live_sandbox"
    sandbox_id = _exec(alice_api, item, "true").json()["sandbox_id"]
    assert alice_api.get(item_url(item, "/sandbox")).json()["sandbox_id"] == sandbox_id
    assert alice_api.get(item_url(item)).json()["sandbox"]["sandbox_id"] == sandbox_id


def test_admission_is_the_one_place_a_new_sandbox_is_recorded(alice_api, make_item, monkeypatch):
    calls = []
    original = admission.before_sandbox_open

    def spy(**kwargs):
        calls.append(kwargs["item"].pk)
        return original(**kwargs)

    monkeypatch.setattr("workspace.items.sandboxes.lifecycle.before_sandbox_open", spy)
    item = make_item()
    _exec(alice_api, item, "true")
    _exec(alice_api, item, "true")
    assert calls == [item.pk]


def test_exec_on_a_live_sandbox_costs_a_bounded_number_of_queries(alice_api, make_item, django_assert_max_num_queries):
    item = make_item()
    _exec(alice_api, item, "true")
    with django_assert_max_num_queries(4):
        assert _exec(alice_api, item, "true").status_code == 200
