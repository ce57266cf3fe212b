"""Scaffolding several test modules share: fakes, suites, parsers."""
