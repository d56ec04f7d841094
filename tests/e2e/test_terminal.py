"""Browser, at a desktop width and at 390 px: the item page's terminal streams a command's output
while it runs, shows that it runs and when it will be stopped, keeps commands in order in their own
blocks, says why one ended (its time limit, the memory limit with its size, stopped by whom, its
sandbox closed by whom; issue 30.3), stops one from its block without closing the sandbox (30.4),
asks before closing the sandbox and says it did (30.8), keeps the Sandbox card and the file list
current, makes a 507 readable with every limit that bound, and keeps its transcript across a page
load."""

from __future__ import annotations

import pytest

from tests.e2e.browser import assert_accessible, assert_no_sideways_scroll, screenshot, wait_until_ended
from tests.fixtures.items import isolation_or_skip

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def one_sandbox_of_one_core_each(deployment) -> None:
    deployment("[sandbox]\nexec_timeout = '3s'\n[resources.per_user]\ncount = 1\ncpu = 1\n")


def _run(page, command: str) -> None:
    page.fill("[data-testid=exec-command]", command)
    page.press("[data-testid=exec-command]", "Enter")


def _open_notebook(page_as, make_notebook, viewport, title: str):
    """bob's new notebook `title`, open on its page in his browser at the viewport's width."""
    item = make_notebook(title)
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{item.pk}")
    return page


def _status(block) -> str:
    return block.locator("[data-testid=exec-status]").inner_text()


# The exec stream, as the page's fetch receives it: a command's start and its result (killed for
# memory), then held open until the test ends it, as a slow connection or a loaded server holds it.
HELD_OPEN_AFTER_ITS_RESULT = """
const realFetch = window.fetch;
window.fetch = function (url, options) {
  if (!(options && options.method === "POST" && String(url).endsWith("/exec"))) return realFetch.apply(this, arguments);
  const events = 'event: started\\ndata: {"exec_id": null, "timeout_seconds": 60, "sandbox_opened": false}\\n\\n'
    + 'event: result\\ndata: {"exit_code": 137, "reason": "memory_limit", "duration_ms": 900}\\n\\n';
  const body = new ReadableStream({start(controller) {
    controller.enqueue(new TextEncoder().encode(events));
    window.endExecStream = () => controller.close();
  }});
  return Promise.resolve(new Response(body, {status: 200, headers: {"Content-Type": "text/event-stream"}}));
};
"""


def test_a_result_that_arrives_before_the_stream_closes_stays_the_blocks_status(page_as, make_notebook, viewport):
    # Given bob's notebook page, whose exec stream stays open a while after the command's result
    item = make_notebook("Slow close")
    page = page_as("bob", viewport=viewport)
    page.clock.install()
    page.add_init_script(HELD_OPEN_AFTER_ITS_RESULT)
    page.goto(f"/a/notebook/items/{item.pk}")
    # When a command's result (killed for memory) arrives, seconds pass, and then the stream closes
    _run(page, "python3 hungry.py")
    block = page.locator("[data-testid=exec-block]").first
    block.locator("pre", has_text="[exit 137]").wait_for()
    page.clock.run_for(3000)
    page.evaluate("window.endExecStream()")
    # Then the block keeps the result's status, and never says the connection ended before the command
    page.wait_for_function("!document.querySelector('[data-testid=exec-block] .ws-run-output').closest('.running')")
    assert _status(block) == "exit 137 · killed: out of memory"
    assert "the connection ended before the command did" not in block.inner_text()


def _running(deployment, page_as, make_notebook, viewport, title: str, command: str):
    """bob's notebook `title` running `command` (which prints `started` first, well within its
    minute); returns the page and the command's block once `started` is out."""
    deployment("[sandbox]\nexec_timeout = '60s'\n")
    page = _open_notebook(page_as, make_notebook, viewport, title)
    _run(page, command)
    block = page.locator("[data-testid=exec-block]").first
    block.locator("pre", has_text="started").wait_for()
    page.wait_for_selector("[data-testid=close-sandbox]")
    return page, block


def test_output_streams_while_the_command_runs_and_the_next_waits_in_its_own_block(page_as, make_notebook, viewport):
    # Given bob's notebook, before any sandbox is open
    page = _open_notebook(page_as, make_notebook, viewport, "Terminal")
    page.wait_for_selector("[data-testid=no-sandbox]")
    # When he runs a command that prints, waits two seconds and prints again, and a quick one straight after
    _run(page, "echo first; sleep 2; echo first-done")
    _run(page, "echo second")
    blocks = page.locator("[data-testid=exec-block]")
    # Then the first line shows while the command still runs, and the second command waits its turn
    blocks.nth(0).locator("pre", has_text="first").wait_for()
    assert blocks.nth(0).locator("pre").inner_text() == "first\n"
    assert _status(blocks.nth(0)).startswith("running")
    assert _status(blocks.nth(1)) == "queued"
    # Then the Sandbox card shows the sandbox the run opened while the run is still going
    page.wait_for_selector("[data-testid=sandbox-id]")
    assert _status(blocks.nth(0)).startswith("running")
    screenshot(page, "terminal-running")
    # Then each output ends in its own block, in the order the commands were given
    blocks.nth(1).filter(has_text="[exit 0]").wait_for()
    assert blocks.nth(0).locator("pre").inner_text() == "first\nfirst-done\n[exit 0]\n"
    assert blocks.nth(1).locator("pre").inner_text() == "second\n[exit 0]\n"
    assert _status(blocks.nth(0)).startswith("exit 0")
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, "terminal-done")


