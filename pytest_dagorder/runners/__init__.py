"""The standalone runners: ``DagScheduler`` and ``DagExecutor`` run plain callables on threads."""
