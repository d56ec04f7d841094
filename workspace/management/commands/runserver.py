"""`manage.py runserver` (`make run`): Django's, static files included, on a server that sends
each reply at once (`workspace.devserver`). It wins over Django's because the `workspace` app comes
before `django.contrib.staticfiles` in INSTALLED_APPS."""

from __future__ import annotations

from django.contrib.staticfiles.management.commands.runserver import Command as StaticFilesRunserver

from workspace.devserver import NoDelayWSGIServer


class Command(StaticFilesRunserver):
    server_cls = NoDelayWSGIServer
