"""Runs the client generators on a schema file, and fails on anything they say about it.

Python: openapi-python-client (requirements.txt), with this virtualenv's ruff on PATH for its
post-generation hooks. TypeScript: openapi-typescript and tsc from tests/clients/typescript's
package-lock.json, installed by `npm ci` once per lockfile into a folder outside the repository.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
PYTHON_CLIENT_CONFIG = HERE / "python-client.yaml"
PYTHON_PACKAGE = "workspace_client"
TYPESCRIPT_DIR = HERE / "typescript"
# What each generator prints when it has nothing to say about the document; any other line fails.
_PYTHON_QUIET = re.compile(r"Generating \S+")
_TYPESCRIPT_QUIET = re.compile(r"✨ openapi-typescript [\d.]+|🚀 \S+ → \S+ \[[\d.]+m?s\]")
# Seconds: a first `npm ci` downloads some 30 packages; each generator run takes a few seconds.
NPM_CI_TIMEOUT = 300
TOOL_TIMEOUT = 120


@dataclass(frozen=True)
class LiveSchema:
    """The document the live server served, in a file, and the SHA-256 of its bytes."""

    path: Path
    digest: str


@dataclass(frozen=True)
class GeneratedPython:
    """A generated client project (setup.py and `workspace_client/`), and what the generator printed."""

    project: Path
    output: str


class GeneratorComplained(AssertionError):
    """A generator printed something beyond its usual lines: a warning about the document, an
    error, or a hook it could not run (`ruff is not in PATH`)."""


def _run(command: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    completed = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT,
        check=False,
    )
    output = (completed.stdout + completed.stderr).strip()
    if completed.returncode != 0:
        raise GeneratorComplained(f"{command[0]} exited {completed.returncode}:\n{output}")
    return output


def _only_usual_lines(output: str, usual: re.Pattern[str], tool: str) -> None:
    unusual = [line for line in output.splitlines() if line.strip() and not usual.fullmatch(line.strip())]
    if unusual:
        raise GeneratorComplained(f"{tool} said more than it does for a clean document:\n{output}")


def generate_python_client(schema: Path, project: Path) -> str:
    """Writes the client project (setup.py and `workspace_client/`) into `project`, as README
    "API clients" does; returns what the generator printed."""
    venv_bin = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = [
        venv_bin / "openapi-python-client",
        "generate",
        "--path",
        schema,
        "--config",
        PYTHON_CLIENT_CONFIG,
        "--meta",
        "setup",
        "--output-path",
        project,
        "--fail-on-warning",
    ]
    output = _run(command, cwd=project.parent, env=env)
    _only_usual_lines(output, _PYTHON_QUIET, "openapi-python-client")
    return output


def node_missing() -> str:
    """Why the TypeScript check cannot run here, or "" when node and npm are installed."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not installed (apt-get install -y npm)" if missing else ""


def typescript_tools() -> Path:
    """node_modules of tests/clients/typescript, installed by `npm ci` into a folder under the temp
    dir named by the lockfile's hash, so later runs and other clones reuse it."""
    lock = (TYPESCRIPT_DIR / "package-lock.json").read_bytes()
    manifest = (TYPESCRIPT_DIR / "package.json").read_bytes()
    digest = hashlib.sha256(manifest + lock).hexdigest()[:16]
    installed = Path(tempfile.gettempdir()) / f"workspace-typescript-check-{digest}"
    if (installed / "node_modules").is_dir():
        return installed / "node_modules"
    # Installed beside the final folder, then renamed into place: the SQLite and PostgreSQL suites
    # run side by side in CI, and whichever finishes second keeps the first one's folder.
    staging = Path(tempfile.mkdtemp(prefix=f"{installed.name}-", dir=installed.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(TYPESCRIPT_DIR / name, staging / name)
        # No install scripts: the packages ship their compiled code, tsc 7 its binary per platform.
        _run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], cwd=staging)
        with contextlib.suppress(OSError):
            staging.rename(installed)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return installed / "node_modules"


def generate_typescript_types(schema: Path, target: Path, node_modules: Path) -> str:
    """Writes the types of `schema` into `target` (`api.d.ts`); returns what openapi-typescript printed.

    `--default-non-nullable=false`: a request field with a default (an item's `owner`) stays
    optional, as the document's `required` lists say; by default openapi-typescript 7 makes it required."""
    cli = node_modules / "openapi-typescript" / "bin" / "cli.js"
    command = ["node", cli, schema, "--output", target, "--default-non-nullable=false"]
    output = _run(command, cwd=target.parent)
    _only_usual_lines(output, _TYPESCRIPT_QUIET, "openapi-typescript")
    return output


def typescript_compile(source: Path, node_modules: Path) -> str:
    """`tsc --strict --noEmit` (TypeScript 7) on `source` beside the generated types."""
    tsc = node_modules / "typescript-7" / "bin" / "tsc"
    return _run(["node", tsc, "--strict", "--noEmit", source.name], cwd=source.parent)
