"""Creating and editing a workflow from its form: stored as `/api/v1/workflow` would store it, and a
refused save keeps what was typed and says why."""

from __future__ import annotations

import pytest
from django.utils.html import escape

from collab.actor import Actor
from crudgen.models import StoredResource, StoredRevision
from workspace.investigations.models import InvestigationMember
from workspace.investigations.services import investigation_create
from workspace.workflows.generated import workflows

pytestmark = pytest.mark.django_db

FORM = {
    "name": "Nightly checks",
    "description": "Lists the workspace.",
    "steps": ["ls -la", "", "du -sh ."],
    "item_id": "",
    "every": "",
    "every_unit": "hours",
    "enabled": "on",
}


def _stored() -> list[tuple]:
    return [
        *StoredResource.objects.order_by("pk").values_list("current_revision_id", "is_deleted", "data"),
        StoredRevision.objects.count(),
    ]


def _only_workflow() -> tuple[str, dict]:
    (row,) = StoredResource.objects.filter(namespace="workflow")
    return row.resource_id, row.data


# -- create -------------------------------------------------------------------------------------


def test_creating_from_the_form_stores_the_workflow_as_the_api_would(alice_api, make_item):
    # Given alice's notebook
    item = make_item()
    # When she submits the new-workflow form: two steps (and a blank one), the notebook, every 2 hours
    response = alice_api.post("/workflows/new", {**FORM, "item_id": str(item.pk), "every": "2"})
    # Then she lands on the new workflow, stored as hers with the blank step left out
    workflow_id, data = _only_workflow()
    assert response.status_code == 302
    assert response["Location"] == f"/workflows/{workflow_id}"
    assert workflows.read(workflow_id).meta.created_by == "alice"
    assert data == {
        "name": "Nightly checks",
        "description": "Lists the workspace.",
        "steps": ["ls -la", "du -sh ."],
        "item_id": str(item.pk),
        "every_seconds": 7200,
        "enabled": True,
    }


def test_a_fraction_of_a_unit_is_stored_in_whole_seconds(alice_api, make_item):
    # Given alice's notebook
    item = make_item()
    # When she asks for a run every 1.5 minutes
    alice_api.post("/workflows/new", {**FORM, "item_id": str(item.pk), "every": "1.5", "every_unit": "minutes"})
    # Then the interval is stored as 90 seconds
    assert _only_workflow()[1]["every_seconds"] == 90


def test_an_unticked_enabled_box_stores_a_paused_workflow(alice_api):
    # Given the new-workflow form with Enabled cleared
    form = {key: value for key, value in FORM.items() if key != "enabled"}
    # When alice submits it / Then the workflow is stored disabled
    alice_api.post("/workflows/new", form)
    assert _only_workflow()[1]["enabled"] is False


def test_a_schedule_under_a_minute_is_refused_keeping_what_was_typed(alice_api, make_item):
    # Given alice's notebook
    item = make_item()
    # When she asks for a run every 30 seconds
    response = alice_api.post(
        "/workflows/new", {**FORM, "item_id": str(item.pk), "every": "30", "every_unit": "seconds"}
    )
    # Then it is refused with the bounds, the form still holds what she typed, and nothing is stored
    page = response.content.decode()
    assert response.status_code == 422
    assert "Schedule: must be between 60 and 2678400 seconds (1 minute to 31 days)" in page
    assert 'value="Nightly checks"' in page
    assert ">du -sh .</textarea>" in page
    assert 'name="every" value="30"' in page
    assert '<option value="seconds" selected>' in page
    assert not StoredResource.objects.exists()


def test_an_item_the_person_may_not_use_is_refused_and_nothing_is_stored(api_client_for, make_item):
    # Given dave's notebook
    item = make_item(created_by="dave")
    # When bob submits a workflow naming it
    response = api_client_for("bob").post("/workflows/new", {**FORM, "item_id": str(item.pk)})
    # Then the item is refused as unusable and nothing is stored
    assert response.status_code == 400
    assert escape("Item: no such item, or not yours") in response.content.decode()
    assert not StoredResource.objects.exists()


