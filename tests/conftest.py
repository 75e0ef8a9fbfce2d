import pytest


def pytest_collectstart(collector):
    """nbval compares text/plain outputs; the HTML rendering of the same DataFrames adds nothing to check."""
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html",)
