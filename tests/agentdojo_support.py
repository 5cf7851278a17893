"""benchmarks/agentdojo/replay.py as a module, for the tests that replay trajectories."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent


def load_replay() -> ModuleType:
    """The replay script, imported once (it is a script, not a package module)."""
    name = "agentdojo_replay"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "benchmarks" / "agentdojo" / "replay.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
