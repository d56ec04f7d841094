"""Local sandboxes: the limit files each driver writes, exec behaviour, and a real memory kill."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from quotas.values import SandboxSize
from workspace.sandboxes.boundary import configured_boundary
from workspace.sandboxes.isolation import (
    CgroupV1Driver,
    CgroupV2Driver,
    PrlimitDriver,
    cap_warnings,
    configured_cap,
    detect_driver,
)
from workspace.sandboxes.local import LocalBackend

GIB = 1024**3


def _backend(tmp_path: Path, driver, cap: SandboxSize | None = None) -> LocalBackend:
    """A backend with its own driver over the settings' var dir, so the sandboxes a test leaves
    open are closed after it like any other."""
    var_dir = Path(settings.WORKSPACE_VAR_DIR)
    return LocalBackend(
        state_dir=var_dir / "sandboxes",
        workspace_root=var_dir / "workspaces",
        driver=driver,
        boundary=configured_boundary(),
        cap=cap,
    )


def _v1_root(tmp_path: Path) -> Path:
    root = tmp_path / "v1"
    for controller in ("memory", "cpu", "pids"):
        (root / controller).mkdir(parents=True)
    return root


def test_v2_writes_memory_cpu_and_pids_limits(tmp_path):
    # Given the cgroup v2 driver over an empty cgroup root
    driver = CgroupV2Driver(tmp_path / "cg")
    (tmp_path / "cg").mkdir()
    # When it makes the group of a sandbox of 1.5 cpu, 1 GiB and 64 pids
    confinement = driver.create("s1", SandboxSize(cpu_cores=1.5, memory_bytes=GIB, pids_max=64))
    group = Path(confinement.groups[0])
    # Then memory.max, cpu.max and pids.max hold those limits, cpu as quota over period
    assert (group / "memory.max").read_text() == f"{GIB}\n"
    assert (group / "cpu.max").read_text() == "150000 100000\n"
    assert (group / "pids.max").read_text() == "64\n"


def test_v2_writes_max_for_explicit_zero(tmp_path):
    # Given the cgroup v2 driver over an empty cgroup root
    (tmp_path / "cg").mkdir()
    # When it makes the group of a sandbox whose limits are all explicitly zero
    group = Path(CgroupV2Driver(tmp_path / "cg").create("s1", SandboxSize(0, 0, 0)).groups[0])
    # Then each limit file says max: zero means unlimited
    assert (group / "memory.max").read_text() == "max\n"
    assert (group / "cpu.max").read_text() == "max 100000\n"
    assert (group / "pids.max").read_text() == "max\n"


def test_v2_writes_nothing_for_unspecified_dimensions(tmp_path):
    # Given the cgroup v2 driver over an empty cgroup root
    (tmp_path / "cg").mkdir()
    # When it makes the group of a sandbox that specifies no limit
    group = Path(CgroupV2Driver(tmp_path / "cg").create("s1", SandboxSize()).groups[0])
    # Then no memory or cpu limit file is written
    assert not (group / "memory.max").exists()
    assert not (group / "cpu.max").exists()


def test_v1_writes_one_group_per_controller(tmp_path):
    # Given the cgroup v1 driver over a root with memory, cpu and pids hierarchies
    driver = CgroupV1Driver(_v1_root(tmp_path))
    # When it makes the groups of a sandbox of half a cpu, unlimited memory and 10 pids
    confinement = driver.create("s1", SandboxSize(cpu_cores=0.5, memory_bytes=0, pids_max=10))
    # Then each controller gets its own group holding its limit, -1 for unlimited memory
    memory, cpu, pids = map(Path, confinement.groups)
    assert (memory / "memory.limit_in_bytes").read_text() == "-1\n"
    assert (cpu / "cpu.cfs_quota_us").read_text() == "50000\n"
    assert (cpu / "cpu.cfs_period_us").read_text() == "100000\n"
    assert (pids / "pids.max").read_text() == "10\n"


def test_detection_prefers_v2_then_v1_then_prlimit(tmp_path):
    # Given a root that looks like cgroup v2, one that looks like v1, and a path with neither
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory pids\n")
    # When a driver is detected for each / Then they get v2, v1 and prlimit in that order
    assert detect_driver(v2).name == "cgroup-v2"
    assert detect_driver(_v1_root(tmp_path)).name == "cgroup-v1"
    assert detect_driver(tmp_path / "nothing-here").name == "prlimit"


def test_prlimit_fallback_names_what_it_cannot_enforce(tmp_path):
    # Given the prlimit driver
    driver = PrlimitDriver(binary="/usr/bin/prlimit")
    # When it confines a sandbox of 2 cpu, 1 GiB and 5 pids
    confinement = driver.create("s1", SandboxSize(cpu_cores=2, memory_bytes=GIB, pids_max=5))
    # Then commands are wrapped with the memory and process limits, and cpu is named as not enforced
    assert confinement.wrap(["true"]) == ["/usr/bin/prlimit", f"--as={GIB}", "--nproc=5", "--", "true"]
    assert "cpu" in driver.unenforced


def test_exec_runs_in_the_items_workspace_and_joins_the_group(tmp_path):
    # Given a local backend on cgroup v2 and item 7's sandbox, whose workspace holds hello.txt
    (tmp_path / "cg").mkdir()
    backend = _backend(tmp_path, CgroupV2Driver(tmp_path / "cg"))
    opened = backend.open(workspace_id="7", spec=SandboxSize(memory_bytes=GIB))
    (Path(settings.WORKSPACE_VAR_DIR) / "workspaces" / "7" / "hello.txt").write_text("hi")
    # When ls runs in it
    result = backend.exec(opened.id, command="ls", timeout=10)
    # Then it lists the workspace and the sandbox's process sits in its group
    assert (result.exit_code, result.stdout) == (0, "hello.txt\n")
    procs = tmp_path / "cg" / "workspace-sandboxes" / opened.id / "cgroup.procs"
    assert procs.read_text().strip().isdigit()


def test_argv_commands_are_not_run_by_a_shell(tmp_path):
    # Given an open local sandbox
    backend = _backend(tmp_path, PrlimitDriver(binary=""))
    opened = backend.open(workspace_id="1", spec=SandboxSize())
    # When a command is given as an argument list holding shell syntax / Then it is echoed, not interpreted
    assert backend.exec(opened.id, command=["echo", "$HOME; ls"], timeout=10).stdout == "$HOME; ls\n"


def test_a_command_past_its_timeout_is_killed_and_reported(tmp_path):
    # Given an open local sandbox
    backend = _backend(tmp_path, PrlimitDriver(binary=""))
    opened = backend.open(workspace_id="1", spec=SandboxSize())
    # When a command prints and then sleeps past its half-second timeout
    result = backend.exec(opened.id, command="echo started; sleep 30", timeout=0.5)
    # Then it is killed with 137, reported as timed out, and keeps what it printed
    assert result.timed_out
    assert result.exit_code == 137
    assert result.stdout == "started\n"


def test_output_is_bounded_and_truncation_flagged(tmp_path):
    # Given an open local sandbox
    backend = _backend(tmp_path, PrlimitDriver(binary=""))
    opened = backend.open(workspace_id="1", spec=SandboxSize())
    # When a command prints 200000 bytes
    result = backend.exec(opened.id, command="head -c 200000 /dev/zero | tr '\\0' x", timeout=10)
    # Then 64 KiB of it is kept and the output is flagged as truncated
    assert result.stdout_truncated
    assert len(result.stdout) == 64 * 1024


def test_closing_kills_processes_left_running_in_the_background(tmp_path):
    # Given an open local sandbox that started a sleeper in the background, in its own session
    backend = _backend(tmp_path, PrlimitDriver(binary=""))
    opened = backend.open(workspace_id="1", spec=SandboxSize())
    backend.exec(opened.id, command="setsid sleep 60 >/dev/null 2>&1 &", timeout=10)
    # The background child may still be exec'ing `sleep` when the command returns.
    deadline = time.monotonic() + 3
    while not (sleepers := _host_pids_running(opened.id, backend, "sleep 60")) and time.monotonic() < deadline:
        time.sleep(0.02)
    # Then the sleeper is running
    assert sleepers
    # When the sandbox is closed
    backend.close(opened.id)
    deadline = time.monotonic() + 3
    while any(_running(pid) for pid in sleepers) and time.monotonic() < deadline:
        time.sleep(0.02)
    # Then the sleeper is gone, and so is the sandbox
    assert not any(_running(pid) for pid in sleepers)
    assert not backend.probe(opened.id)


def _host_pids_running(sandbox_id: str, backend: LocalBackend, command: str) -> list[int]:
    """Host pids of the sandbox's processes whose command line is `command`."""
    pidns = backend.state(sandbox_id)["init"]["pidns"]
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            same = os.readlink(entry / "ns" / "pid") == pidns
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:
            continue
        if same and cmdline == command:
            found.append(int(entry.name))
    return found


