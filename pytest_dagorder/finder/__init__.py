"""--dag-find-missing: find the prerequisites and shared resources a suite never declared."""
