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
