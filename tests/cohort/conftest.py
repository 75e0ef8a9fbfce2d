import pytest

from conftest import cohort_client, demo_cohort


@pytest.fixture(scope="session")
def client():
    """The session's 2-worker LocalCluster client (tests/conftest.py's :func:`cohort_client`)."""
    return cohort_client()


@pytest.fixture(scope="session")
def built_cohort():
    """The demo cohort built once per session into outputs/cohort_demo (tests/conftest.py's :func:`demo_cohort`;
    already built before the notebooks when the pooled-analysis notebook runs in this session)."""
    return demo_cohort()
