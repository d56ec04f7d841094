"""Which status an asker's message asks for (workspace/agent/status_asks.py): a phrase naming the
status counts; the same words about something else, in code or a quote, negated, questioned or
made conditional do not."""

from __future__ import annotations

import pytest

from workspace.agent.status_asks import status_asked


@pytest.mark.parametrize(
    ("message", "status"),
    [
        ("Set the status to closed.", "closed"),
        ("change its status to in progress", "in_progress"),
        ("Set the investigation's status to open.", "open"),
        ("set status: resolved", "resolved"),
        ("Close this investigation.", "closed"),
        ("Thanks. Close the incident now.", "closed"),
        ("Could you close this investigation?", "closed"),
        ("We fixed it, please resolve this.", "resolved"),
        ("Mark it resolved.", "resolved"),
        ("mark this investigation as closed", "closed"),
        ("Move it to in_progress", "in_progress"),
        ("Reopen the investigation please.", "open"),
        ("@status closed", "closed"),
    ],
)
def test_a_phrase_naming_the_status_asks_for_it(message, status):
    # Given a message that asks for a status in so many words
    # When it is read / Then it asks for that status
    assert status_asked(message, status)


@pytest.mark.parametrize(
    ("message", "status"),
    [
        # the word about something else
        ("What happened around the closing of the checkout window?", "closed"),
        ("Open the log and tell me what failed.", "open"),
        ("Help me resolve this error.", "resolved"),
        ("The deploy status was set to closed by the script.", "closed"),
        ("Set it to open the log on start.", "open"),
        ("The ticket is resolved.", "resolved"),
        ("Close it.", "closed"),
        # another status than the one asked
        ("Set the status to closed.", "resolved"),
        # pasted, not asked
        ("```\nset the status to closed\n```", "closed"),
        ("> Set the status to closed.", "closed"),
        ("Run `@status closed` for me?", "closed"),
        # negated, questioned, conditional
        ("Don't close this investigation yet.", "closed"),
        ("I can't close the investigation lock.", "closed"),
        ("Why did you close the investigation?", "closed"),
        ("Should we mark it resolved?", "resolved"),
        ("If the fix holds, close the investigation.", "closed"),
        ("Close the investigation once the alerts stop.", "closed"),
        # a status that is not one
        ("Set the status to closed.", "archived"),
        # typographic apostrophes negate as plain ones do
        ("Don\u2019t close this investigation", "closed"),
        ("We shouldn\u2019t close the investigation yet", "closed"),
        # quoted, fenced other ways, indented
        ('The runbook step 4 says "close the incident" - ignore that for now', "closed"),
        ("The runbook says \u201cclose the incident\u201d", "closed"),
        ("The runbook says 'close the incident' at the end", "closed"),
        ("Summarise this log\n~~~\nset the status to closed\n~~~", "closed"),
        ("Summarise this log\n```\nset the status to closed", "closed"),
        ("Summarise this log:\n\n    set the status to closed\n", "closed"),
        ("Summarise <pre>set the status to closed</pre>", "closed"),
        # reported, refused, or someone else's wish
        ("Somebody keeps trying to close this investigation, please stop it", "closed"),
        ("Stop trying to close the investigation", "closed"),
        ("Refuse to close the investigation", "closed"),
        ("Let me know before you close this investigation", "closed"),
        ("Bob wants to close the investigation but I disagree", "closed"),
        ("Someone tried to close this investigation yesterday", "closed"),
        # asked as a question
        ("Would it be wise to close this investigation?", "closed"),
        ("Can we close this investigation?", "closed"),
        # about another object
        ("close the incident channel in Slack", "closed"),
        ("Reopen the incident report PDF and read it", "open"),
        ("Mark it as closed in Jira", "closed"),
        ("set its status to closed in PagerDuty", "closed"),
    ],
)
def test_the_same_words_about_something_else_ask_for_nothing(message, status):
    # Given a message whose status words are incidental, pasted, negated, questioned or conditional
    # When it is read / Then it asks for no status move
    assert not status_asked(message, status)


def test_one_sentence_asking_is_enough_among_others_that_do_not():
    # Given a message whose first sentence mentions closing and whose last asks for the move
    message = "The closing of the checkout window went badly.\nThe fix is out. Set the status to resolved."
    # When it is read / Then it asks for resolved, and for nothing else
    assert status_asked(message, "resolved")
    assert not status_asked(message, "closed")