def test_a_running_command_says_when_it_will_be_stopped_and_a_timeout_says_so(page_as, make_notebook, viewport):
    # Given bob's notebook in a deployment whose commands are stopped after three seconds
    page = _open_notebook(page_as, make_notebook, viewport, "Slow")
    # When he runs a command that prints and then sleeps for thirty
    _run(page, "echo waiting; sleep 30")
    block = page.locator("[data-testid=exec-block]").first
    # Then while it runs its block says when it will be stopped
    block.locator("[data-testid=exec-status]", has_text="stops at 3 s").wait_for()
    # Then its block ends saying it timed out, and keeps what it printed
    block.locator("[data-testid=exec-status]", has_text="timed out").wait_for()
    assert _status(block).startswith("timed out after 3")
    assert "waiting\n\n[It ran past its time limit of 3 s and was stopped.]" in block.locator("pre").inner_text()
    assert_accessible(page)
    screenshot(page, "terminal-timed-out")


def test_a_quota_refusal_is_readable_lists_every_limit_and_links_to_my_resources(page_as, make_notebook, viewport):
    # Given bob already runs his one sandbox of 1 core
    first, second = make_notebook("First"), make_notebook("Second")
    page = page_as("bob", viewport=viewport)
    page.goto(f"/a/notebook/items/{first.pk}")
    _run(page, "true")
    page.locator("[data-testid=exec-block]").filter(has_text="[exit 0]").wait_for()
    # When he runs a command in another notebook
    page.goto(f"/a/notebook/items/{second.pk}")
    _run(page, "true")
    refusal = page.locator("[data-testid=exec-output] [data-testid=refusal]")
    refusal.wait_for()
    # Then the refusal names the count and, below it, the cpu limit, and links to My resources
    assert "sandboxes limit" in refusal.inner_text()
    assert "cpu" in refusal.locator(".refusal-also").inner_text()
    assert refusal.get_by_role("link", name="Free capacity on My resources").is_visible()
    assert _status(page.locator("[data-testid=exec-block]").first) == "refused: over a limit"
    # Then it is dark text on its light box, which axe-core's contrast check passes
    assert refusal.evaluate("node => getComputedStyle(node).color") == "rgb(59, 29, 0)"
    assert_no_sideways_scroll(page)
    assert_accessible(page)
    screenshot(page, "terminal-refused")
    # When he loads the page again
    page.reload()
    # Then the refusal is still in its block
    page.locator("[data-testid=exec-output] [data-testid=refusal]", has_text="sandboxes limit").wait_for()


def test_a_run_whose_sandbox_is_stopped_leaves_the_card_saying_so(
    settings, deployment, page_as, make_notebook, viewport
):
    # Given bob's notebook in a deployment whose workspaces hold 8K and are measured after each command
    deployment("[sandbox]\nworkspace_quota = '8K'\n")
    settings.WORKSPACE_DISK_ENFORCEMENT = "measure"
    page = _open_notebook(page_as, make_notebook, viewport, "Full")
    _run(page, "true")
    page.wait_for_selector("[data-testid=sandbox-id]")
    # When he runs a command that writes past the workspace limit
    _run(page, "head -c 2000000 /dev/zero > big.bin")
    # Then the block says the sandbox was stopped, and the Sandbox card and the file list follow
    block = page.locator("[data-testid=exec-block]").nth(1)
    # (the sentence comes in the stream's output, the status with its result a moment later)
    block.locator("[data-testid=exec-status]", has_text="sandbox stopped").wait_for()
    assert _status(block) == "exit 0 · sandbox stopped"
    assert "its sandbox was stopped" in block.locator("pre").inner_text()
    page.wait_for_selector("[data-testid=no-sandbox]")
    page.wait_for_selector("[data-testid=file-row][data-path='big.bin']")
    screenshot(page, "terminal-sandbox-stopped")


