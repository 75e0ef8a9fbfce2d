def pytest_collectstart(collector):
    """nbval compares text/plain outputs; the HTML rendering of the same DataFrames adds nothing to check."""
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("text/html",)


def make_tiny_study(root, extra_yaml: str = ""):
    """A study over tests/fixtures' family chat and its two questions, run in ``root`` (cache included)."""
    import shutil
    from pathlib import Path

    from pmrag.study import Study

    fixtures = Path(__file__).parent / "fixtures"
    (root / "data").mkdir(exist_ok=True)
    shutil.copy(fixtures / "line_json" / "family.json", root / "data" / "family.json")
    shutil.copy(fixtures / "questions" / "family_questions.json", root / "data" / "questions.json")
    (root / "p.yaml").write_text(
        "run: tiny\noutputs_dir: out\ncache_dir: cache\n"
        "dataset: {inputs: [data/family.json], questions: data/questions.json}\n" + extra_yaml,
        encoding="utf-8",
    )
    return Study.from_params(root / "p.yaml")