@pytest.mark.parametrize("every", ["soon", "-5", "1e9", "1.0000001"])
def test_an_interval_that_is_not_a_plain_number_is_refused_with_a_clear_message(alice_api, every):
    # Given alice on the new-workflow form
    # When she types an interval that is no plain number of units
    response = alice_api.post("/workflows/new", {**FORM, "every": every, "every_unit": "seconds"})
    # Then it is refused naming the schedule, and nothing is stored
    assert response.status_code == 400
    assert "Schedule: " in response.content.decode()
    assert not StoredResource.objects.exists()


def test_a_nul_character_is_refused_not_a_server_error(alice_api):
    # Given alice on the new-workflow form
    # When a step holds a NUL character
    response = alice_api.post("/workflows/new", {**FORM, "steps": ["echo a\x00b"]})
    # Then it is refused naming the steps, and nothing is stored
    assert response.status_code == 400
    assert "Steps: cannot contain a NUL character" in response.content.decode()
    assert not StoredResource.objects.exists()


def test_the_form_opened_from_an_item_has_that_item_chosen(alice_api, make_item):
    # Given alice's notebook
    item = make_item(title="Forecasts")
    # When she opens the new-workflow form from it
    page = alice_api.get(f"/workflows/new?item={item.pk}").content.decode()
    # Then the notebook is chosen
    assert f'<option value="{item.pk}" selected>Forecasts (#{item.pk})</option>' in page


def test_an_investigation_a_member_opens_the_form_from_is_offered(api_client_for):
    # Given alice's investigation with bob as member
    investigation = investigation_create(title="Outage", actor=Actor("alice"), members=["bob"]).item
    # When bob opens the new-workflow form from it
    page = api_client_for("bob").get(f"/workflows/new?item={investigation.pk}").content.decode()
    # Then the investigation is offered, chosen, among his items
    assert f'<option value="{investigation.pk}" selected>Outage (#{investigation.pk})</option>' in page


def test_someone_elses_item_in_the_address_is_offered_as_unavailable(api_client_for, make_item):
    # Given dave's notebook, which bob may not use
    item = make_item(title="Dave's secret plans", created_by="dave")
    # When bob opens the new-workflow form naming it
    page = api_client_for("bob").get(f"/workflows/new?item={item.pk}").content.decode()
    # Then its title is not shown: only that item is not available to him
    assert "secret plans" not in page
    assert f'<option value="{item.pk}" selected>item {item.pk}</option>' in page


# -- edit ---------------------------------------------------------------------------------------


def test_the_edit_form_shows_the_current_definition(alice_api, make_item, make_workflow):
    # Given alice's workflow every 2 hours on her notebook
    item = make_item()
    workflow_id = make_workflow(["echo one"], name="nightly", item_id=str(item.pk), every_seconds=7200)
    # When she opens its edit form
    page = alice_api.get(f"/workflows/{workflow_id}/edit").content.decode()
    # Then it holds the name, the step, the interval in hours and the revision she edits
    assert 'value="nightly"' in page
    assert ">echo one</textarea>" in page
    assert 'name="every" value="2"' in page
    assert '<option value="hours" selected>' in page
    assert f'name="edited_revision_id" value="{workflow_id}:1"' in page


def test_saving_the_edit_form_adds_a_revision(alice_api, make_workflow):
    # Given alice's workflow at its first revision
    workflow_id = make_workflow(["echo one"])
    # When she saves it with another step
    response = alice_api.post(
        f"/workflows/{workflow_id}/edit", {**FORM, "steps": ["echo two"], "edited_revision_id": f"{workflow_id}:1"}
    )
    # Then a second revision is current with the new step, and she is told which
    assert response.status_code == 302
    assert workflows.read(workflow_id).meta.current_revision_id == f"{workflow_id}:2"
    assert workflows.read(workflow_id).data["steps"] == ["echo two"]
    assert f"Saved as revision {workflow_id}:2." in alice_api.get(response["Location"]).content.decode()


def test_saving_unchanged_data_adds_no_revision(alice_api, make_workflow):
    # Given alice's workflow
    workflow_id = make_workflow(["ls -la", "du -sh ."], name="Nightly checks", description="Lists the workspace.")
    # When she saves the form without a change
    alice_api.post(f"/workflows/{workflow_id}/edit", {**FORM, "edited_revision_id": f"{workflow_id}:1"})
    # Then no revision is added
    assert workflows.read(workflow_id).meta.revision_count == 1


