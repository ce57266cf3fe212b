"""The ``--dag-graph`` and ``--dag-timeline`` options, apart from what writes the files.

Every process defines the options; only a run that asks for a file loads
:mod:`.visual` and the renderers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from ..shims.late_loading import Later

if TYPE_CHECKING:
    from . import visual
else:
    visual = Later("pytest_dagorder.live_run.visual")


def addoption(group: Any) -> None:
    """The two options, in the plugin's option group (``parser.getgroup(...)``)."""
    group.addoption(
        "--dag-graph",
        action="append",
        default=[],
        metavar="PATH",
        help="Write the test graph to PATH (relative to the rootdir), format by suffix: "
        ".dot, .mmd or .json (repeatable; works with --collect-only)",
    )
    group.addoption(
        "--dag-timeline",
        action="append",
        default=[],
        metavar="PATH",
        help="Write the run as a per-worker timeline to PATH (relative to the rootdir): "
        "a self-contained HTML page (.html) or a Chrome trace (.json) (repeatable)",
    )


def configure(config: pytest.Config) -> None:
    """Check the paths and register the writer (:func:`.visual.configure`), if any is asked for."""
    if hasattr(config, "workerinput"):
        return  # the controller writes; workers only re-parse the same options
    if not (config.getoption("dag_graph") or config.getoption("dag_timeline")):
        return
    visual.configure(config)
