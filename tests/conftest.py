"""Shared test settings: Hypothesis profiles.

``ci`` (the default under tox) derandomises, so a CI run is reproducible and
cannot flake on a lucky draw; ``dev`` keeps Hypothesis' example database and
random search for local bug hunting. Select with ``HYPOTHESIS_PROFILE``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
