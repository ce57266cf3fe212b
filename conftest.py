"""Root conftest: the end-to-end tests drive pytest in-process through pytester."""

pytest_plugins = ["pytester"]