def _running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _writable_real_cgroup() -> Path | None:
    """The host's cgroup mount when it has a memory controller root may write to, else None."""
    root = Path("/sys/fs/cgroup")
    if os.geteuid() != 0:
        return None
    driver = detect_driver(root)
    if isinstance(driver, CgroupV2Driver) or (isinstance(driver, CgroupV1Driver) and "memory" in driver.available):
        return root
    return None


@pytest.mark.skipif(_writable_real_cgroup() is None, reason="no writable memory cgroup on this host")
def test_a_process_over_its_memory_limit_is_killed(settings, tmp_path):
    # Given the host's real cgroups and a sandbox of 64M memory
    root = _writable_real_cgroup()
    backend = _backend(tmp_path, detect_driver(root))
    opened = backend.open(workspace_id="1", spec=SandboxSize(memory_bytes=64 * 1024 * 1024))
    # When a python process there fills 400M
    try:
        hog = "a = bytearray(400 * 1024 * 1024); a[::4096] = b'x' * len(a[::4096]); print('survived')"
        result = backend.exec(opened.id, command=["python3", "-c", hog], timeout=30)
    finally:
        backend.close(opened.id)
    # Then the kernel kills it before it can print
    assert result.exit_code == 137
    assert "survived" not in result.stdout


CAP = SandboxSize(cpu_cores=1.0, memory_bytes=256 * 1024**2, pids_max=100)


