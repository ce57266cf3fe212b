"""What a worker ships: the facts of its collection (planning/facts.py's ``Facts``).

Gathered in the worker once its collection is final (the census every
worker says in its hello, the full facts only where the controller asks);
nothing here sends, and nothing here decides: the controller does
(``deciding/decide.py``).
"""

from __future__ import annotations

import pytest

from ...options.settings import settings_of
from ...planning.facts import Census, Facts, census, collect_facts, no_facts
from ...planning.plan import Plan


def make_facts(config: pytest.Config, plan: Plan | None, planned: list[pytest.Item],
               final: list[pytest.Item], ids: list[str]) -> Facts:
    """The facts, indexed like ``final`` (what this worker runs from); ``ids``
    are the node ids of ``planned``, the order the plan left."""
    try:
        facts = collect_facts(config, plan, planned, ids,
                              affinity=settings_of(config).affinity)
        return facts.in_order(ids if final == planned else [it.nodeid for it in final])
    except ValueError:
        return no_facts(
            "a pytest_collection_finish hook added or removed tests after "
            "pytest-dagorder made its plan; select tests in "
            "pytest_collection_modifyitems instead")


def make_census(plan: Plan | None, planned: list[pytest.Item], ids: list[str]) -> Census:
    """What this worker's hello says of its collection (see ``deciding/decide.plain_run``)."""
    return census(plan, planned, ids)
