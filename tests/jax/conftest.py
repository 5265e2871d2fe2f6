"""Eight CPU devices for the mesh tests, set before any test initialises a jax backend.

Collection imports this before any test runs, and importing jax (as grain does) does not start a
backend, so the device count still applies when the first test asks jax for its devices.
"""

from __future__ import annotations

import jax
import pytest

DEVICES = 8

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", DEVICES)


@pytest.fixture(scope="session")
def devices() -> list[jax.Device]:
    found = jax.devices()
    assert len(found) == DEVICES, (
        f"the jax tests need {DEVICES} CPU devices, got {len(found)}: a jax backend started before "
        "tests/jax/conftest.py could set jax_num_cpu_devices; run tests/jax on its own"
    )
    return found
