"""Browser: fill a person's sandbox quota, see the 507 on the item page, close a sandbox on My resources, succeed."""

from __future__ import annotations

import pytest

from workspace.config import DEFAULT_APPS_DIR, forget_loaded_config
from workspace.filestore import workspace_dir
from workspace.models import Item

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def one_sandbox_each(settings, tmp_path):
    settings.WORKSPACE_VAR_DIR = tmp_path / "var"
    settings.WORKSPACE_CGROUP_ROOT = str(tmp_path / "cgroup")
    settings.WORKSPACE_CGROUP_DRIVER = "prlimit"
    config = tmp_path / "workspace.toml"
    config.write_text("[resources.per_user]\ncount = 1\n")
    settings.WORKSPACE_CONFIG = str(config)
    settings.WORKSPACE_APPS_DIR = str(DEFAULT_APPS_DIR)
    forget_loaded_config()
    yield
    from workspace.sandboxes.lifecycle import sandbox_close

    for item in Item.objects.all():
        sandbox_close(item=item)
    forget_loaded_config()


def _item(title: str) -> Item:
    item = Item(app_slug="notebook", title=title, owner="bob")
    item.stamp_created("bob")
    item.save()
    workspace_dir(item.pk).mkdir(parents=True, exist_ok=True)
    return item


def _run(page, command: str) -> None:
    page.fill("[data-testid=exec-command]", command)
    page.click("[data-testid=exec-run]")


def test_a_full_quota_is_refused_with_a_way_out_and_closing_a_sandbox_frees_it(page_as):
    first, second = _item("First notebook"), _item("Second notebook")
    page = page_as("bob")

    page.goto(f"/a/notebook/items/{first.pk}")
    _run(page, "echo one")
    page.locator("[data-testid=exec-output]").filter(has_text="[exit 0]").wait_for()

    page.goto(f"/a/notebook/items/{second.pk}")
    _run(page, "echo two")
    refusal = page.locator("[data-testid=exec-output] [data-testid=refusal]")
    refusal.wait_for()
    assert "sandboxes limit" in refusal.inner_text()
    refusal.get_by_role("link", name="Free capacity on My resources").click()

    page.wait_for_url("**/my-resources")
    live = page.locator(f"[data-testid=live-{first.pk}]")
    assert "First notebook" in live.inner_text()
    page.click(f"[data-testid=close-{first.pk}]")
    page.wait_for_selector("text=The sandbox is shut down.")
    page.wait_for_selector("[data-testid=no-live]")

    page.goto(f"/a/notebook/items/{second.pk}")
    _run(page, "echo two")
    output = page.locator("[data-testid=exec-output]")
    output.filter(has_text="[exit 0]").wait_for()
    assert "two" in output.inner_text()
