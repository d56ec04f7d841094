"""Browser: mention a colleague and see their bell rise; move the status and see the member notified."""

from __future__ import annotations

import pytest

from workspace.investigations import services

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def private_workspaces(settings, tmp_path):
    settings.WORKSPACE_VAR_DIR = tmp_path / "var"
    settings.WORKSPACE_CGROUP_ROOT = str(tmp_path / "cgroup")
    settings.WORKSPACE_CGROUP_DRIVER = "prlimit"


def test_mentioning_a_colleague_raises_their_bell_count(page_as):
    # Given alice's investigation, and carol's bell at zero
    investigation = services.investigation_create(title="Latency spike", user_id="alice")
    carol = page_as("carol")
    carol.goto("/")
    assert carol.locator("[data-testid=bell-count]").inner_text() == "0"

    # When alice picks carol in the mention search and sends her a note
    alice = page_as("alice")
    alice.goto(f"/investigations/{investigation.pk}")
    alice.fill("[data-testid=mention-search]", "car")
    alice.click("[data-testid=mention-options] button[data-user-id=carol]")
    alice.fill("[data-testid=mention-note]", "can you check the data pipeline?")
    alice.click("[data-testid=mention-send]")
    alice.locator("[data-testid=message][data-role=mention]").filter(has_text="data pipeline").wait_for()
    # Then carol is listed among the members
    assert "carol" in alice.locator("[data-testid=members]").inner_text()

    # Then carol's bell shows one after a reload, and she may open the investigation
    carol.reload()
    assert carol.locator("[data-testid=bell-count]").inner_text() == "1"
    carol.goto(f"/investigations/{investigation.pk}")
    assert carol.locator("h1").inner_text().startswith("Latency spike")


def test_moving_the_status_notifies_the_member(page_as):
    # Given alice's investigation with bob as member
    investigation = services.investigation_create(title="Disk alerts", user_id="alice", members=["bob"])
    # When alice moves its status to in progress on the page
    alice = page_as("alice")
    alice.goto(f"/investigations/{investigation.pk}")
    alice.select_option("[data-testid=status-select]", "in_progress")
    alice.click("[data-testid=status-move]")
    alice.locator("[data-testid=status]").filter(has_text="In progress").wait_for()

    # Then bob's bell shows one and his notifications say the investigation is now in progress
    bob = page_as("bob")
    bob.goto("/notifications")
    assert bob.locator("[data-testid=bell-count]").inner_text() == "1"
    assert "Disk alerts is now in progress" in bob.content()
