"""What the learning pass's serial pass pays a test for its state record: the
time of one ``ProbeReporter._state`` (the environment and the fingerprint of
every module-level value below the rootdir) once a suite's test modules are
imported, as they are when its tests run.

    python benchmarks/state_cost.py ROOTDIR [--glob 'tests/test_*.py'] [--rounds 20]

Run it with the suite's interpreter (its imports) and this checkout first on
PYTHONPATH; it imports the modules (their module-level code runs) and runs
no test.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import types
from pathlib import Path

from pytest_dagorder.finder import probe_plugin


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root", type=Path)
    parser.add_argument("--glob", default="tests/test_*.py")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    root = args.root.resolve()
    sys.path.insert(0, str(root))
    for path in sorted(root.glob(args.glob)):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    # The two methods need only these attributes of a reporter (no pytest config).
    reporter = types.SimpleNamespace(modules={}, root=str(root) + os.sep, imported=(),
                                     seen=((), ()), rooted=[])
    reporter._below_root = types.MethodType(probe_plugin.ProbeReporter._below_root, reporter)
    if hasattr(probe_plugin.ProbeReporter, "_rooted"):  # absent before 2026-12 (A/B)
        reporter._rooted = types.MethodType(probe_plugin.ProbeReporter._rooted, reporter)
    state = types.MethodType(probe_plugin.ProbeReporter._state, reporter)
    values = len(state()[1])  # the first one also learns which types are opaque
    began, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.rounds):
        state()
    each = (time.perf_counter() - began) / args.rounds
    each_cpu = (time.process_time() - cpu) / args.rounds
    print(f"{values} module-level values; one state record {each * 1000:.1f} ms, "
          f"{each_cpu * 1000:.1f} ms of CPU (mean of {args.rounds}); "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
