"""`GET /healthz`: can this process reach its database and start sandboxes? For load balancers."""

from __future__ import annotations

import os
from typing import Any

import psycopg
from django.conf import settings
from django.db import connection
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from collab import clock
from collab.api import ServiceApiView
from workspace.items import pool
from workspace.items.config import get_config
from workspace.sandboxes.boundary import configured_boundary
from workspace.sandboxes.isolation import CgroupV1Driver, CgroupV2Driver, PrlimitDriver, configured_driver
from workspace.sandboxes.reach import passable_dirs, unreachable_reason
from workspace.sandboxes.registry import var_dir
from workspace.sandboxes.volumes import workspaces_root
from workspace.worker import latest_beat

# A probe a load balancer waits on must answer well within its own timeout.
HOST_TIMEOUT_SECONDS = 2.0


CHECK_STATES = ["ok", "failing"]


class CheckFailed(Exception):
    def __init__(self, message: str, *, extra: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.extra = extra or {}


class HostUsageSerializer(serializers.Serializer):
    cpu_cores = serializers.FloatField()
    memory_bytes = serializers.IntegerField()
    sandboxes = serializers.IntegerField()


class HostCapacitySerializer(serializers.Serializer):
    cpu_cores = serializers.FloatField()
    memory_bytes = serializers.IntegerField()
    sandboxes = serializers.IntegerField(allow_null=True, help_text="null: no bound on the count.")


class HostHealthSerializer(serializers.Serializer):
    host = serializers.CharField(help_text="Its address and port, as items name it.")
    url = serializers.CharField()
    state = serializers.ChoiceField(
        choices=["ok", "unreachable", "misconfigured", "draining"],
        help_text="misconfigured: it answers, but takes no sandbox until `problem` is fixed.",
    )
    capacity = HostCapacitySerializer(allow_null=True, help_text="What it offers in all (its own /healthz).")
    used = HostUsageSerializer(help_text="What the ledger counts live there.")
    problem = serializers.CharField(required=False, help_text="Why its last health call failed.")


class HealthOutputSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=CHECK_STATES)
    database = serializers.ChoiceField(choices=CHECK_STATES, required=False, help_text="Staff only.")
    sandbox_backend = serializers.ChoiceField(choices=CHECK_STATES, required=False, help_text="Staff only.")
    worker = serializers.ChoiceField(
        choices=CHECK_STATES, required=False, help_text="Staff only: has `manage.py worker` beaten lately?"
    )
    worker_beat_age_seconds = serializers.FloatField(
        required=False, allow_null=True, help_text="Staff only: seconds since the newest worker heartbeat."
    )
    backend = serializers.CharField(required=False, help_text="Staff only: `local` or `http`.")
    driver = serializers.CharField(required=False, help_text="local only: cgroup-v2, cgroup-v1 or prlimit.")
    hosts = HostHealthSerializer(many=True, required=False, help_text="Staff only, http backend: each sandbox host.")
    error = serializers.CharField(required=False, help_text="`unhealthy` when a check failed.")
    detail = serializers.CharField(required=False, help_text="What failed, check by check.")


def database_check() -> None:
    """SELECT 1 over a connection of its own, opened with a 2 s connect timeout, so a load
    balancer's probe answers (503) in time even when the database host never answers."""
    if connection.vendor == "postgresql":
        postgres_probe(probe_connection_params())
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any driver error means "cannot serve"
        raise CheckFailed(f"the database does not answer: {exc}") from exc


def postgres_probe(params: dict[str, Any]) -> None:
    try:
        with psycopg.connect(**params, autocommit=True) as probe:
            probe.execute("SELECT 1").fetchone()
    except Exception as exc:  # any driver error means "cannot serve"
        raise CheckFailed(f"the database does not answer: {exc}") from exc


def probe_connection_params() -> dict[str, Any]:
    params = {k: v for k, v in connection.get_connection_params().items() if k not in {"cursor_factory", "context"}}
    params["connect_timeout"] = int(HOST_TIMEOUT_SECONDS)
    return params


