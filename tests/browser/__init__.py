"""Browser tests (JupyterLab in headless Chromium); a package so that its conftest does not shadow tests/conftest.py."""
