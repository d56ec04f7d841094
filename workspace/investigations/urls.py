"""URLs of investigations (their items' own routes are the items app's)."""

from django.urls import path

from collab import converters as _converters  # noqa: F401 - registers <id:...>
from collab.web import html_or_api
from workspace.investigations import pages, views

_INVESTIGATION = "investigations/<id:investigation_id>"

urlpatterns = [
    path(
        "investigations",
        html_or_api(page=pages.investigations_page, api=views.InvestigationListCreateApi),
        name="investigations",
    ),
    path(_INVESTIGATION, html_or_api(page=pages.investigation_page, api=views.InvestigationApi), name="investigation"),
    path(f"{_INVESTIGATION}/members", views.InvestigationMembersApi.as_view(), name="investigation-members"),
    path(f"{_INVESTIGATION}/mentions", views.InvestigationMentionsApi.as_view(), name="investigation-mentions"),
    path(f"{_INVESTIGATION}/status", views.InvestigationStatusApi.as_view(), name="investigation-status"),
]
