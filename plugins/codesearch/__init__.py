"""Lets pytest import this plugin's tests as the package codesearch.tests (unique module names)."""
