"""Tests of the codesearch plugin."""
