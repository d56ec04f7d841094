"""Start-up warnings: per-user limits the configured apps leave unenforceable (spec "Limits" 5)."""

from __future__ import annotations

from collections.abc import Mapping

from quotas.values import SandboxSize, UserLimits


def unenforceable_warnings(*, site: UserLimits, apps: Mapping[str, SandboxSize]) -> list[str]:
    """One message per per-user dimension that some or all apps (slug -> resolved size) escape.

    Per-user cpu and memory only bind sandboxes of apps that declare a positive amount of that
    dimension; an app that declares nothing, or an unlimited size, adds nothing to the sum.
    Count and disk bind every app, so they never warn.
    """
    warnings = []
    for dimension, attribute in (("cpu", "cpu_cores"), ("memory", "memory_bytes")):
        if getattr(site, dimension) is None:
            continue
        escaping = sorted(slug for slug, size in apps.items() if not (getattr(size, attribute) or 0) > 0)
        key = f"resources.per_user.{dimension}"
        if len(escaping) == len(apps):
            warnings.append(
                f"{key} cannot be enforced: no app declares a {dimension} size, and per-user {dimension} "
                "only applies to apps that declare a cost."
            )
        elif escaping:
            warnings.append(
                f"{key} does not bind the apps {', '.join(escaping)}: they declare no {dimension} size "
                "(or an unlimited one), so their sandboxes add nothing to the per-user sum."
            )
    return warnings