def _limit_files(tmp_path: Path, sandbox_id: str) -> tuple[str, str, str]:
    group = tmp_path / "cg" / "workspace-sandboxes" / sandbox_id
    return tuple((group / name).read_text().strip() for name in ("memory.max", "cpu.max", "pids.max"))


@pytest.mark.parametrize("spec", [SandboxSize(), SandboxSize(0, 0, 0)], ids=["unspecified", "explicitly-unlimited"])
def test_a_sandbox_without_a_limit_runs_under_the_cap_and_is_charged_as_declared(tmp_path, spec):
    # Given a local backend on cgroup v2 with a cap of 1 cpu, 256M and 100 pids
    (tmp_path / "cg").mkdir()
    backend = _backend(tmp_path, CgroupV2Driver(tmp_path / "cg"), cap=CAP)
    # When it opens a sandbox whose size sets no limit
    opened = backend.open(workspace_id="1", spec=spec)
    # Then the kernel holds it to the cap, while the size it reports (what the ledger charges) is unchanged
    assert _limit_files(tmp_path, opened.id) == (str(256 * 1024**2), "100000 100000", "100")
    assert opened.spec == spec


def test_a_declared_size_is_enforced_as_declared_under_the_cap(tmp_path):
    # Given a local backend with a cap of 1 cpu, 256M and 100 pids
    (tmp_path / "cg").mkdir()
    backend = _backend(tmp_path, CgroupV2Driver(tmp_path / "cg"), cap=CAP)
    # When it opens a sandbox that declares 2 cpu, 1 GiB and 64 pids
    opened = backend.open(workspace_id="1", spec=SandboxSize(cpu_cores=2, memory_bytes=GIB, pids_max=64))
    # Then those are its limits: the cap only bounds what has none
    assert _limit_files(tmp_path, opened.id) == (str(GIB), "200000 100000", "64")


def test_the_cap_is_read_from_the_settings_and_an_empty_one_is_off(settings):
    # Given a cap of 0.5 cpu and 768M, with the pids cap left empty
    settings.WORKSPACE_SANDBOX_CAP_CPU = "0.5"
    settings.WORKSPACE_SANDBOX_CAP_MEMORY = "768M"
    settings.WORKSPACE_SANDBOX_CAP_PIDS = ""
    # When it is read / Then pids have no cap
    assert configured_cap() == SandboxSize(cpu_cores=0.5, memory_bytes=768 * 1024**2, pids_max=None)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("WORKSPACE_SANDBOX_CAP_MEMORY", "lots"),
        ("WORKSPACE_SANDBOX_CAP_CPU", "0"),
        ("WORKSPACE_SANDBOX_CAP_PIDS", "-5"),
    ],
)
def test_a_cap_that_is_no_limit_stops_start_up_naming_the_setting(settings, name, value):
    # Given a cap setting that is no positive value
    setattr(settings, name, value)
    # When it is read / Then start-up fails naming it
    with pytest.raises(ImproperlyConfigured, match=name):
        configured_cap()


def test_start_up_names_apps_under_the_cap_and_warns_loudly_without_one():
    # Given rca resolving to no cpu or memory, notebook to 1 cpu and 512M, and a cap on memory only
    sizes = {"rca": SandboxSize(pids_max=512), "notebook": SandboxSize(1.0, 512 * 1024**2, 512)}
    # When start-up looks at them
    warnings = cap_warnings(sizes, SandboxSize(memory_bytes=GIB))
    # Then cpu says rca has no limit at all, memory names rca under the cap, and notebook is not named
    cpu, memory = warnings
    assert cpu.startswith("Apps without a cpu size (rca) run with NO cpu limit in the kernel")
    assert memory.startswith("Apps without a memory size (rca) run under the deployment cap")
    assert "WORKSPACE_SANDBOX_CAP_MEMORY = 1G per sandbox" in memory