def test_the_transcript_outlives_a_page_load_and_arrows_recall_commands(page_as, make_notebook, viewport):
    # Given bob ran two commands in his notebook, the second writing a file
    page = _open_notebook(page_as, make_notebook, viewport, "Memory")
    _run(page, "echo remembered")
    _run(page, "echo data > made-here.txt")
    page.locator("[data-testid=exec-block]").nth(1).filter(has_text="[exit 0]").wait_for()
    # Then the file list shows the file the command wrote, without a page load
    page.wait_for_selector("[data-testid=file-row][data-path='made-here.txt']")
    # When he reloads the page and presses the up arrow twice in the command field
    page.reload()
    page.press("[data-testid=exec-command]", "ArrowUp")
    page.press("[data-testid=exec-command]", "ArrowUp")
    # Then both blocks are still there and the field holds the first command
    blocks = page.locator("[data-testid=exec-block]")
    assert blocks.count() == 2
    assert "remembered\n[exit 0]" in blocks.nth(0).inner_text()
    assert page.input_value("[data-testid=exec-command]") == "echo remembered"
    # When he clears the terminal
    page.click("[data-testid=exec-clear]")
    # Then no block is left, after a reload too
    assert blocks.count() == 0
    page.reload()
    assert page.locator("[data-testid=exec-block]").count() == 0


def test_closing_the_sandbox_stops_a_running_command_in_its_block(deployment, page_as, make_notebook, viewport):
    # Given bob's notebook running a command that prints and then sleeps, well within its minute
    page, block = _running(deployment, page_as, make_notebook, viewport, "Runaway", "echo started; sleep 20")
    # When he closes the sandbox from its card, and is asked first
    asked: list[str] = []
    page.once("dialog", lambda dialog: (asked.append(dialog.message), dialog.accept()))
    page.click("[data-testid=close-sandbox]")
    # Then the command ends in its block saying he closed its sandbox, on the same page, and the
    # card says no sandbox is live and that it shut it down
    status = block.locator("[data-testid=exec-status]")
    wait_until_ended(page, status)
    assert asked
    assert "Close the sandbox of Runaway?" in asked[0]
    assert status.get_attribute("data-state") == "failed", block.inner_text()
    assert status.inner_text() == "exit 137 · sandbox closed by bob"
    assert block.locator("pre").inner_text().startswith("started\n")
    assert "[bob closed its sandbox while it ran.]" in block.locator("pre").inner_text()
    page.wait_for_selector("[data-testid=no-sandbox]")
    assert "The sandbox is shut down" in page.locator("[data-testid=sandbox-closed]").inner_text()


def test_a_running_command_is_stopped_from_its_block_and_the_sandbox_stays(
    deployment, page_as, make_notebook, viewport
):
    # Given bob's notebook running a command that prints and then sleeps, well within its minute
    page, block = _running(deployment, page_as, make_notebook, viewport, "Long job", "echo started; sleep 30")
    # When he presses the block's Stop button
    stop = block.get_by_role("button", name="Stop echo started; sleep 30")
    assert_no_sideways_scroll(page)
    stop.click()
    # Then the block ends saying he stopped it, the button goes, and the sandbox is still live
    block.locator("[data-testid=exec-status]", has_text="stopped by bob").wait_for(timeout=30_000)
    assert "[bob stopped it before it finished.]" in block.locator("pre").inner_text()
    assert stop.is_hidden()
    page.wait_for_selector("[data-testid=sandbox-id]")
    # When he runs another command / Then it runs in the same sandbox at once
    _run(page, "echo again")
    page.locator("[data-testid=exec-block]").nth(1).locator("[data-testid=exec-status]", has_text="exit 0").wait_for()
    assert_accessible(page)
    screenshot(page, "terminal-stopped")


def test_cancelling_the_close_question_leaves_the_sandbox_and_its_command(deployment, page_as, make_notebook, viewport):
    # Given bob's notebook running a command
    page, block = _running(deployment, page_as, make_notebook, viewport, "Careful", "echo started; sleep 3")
    # When he presses Close sandbox and answers Cancel
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("[data-testid=close-sandbox]")
    # Then the command ends by itself and the sandbox is still live
    block.locator("[data-testid=exec-status]", has_text="exit 0").wait_for(timeout=30_000)
    assert page.locator("[data-testid=sandbox-id]").is_visible()


def test_a_command_killed_for_memory_says_the_limit(settings, deployment, page_as, make_notebook, viewport):
    # Given real cgroups, and bob's notebook, whose sandboxes hold the notebook app's 512M of memory
    isolation_or_skip()
    deployment("[sandbox]\nexec_timeout = '60s'\n")
    settings.WORKSPACE_CGROUP_ROOT = "/sys/fs/cgroup"
    settings.WORKSPACE_CGROUP_DRIVER = "auto"
    page = _open_notebook(page_as, make_notebook, viewport, "Hungry")
    # When he runs a program that fills a gigabyte
    _run(page, "python3 -c \"a = bytearray(1024 ** 3); a[::4096] = b'x' * len(a[::4096])\"")
    block = page.locator("[data-testid=exec-block]").first
    # Then the block says the kernel killed it at the sandbox's 512 MB memory limit, not only "exit 137"
    status = block.locator("[data-testid=exec-status]")
    wait_until_ended(page, status, timeout_ms=60_000)
    assert _status(block) == "exit 137 · killed: out of memory", block.inner_text()
    assert "whole memory limit of 512 MB" in block.locator("pre").inner_text()
    assert_no_sideways_scroll(page)
    screenshot(page, "terminal-out-of-memory")
