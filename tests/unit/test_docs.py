"""The README reads in one sitting, its links land, and the recipe it shows is the one the tests run."""

from __future__ import annotations

import re

from tests.helpers import REPO, recipe

README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)#]+)(?:#[^)]*)?\)")


def test_the_readme_is_at_most_300_lines() -> None:
    assert len(README.read_text().splitlines()) <= 300


def test_every_relative_link_of_the_readme_and_docs_lands_on_a_file() -> None:
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    missing = [
        f"{page.name}: {target}"
        for page in pages
        for target in LINK.findall(page.read_text())
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert missing == []


def test_the_readmes_recipe_is_the_one_the_tests_run() -> None:
    assert recipe("stable-baselines3", README) == recipe("stable-baselines3")


def test_nothing_points_outside_the_repository() -> None:
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    outside = [p.name for p in pages if re.search(r"\.\./shared|(?<![/\w])shared/|FACTS\.md|DESIGN\.md", p.read_text())]
    assert outside == []


DOCS = REPO / "docs"
CODE_REF = re.compile(r"`((?:ladder|scripts|tests|docs|results|conf)/[\w./-]+\.(?:py|md|txt|sh|yaml|jsonl))`")


def test_docs_hold_no_benchmark_outputs() -> None:
    """Benchmark outputs live in results/, one per bench (git keeps the older ones), never in docs/."""
    assert sorted(p.name for p in DOCS.iterdir() if p.suffix != ".md") == []
    assert not [p.name for p in (REPO / "results").glob("*") if re.search(r"_[0-9a-f]{7}(_\w)?\.txt$", p.name)]


def test_the_benchmarks_page_is_a_reference_of_at_most_150_lines() -> None:
    text = (DOCS / "benchmarks.md").read_text()
    assert len(text.splitlines()) <= 150
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b|\d\d:\d\d UTC", text)


def test_no_page_dates_a_run() -> None:
    """The docs state current facts: when a figure was measured is git's to say, not the page's."""
    dated = [
        f"{page.name}:{n}"
        for page in [README, *sorted(DOCS.glob("*.md"))]
        for n, line in enumerate(page.read_text().splitlines(), 1)
        if re.search(r"\b20\d\d-\d\d-\d\d\b|\d\d:\d\d(-\d\d:\d\d)? UTC|this session|earlier sessions?\b", line)
    ]
    assert dated == []


def test_every_file_the_code_and_docs_name_exists() -> None:
    """A path in backquotes (`ladder/core/paths.py`, `scripts/gpu_check.sh`) names a file of this repository."""
    texts = [README, *sorted(DOCS.glob("*.md")), *sorted((REPO / "ladder").rglob("*.py"))]
    missing = sorted(
        {
            f"{p.relative_to(REPO)}: {ref}"
            for p in texts
            for ref in CODE_REF.findall(p.read_text())
            if not (REPO / ref).exists()
        }
    )
    assert missing == []


def test_the_readmes_layout_names_every_module() -> None:
    """Each module of `ladder/` is named in the README's Layout table (its folder's row), so a newcomer finds it."""
    text = README.read_text()
    layout = text[text.index("## Layout") : text.index("What to read first")]
    rows = {row.split("|")[1].strip(" `"): row for row in layout.splitlines() if row.startswith("| `")}
    package = REPO / "ladder"
    missing = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if path.stem in ("__init__", "__main__") or len(rel.parts) == 1:
            continue
        folder = "/".join(rel.parts[:2]) + "/" if rel.parts[0] == "core" and len(rel.parts) > 2 else rel.parts[0] + "/"
        row = rows.get(folder, "")
        # a module of a subfolder (`ui/report/`, `runner/warm/`) may be named by its subfolder instead
        in_subfolder = "/".join(rel.parts[:-1]) + "/" != folder
        if f"`{path.stem}`" not in row and not (in_subfolder and f"`{rel.parts[-2]}/`" in row):
            missing.append(str(rel))
    assert missing == []
