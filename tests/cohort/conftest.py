import pytest

from conftest import close_cohort_client, cohort_client, demo_cohort


@pytest.fixture(scope="package")
def client():
    """A 2-worker LocalCluster's client (tests/conftest.py's :func:`cohort_client`), closed after the last cohort
    test."""
    yield cohort_client()
    close_cohort_client()


@pytest.fixture(scope="session")
def built_cohort():
    """The demo cohort built once per session into outputs/cohort_demo (tests/conftest.py's :func:`demo_cohort`;
    already built before the notebooks when the pooled-analysis notebook runs in this session)."""
    return demo_cohort()
