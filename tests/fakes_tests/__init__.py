"""Tests of the offline fake servers (tests/fakes).

A package, so that pytest puts `tests/` on sys.path and `import fakes` works.
"""
