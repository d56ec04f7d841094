"""How a refusal reads on a page (items/refusal.html), issue 47 point 11: several binding limits are
one list, the first named first, not a paragraph followed by bullets."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.test import RequestFactory

from collab.errors import QuotaExceeded
from quotas.services import quota_error


def _quota(dimension: str) -> QuotaExceeded:
    return QuotaExceeded(
        error="sandbox_quota_exceeded",
        detail=f"Opening a sandbox would exceed alice's {dimension} limit.",
        dimension=dimension,
    )


def _rendered(refused: QuotaExceeded) -> str:
    return render_to_string("items/refusal.html", {"refused": refused}, request=RequestFactory().get("/"))


def test_a_refusal_by_several_limits_lists_them_all_alike_the_first_named_first():
    # Given a refusal naming the sandboxes limit, cpu and memory binding too
    refused = quota_error([_quota("sandboxes"), _quota("cpu"), _quota("memory")])

    # When the page shows it
    html = _rendered(refused)

    # Then all three are items of one list, in that order, and none stands outside it
    items = [part.split("</li>")[0] for part in html.split("<li>")[1:]]
    assert items == [
        "Opening a sandbox would exceed alice&#x27;s sandboxes limit.",
        "Opening a sandbox would exceed alice&#x27;s cpu limit.",
        "Opening a sandbox would exceed alice&#x27;s memory limit.",
    ]
    assert "<span>" not in html


def test_a_refusal_by_one_limit_is_one_sentence():
    # Given a refusal by the cpu limit alone / When the page shows it / Then it is a sentence, no list
    html = _rendered(_quota("cpu"))
    assert "<span>Opening a sandbox would exceed alice&#x27;s cpu limit.</span>" in html
    assert "<li>" not in html
