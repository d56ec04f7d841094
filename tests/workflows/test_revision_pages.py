"""A workflow's revisions on its pages: whole ids with who and when, a revision compared with the
current one, and switching back after confirming on that comparison."""

from __future__ import annotations

import re

import pytest
from django.utils.html import escape

from workspace.workflows.generated import workflows

pytestmark = pytest.mark.django_db
HTML = {"HTTP_ACCEPT": "text/html"}
# Who wrote a revision and when: a machine-readable time and the time as shown.
BYLINE = re.compile(r'alice · <time datetime="\d{4}-\d\d-\d\dT[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</time>')


@pytest.fixture
def edited_workflow(make_item, make_workflow) -> tuple[str, int]:
    """alice's workflow on her notebook, then edited by her: a new name, one step changed, one added,
    hourly instead of manual. Returns its id and the notebook's."""
    item = make_item(title="Forecasts")
    workflow_id = make_workflow(["echo fetch", "echo report"], name="nightly")
    workflows.update(
        workflow_id,
        {
            "name": "nightly v2",
            "steps": ["echo fetch", "echo transform", "echo publish"],
            "item_id": str(item.pk),
            "every_seconds": 3600,
        },
        user="alice",
    )
    return workflow_id, item.pk


def test_the_workflow_page_shows_whole_revision_ids_with_who_and_when(alice_api, edited_workflow):
    # Given alice's workflow with two revisions
    workflow_id, _item_id = edited_workflow
    # When she opens its page
    page = alice_api.get(f"/workflows/{workflow_id}").content.decode()
    # Then both whole revision ids are listed, newest first, each with its author and time
    newest, oldest = page.index(f">{workflow_id}:2</code>"), page.index(f">{workflow_id}:1</code>")
    assert newest < oldest
    assert len(BYLINE.findall(page)) == 2


def test_the_comparison_shows_what_switching_back_would_change(alice_api, edited_workflow):
    # Given alice's edited workflow
    workflow_id, item_id = edited_workflow
    # When she compares its first revision with the current one
    page = alice_api.get(f"/workflows/{workflow_id}/revisions/{workflow_id}:1").content.decode()
    # Then the changed fields show both values, and the steps show what each revision alone holds
    assert '<del class="wf-del">nightly v2</del>' in page
    assert '<ins class="wf-ins">nightly</ins>' in page
    assert f'<del class="wf-del">Forecasts (#{item_id})</del>' in page
    assert '<del class="wf-del">every hour</del>' in page
    marks = [
        (line.split('data-mark="')[1][0], line.split("<code>")[1].split("</code>")[0])
        for line in page.split("<li ")
        if "data-mark=" in line
    ]
    assert marks == [(" ", "echo fetch"), ("-", "echo transform"), ("-", "echo publish"), ("+", "echo report")]


def test_the_comparison_takes_a_bounded_number_of_queries(alice_api, edited_workflow, django_assert_max_num_queries):
    # Given alice's edited workflow
    workflow_id, _item_id = edited_workflow
    # When she compares its first revision / Then it takes a few queries
    with django_assert_max_num_queries(6):
        alice_api.get(f"/workflows/{workflow_id}/revisions/{workflow_id}:1")


def test_the_current_revision_has_nothing_to_switch_back_to(alice_api, edited_workflow):
    # Given alice's edited workflow
    workflow_id, _item_id = edited_workflow
    # When she opens its current revision
    page = alice_api.get(f"/workflows/{workflow_id}/revisions/{workflow_id}:2").content.decode()
    # Then it says so and offers no switch
    assert 'data-testid="is-current"' in page
    assert 'data-testid="confirm-switch"' not in page


def test_switching_back_makes_the_earlier_revision_current_and_keeps_the_history(alice_api, edited_workflow):
    # Given alice's edited workflow
    workflow_id, _item_id = edited_workflow
    # When she confirms switching back to the first revision on its comparison
    response = alice_api.post(
        f"/workflows/{workflow_id}/revisions/{workflow_id}:1/switch", {"compared_with": f"{workflow_id}:2"}
    )
    # Then the first revision is current with its steps, both revisions remain, and she is told so
    stored = workflows.read(workflow_id)
    assert stored.meta.current_revision_id == f"{workflow_id}:1"
    assert stored.data["steps"] == ["echo fetch", "echo report"]
    assert workflows.list_revisions(workflow_id).total == 2
    landing = alice_api.get(response["Location"]).content.decode()
    assert escape(f"Revision {workflow_id}:2 stays in the history.") in landing


def test_a_switch_confirmed_before_a_newer_save_is_refused_and_changes_nothing(alice_api, edited_workflow):
    # Given alice's edited workflow, saved a third time after she compared revision 1 with revision 2
    workflow_id, _item_id = edited_workflow
    workflows.update(workflow_id, {"name": "nightly v3", "steps": ["echo v3"]}, user="alice")
    # When she confirms the switch she looked at
    response = alice_api.post(
        f"/workflows/{workflow_id}/revisions/{workflow_id}:1/switch", {"compared_with": f"{workflow_id}:2"}
    )
    # Then it is refused, the comparison is shown against the newest revision, and the third stays current
    page = response.content.decode()
    assert response.status_code == 412
    assert 'data-testid="refusal"' in page
    assert f'name="compared_with" value="{workflow_id}:3"' in page
    assert workflows.read(workflow_id).meta.current_revision_id == f"{workflow_id}:3"


def test_switching_back_takes_a_post(alice_api, edited_workflow):
    # Given alice's edited workflow
    workflow_id, _item_id = edited_workflow
    # When the switch address is merely visited
    response = alice_api.get(f"/workflows/{workflow_id}/revisions/{workflow_id}:1/switch")
    # Then nothing switches
    assert response.status_code == 405
    assert workflows.read(workflow_id).meta.current_revision_id == f"{workflow_id}:2"


def test_an_unknown_revision_is_404(alice_api, edited_workflow):
    # Given alice's edited workflow
    workflow_id, _item_id = edited_workflow
    # When she opens a revision it never had / Then it is the site's 404
    response = alice_api.get(f"/workflows/{workflow_id}/revisions/{workflow_id}:9", **HTML)
    assert response.status_code == 404
    assert "Not found" in response.content.decode()


def test_a_revision_of_another_workflow_is_404(alice_api, edited_workflow, make_workflow):
    # Given alice's edited workflow and another workflow of hers
    workflow_id, _item_id = edited_workflow
    other_id = make_workflow(["true"], name="other")
    # When she opens the other's revision under the first workflow / Then it is the site's 404
    assert alice_api.get(f"/workflows/{workflow_id}/revisions/{other_id}:1").status_code == 404