def _local_check() -> dict[str, Any]:
    driver = configured_driver()
    if isinstance(driver, CgroupV2Driver):
        group = driver.parent if driver.parent.exists() else driver.parent.parent
        if not os.access(group, os.W_OK):
            raise CheckFailed(f"the cgroup v2 group {group} is not writable")
    if isinstance(driver, CgroupV1Driver) and not driver.available:
        raise CheckFailed("no cgroup v1 controller is writable")
    if isinstance(driver, PrlimitDriver) and not driver.binary:
        raise CheckFailed("no writable cgroup and no prlimit binary: limits cannot be enforced")
    root = var_dir()
    try:
        passable_dirs(root)
    except OSError as exc:
        raise CheckFailed(f"the sandbox directory {root} cannot be created: {exc}") from exc
    if not os.access(root, os.W_OK):
        raise CheckFailed(f"the sandbox directory {root} is not writable")
    unreachable = unreachable_reason(workspaces_root(), configured_boundary().uid_for("0"))
    if unreachable:
        raise CheckFailed(unreachable)
    return {"driver": driver.name}


def sandbox_check(backend: str, *, database_ok: bool = True) -> dict[str, Any]:
    """Extra fields to report; raises CheckFailed when sandboxes cannot be started."""
    if backend != "http":
        return _local_check()
    if not database_ok:
        # The pool's reports live in the database: without it, each host is asked here.
        answers = pool.hosts_asked(list(pool.pool_urls()))
        if all(report is None for report, _problem in answers.values()):
            raise CheckFailed("; ".join(f"{url}: {problem}" for url, (_report, problem) in answers.items()))
        return {}
    pool.hosts_refresh()
    states = pool.pool_state()
    report = {"hosts": [state.as_report() for state in states]}
    if not any(state.takes_sandboxes for state in states):
        problems = [f"{state.name}: {state.problem or state.as_report()['state']}" for state in states]
        raise CheckFailed(f"no sandbox host takes new sandboxes ({'; '.join(problems)})", extra=report)
    return report


def worker_check() -> float:
    """Seconds since the newest worker heartbeat; raises CheckFailed when none is that recent, since
    then ingest, scheduled runs and lease expiry wait on nobody."""
    latest = latest_beat()
    if latest is None:
        raise CheckFailed("no `manage.py worker` has reported a heartbeat")
    age = (clock.now() - latest).total_seconds()
    if age > settings.WORKSPACE_WORKER_STALE_SECONDS:
        raise CheckFailed(
            f"the newest worker heartbeat is {age:.0f}s old (stale after {settings.WORKSPACE_WORKER_STALE_SECONDS:g}s)"
        )
    return age


def health_report() -> tuple[int, dict[str, Any]]:
    backend = get_config().sandbox.backend
    report: dict[str, Any] = {"status": "ok", "database": "ok", "sandbox_backend": "ok", "backend": backend}
    failures = []
    try:
        database_check()
    except CheckFailed as exc:
        report["database"] = "failing"
        failures.append(f"database: {exc}")
    if report["database"] == "ok":
        try:
            report["worker_beat_age_seconds"] = round(worker_check(), 1)
            report["worker"] = "ok"
        except CheckFailed as exc:
            report["worker"] = "failing"
            failures.append(f"worker: {exc}")
    try:
        report.update(sandbox_check(backend, database_ok=report["database"] == "ok"))
    except CheckFailed as exc:
        report.update(exc.extra)
        report["sandbox_backend"] = "failing"
        failures.append(f"sandbox_backend: {exc}")
    if not failures:
        return 200, report
    report.update(status="failing", error="unhealthy", detail="; ".join(failures))
    return 503, report


class HealthApi(ServiceApiView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        auth=[], responses={200: HealthOutputSerializer, 503: HealthOutputSerializer}, operation_id="healthz"
    )
    def get(self, request: Request) -> Response:
        """Anyone learns ok or failing (the status code and one word); only staff see which check
        failed and why, since the reasons name hosts, ports and paths."""
        status, report = health_report()
        if not _staff_asking(request):
            report = {"status": report["status"]}
            if status != 200:
                report.update(error="unhealthy", detail="A health check failed.")
        return Response(report, status=status)


def _staff_asking(request: Request) -> bool:
    # An identity someone stated (header, session, credentials), not the demo's default person.
    identity = getattr(request._request, "identity", None)
    return bool(identity and identity.is_staff and identity.source in ("header", "session", "basic", "token"))
