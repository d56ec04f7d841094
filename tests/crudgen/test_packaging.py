"""crudgen as a distribution: a wheel built from this repository, installed alone into a fresh
virtualenv, serves a registered model over HTTP. Nothing is downloaded: the build backend is the
pinned flit_core of this virtualenv, and the fresh one sees only crudgen's declared dependencies,
linked from this virtualenv's site-packages."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import urllib.request
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
OURS = ("workspace", "collab", "knowledge", "quotas", "tests", "bench")

SERVER = textwrap.dedent(
    """
    import sys
    from dataclasses import dataclass
    from wsgiref.simple_server import WSGIRequestHandler, make_server

    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="packaging-test",
        ALLOWED_HOSTS=["127.0.0.1"],
        USE_TZ=True,
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "rest_framework", "crudgen"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]}},
        ROOT_URLCONF="__main__",
        MIDDLEWARE=[],
    )
    django.setup()

    from crudgen import CRUDSystem, DjangoStorage


    @dataclass
    class Todo:
        title: str
        done: bool = False
        priority: int = 0


    system = CRUDSystem(storage_factory=DjangoStorage)
    system.register_model(Todo, indexed_fields=("priority",))
    urlpatterns = system.create_router("api")

    from django.core.management import call_command
    from django.core.wsgi import get_wsgi_application

    call_command("migrate", verbosity=0)
    system.ensure_indexes()


    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass


    server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=Quiet)
    print(server.server_port, flush=True)
    server.serve_forever()
    """
)

PROBE = textwrap.dedent(
    """
    import importlib.util, json, sys
    import crudgen
    print(json.dumps({
        "crudgen": crudgen.__file__,
        "version": crudgen.__version__,
        "ours": [name for name in sys.argv[1:] if importlib.util.find_spec(name)],
        "extras": [name for name in ("drf_spectacular", "msgpack") if importlib.util.find_spec(name)],
    }))
    """
)


def _closure(requirements: list[str]) -> set[str]:
    """Installed distributions that `requirements` need, transitively (extras and markers left out)."""
    seen: set[str] = set()
    pending = [Requirement(line) for line in requirements]
    while pending:
        requirement = pending.pop()
        if requirement.marker and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = metadata.distribution(requirement.name).metadata["Name"]
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        pending += [Requirement(line) for line in metadata.requires(name) or []]
    return seen


def _link_farm(target: Path, distributions: set[str]) -> None:
    """A directory of links to exactly these distributions' packages and metadata."""
    target.mkdir()
    for name in distributions:
        dist = metadata.distribution(name)
        site = Path(dist.locate_file(""))
        for top in {Path(str(entry)).parts[0] for entry in dist.files or [] if not str(entry).startswith("..")}:
            link = target / top
            if not link.exists() and (site / top).exists():
                link.symlink_to(site / top)


def _offline_env() -> dict[str, str]:
    """This environment with pip told of no index, wheelhouse or configuration: only what is installed counts."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PIP_") and k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE"}
    }
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}


def _wheel_requirements(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(name).decode()
    return re.findall(r"^Requires-Dist: (.+)$", text, re.M)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheelhouse")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-build-isolation",
            "--no-deps",
            "--no-index",
            "-q",
            "-w",
            out,
            ROOT,
        ],
        check=True,
        capture_output=True,
        env=_offline_env(),
    )
    (built,) = out.glob("crudgen-*.whl")
    return built


def test_the_wheel_holds_only_crudgen_with_its_version_changelog_and_declared_dependencies(wheel: Path) -> None:
    # Given the wheel built from the repository
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    # When its contents and metadata are read
    requirements = {Requirement(line).name: str(Requirement(line).marker or "") for line in _wheel_requirements(wheel)}
    # Then it holds the crudgen package (changelog and guide included), and needs no project of ours
    import crudgen

    assert tops == {"crudgen", f"crudgen-{crudgen.__version__}.dist-info"}
    assert {"crudgen/CHANGELOG.md", "crudgen/docs/from-autocrud-0.2.md", "crudgen/migrations/0001_initial.py"} <= names
    assert {name for name, marker in requirements.items() if not marker} == {
        "Django",
        "djangorestframework",
        "django-filter",
        "msgspec",
        "jsonpatch",
    }
    assert requirements["drf-spectacular"] == 'extra == "openapi"'
    assert requirements["msgpack"] == 'extra == "msgpack"'


def test_installed_alone_into_a_fresh_virtualenv_it_serves_a_model_over_http(wheel: Path, tmp_path: Path) -> None:
    # Given a fresh virtualenv that sees only crudgen's declared dependencies (no index, no download)
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    _link_farm(tmp_path / "deps", _closure([r for r in _wheel_requirements(wheel) if "extra ==" not in r]))
    (site / "crudgen-test-deps.pth").write_text(f"{tmp_path / 'deps'}\n")
    env = _offline_env()
    # When the wheel is installed there, resolving its dependencies without any index
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--no-index", "--no-cache-dir", "-q", wheel],
        check=True,
        capture_output=True,
        env=env,
    )
    probe = json.loads(
        subprocess.run(
            [python, "-c", PROBE, *OURS], cwd=tmp_path, check=True, capture_output=True, text=True, env=env
        ).stdout
    )
    (tmp_path / "serve.py").write_text(SERVER)
    server = subprocess.Popen(
        [python, "serve.py", str(tmp_path / "db.sqlite3")],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(server.stdout.readline() or 0)
        assert port, server.stderr.read()
        base = f"http://127.0.0.1:{port}/api/todos"
        created = _call("POST", base, {"title": "milk", "priority": 3})
        _call("POST", base, {"title": "bread", "priority": 1})
        filtered = _call("GET", f"{base}/data?priority=3")
        read = _call("GET", f"{base}/{created['resource_id']}/data")
    finally:
        server.terminate()
        server.wait(timeout=10)
    # Then crudgen comes from the virtualenv, nothing of ours nor an extra is importable, and the
    # model is served: created, filtered in SQL and read back
    assert probe["crudgen"].startswith(str(site))
    assert (probe["ours"], probe["extras"]) == ([], [])
    assert filtered["total"] == 1
    assert read == {"title": "milk", "done": False, "priority": 3}


def _call(method: str, url: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())