def test_a_save_over_a_newer_revision_is_refused_keeping_what_was_typed(alice_api, make_workflow):
    # Given alice's workflow, changed elsewhere to a second revision after she opened its form
    workflow_id = make_workflow(["echo one"])
    workflows.update(workflow_id, {"name": "checks", "steps": ["echo elsewhere"]}, user="alice")
    before = _stored()
    # When she saves the form she opened at the first revision
    response = alice_api.post(
        f"/workflows/{workflow_id}/edit", {**FORM, "steps": ["echo mine"], "edited_revision_id": f"{workflow_id}:1"}
    )
    # Then it is refused, her step is still in the form, which now carries the newer revision, and nothing changed
    page = response.content.decode()
    assert response.status_code == 412
    assert ">echo mine</textarea>" in page
    assert f'name="edited_revision_id" value="{workflow_id}:2"' in page
    assert 'data-testid="conflict-notice"' in page
    assert _stored() == before


def test_an_item_no_longer_usable_stays_chosen_and_the_save_says_why(api_client_for):
    # Given bob's workflow on alice's investigation, from which alice then removed him
    investigation = investigation_create(title="Outage", actor=Actor("alice"), members=["bob"]).item
    bob = api_client_for("bob")
    workflow_id = workflows.create({"name": "probe", "steps": ["true"], "item_id": str(investigation.pk)}, user="bob")[
        "resource_id"
    ]
    InvestigationMember.objects.filter(investigation_id=investigation.pk, user_id="bob").delete()
    # When bob opens the edit form and saves it as it is
    form = bob.get(f"/workflows/{workflow_id}/edit").content.decode()
    response = bob.post(
        f"/workflows/{workflow_id}/edit",
        {**FORM, "item_id": str(investigation.pk), "edited_revision_id": f"{workflow_id}:1"},
    )
    # Then the form kept the item (without its title) and the save is refused saying why
    assert f'<option value="{investigation.pk}" selected>item {investigation.pk}</option>' in form
    assert "Outage" not in form
    assert response.status_code == 400
    assert escape("Item: no such item, or not yours") in response.content.decode()


def test_a_deleted_workflow_cannot_be_edited(alice_api, make_workflow):
    # Given alice's workflow, since deleted
    workflow_id = make_workflow(["echo one"])
    workflows.delete(workflow_id, user="alice")
    before = _stored()
    # When she posts its edit form
    response = alice_api.post(
        f"/workflows/{workflow_id}/edit", {**FORM, "steps": ["echo two"], "edited_revision_id": f"{workflow_id}:1"}
    )
    # Then she is sent to its page, which asks her to restore it first, and nothing changed
    assert response["Location"] == f"/workflows/{workflow_id}"
    assert "restore it before you edit it" in alice_api.get(response["Location"]).content.decode()
    assert _stored() == before


def test_a_save_that_dies_after_its_write_leaves_the_workflow_as_it_was(alice_api, make_workflow, monkeypatch):
    # Given alice's workflow, and a server that dies right after storing an edit
    workflow_id = make_workflow(["echo one"])
    before = _stored()
    stored_then_died = workflows.update_meta

    def dies_after_storing(*args, **kwargs):
        stored_then_died(*args, **kwargs)
        raise RuntimeError("the process died here")

    monkeypatch.setattr(workflows, "update_meta", dies_after_storing)
    # When she saves an edit
    with pytest.raises(RuntimeError):
        alice_api.post(
            f"/workflows/{workflow_id}/edit", {**FORM, "steps": ["echo two"], "edited_revision_id": f"{workflow_id}:1"}
        )
    # Then nothing of the edit is kept
    assert _stored() == before


def test_a_create_that_dies_after_its_write_stores_nothing(alice_api, monkeypatch):
    # Given a server that dies right after storing a new workflow
    stored_then_died = workflows.create_meta

    def dies_after_storing(*args, **kwargs):
        stored_then_died(*args, **kwargs)
        raise RuntimeError("the process died here")

    monkeypatch.setattr(workflows, "create_meta", dies_after_storing)
    # When alice submits the new-workflow form
    with pytest.raises(RuntimeError):
        alice_api.post("/workflows/new", FORM)
    # Then no workflow and no revision is stored
    assert _stored() == [0]
