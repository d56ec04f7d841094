"""Every path that opens a sandbox meets the real gate: chat send, workflow runs, scheduled runs, exec."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from quotas.models import SandboxActivity
from tests.fixtures.items import item_url
from workspace.agent.models import ItemMessage
from workspace.workflows import services as workflow_services
from workspace.workflows.models import WorkflowRun

pytestmark = pytest.mark.django_db


@pytest.fixture
def full(per_user, alice_api, make_item):
    """Alice's one allowed sandbox is live on another item."""
    per_user(count=1)
    assert alice_api.post(item_url(make_item(), "/exec"), {"command": "true"}, format="json").status_code == 200


def test_chat_send_is_refused_before_the_message_is_stored(full, alice_api, make_item):
    # Given alice's one allowed sandbox live on another item
    # When she sends a command to a new notebook's chat
    response = alice_api.post(item_url(make_item(), "/messages"), {"content": "$ echo hi"}, format="json")
    # Then it is 507 on the sandboxes limit and no message is stored
    assert response.status_code == 507
    assert (response.json()["error"], response.json()["dimension"]) == ("sandbox_quota_exceeded", "sandboxes")
    assert not ItemMessage.objects.exists()


def test_a_sandbox_refusal_is_the_body_the_document_gives_it(full, alice_api, make_item, per_user, documented_body):
    # Given alice's one allowed sandbox live on another item, and a cpu limit that binds too
    per_user(count=1, cpu=0.1)
    # When she runs a command on a new notebook
    response = alice_api.post(item_url(make_item(), "/exec"), {"command": "true"}, format="json")
    # Then the 507's body, with the other binding limit under `also`, is what the OpenAPI document describes
    assert [refusal["dimension"] for refusal in [response.json(), *response.json()["also"]]] == ["sandboxes", "cpu"]
    documented_body(response, "/a/{slug}/items/{item_id}/exec", "post")


def test_a_pure_chat_turn_is_gated_too(full, alice_api, make_item):
    # Given alice's one allowed sandbox live on another item
    # When she sends a message that runs nothing
    response = alice_api.post(item_url(make_item(), "/messages"), {"content": "hello there"}, format="json")
    # Then it is gated all the same: 507, and no message is stored
    assert response.status_code == 507
    assert not ItemMessage.objects.exists()


def test_a_workflow_run_is_refused_and_records_nothing(full, alice_api, make_item, make_workflow):
    # Given alice's one allowed sandbox live on another item, and her workflow
    workflow_id = make_workflow(["echo one"])
    # When she runs the workflow on a new notebook
    response = alice_api.post(item_url(make_item(), f"/workflows/{workflow_id}/run"), format="json")
    # Then it is 507 and no run is recorded
    assert (response.status_code, response.json()["error"]) == (507, "sandbox_quota_exceeded")
    assert not WorkflowRun.objects.exists()


def test_a_scheduled_run_refused_by_quota_leaves_a_not_run_record(full, make_item, make_workflow):
    # Given alice's one allowed sandbox live on another item, and her workflow
    item = make_item()
    # When the scheduler runs the workflow on a new notebook
    run = workflow_services.scheduled_run(
        workflow_id=make_workflow(["echo one"]), item_id=item.pk, window_at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    )
    # Then the run is recorded as not run, saying why, and no sandbox is opened
    assert run.status == "not_run"
    assert run.reason.startswith("not run due to quota: ")
    assert "sandboxes limit" in run.reason
    assert not SandboxActivity.objects.filter(item_id=str(item.pk)).exists()


def test_chat_send_on_an_item_with_a_live_sandbox_passes_the_gate(per_user, alice_api, make_item):
    # Given alice may run one sandbox, live on this very notebook
    per_user(count=1)
    item = make_item()
    assert alice_api.post(item_url(item, "/exec"), {"command": "true"}, format="json").status_code == 200
    # When she sends a command to its chat
    response = alice_api.post(item_url(item, "/messages"), {"content": "$ echo hi"}, format="json")
    # Then the gate lets it through
    assert response.status_code == 201
