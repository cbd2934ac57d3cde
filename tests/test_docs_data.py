"""docs/data.md's tool examples, run as written in a fresh folder (the sample loaded as
reporting.sqlite3 where the page says so): each prints what the page shows, times aside,
so that the page's counts cannot go stale. Its contents list names every section, the
generator's required flags are the parser's, and a clone runs scripts/ with .venv's
Python."""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from app.tools import export, generator, gophish, loader, reclassify

from .support.docs import anchors, blocks, links, prose, read
from .support.servers import ROOT

PAGE = ROOT / "docs" / "data.md"
TOOLS: dict[str, Callable[[Sequence[str]], int]] = {
    "reporting-load": loader.main,
    "reporting-export": export.main,
    "reporting-reclassify": reclassify.main,
    "reporting-generate": generator.main,
    "reporting-import-gophish": gophish.main,
}
TIMES = re.compile(r"in \d+\.\d s( \([\d,]+ \w+/s\))?")


def part(title: str) -> str:
    """The text of the page's ``## title`` section (another page may have one of that title)."""
    [found] = re.findall(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", read(PAGE), re.M | re.S)
    return str(found)


def same(text: str) -> str:
    """A tool's output as the page may show it: timings masked, wrapped lines joined."""
    return " ".join(TIMES.sub("in T s", text).split())


@pytest.fixture
def shell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Callable[[str], str]:
    """Run a page's command line (``$ VAR=x tool ...``, ``export VAR=...``, ``\\``
    continuations) in a fresh folder with the tool's own main; return what it printed."""
    monkeypatch.chdir(tmp_path)
    for name in ("REPORTING_DATABASE_URL", "REPORTING_BOT_FAST_SECONDS", "REPORTING_BOT_NETWORKS"):
        monkeypatch.delenv(name, raising=False)

    def run(line: str) -> str:
        words = shlex.split(line.removeprefix("$ "))
        if words[0] == "export":
            monkeypatch.setenv(*words[1].split("=", 1))
            return ""
        with monkeypatch.context() as scoped:
            while "=" in words[0]:
                scoped.setenv(*words.pop(0).split("=", 1))
            assert TOOLS[words[0]](words[1:]) == 0, (line, capsys.readouterr())
        return capsys.readouterr().out

    return run


def commands(block: str) -> list[str]:
    """The command lines of a code block, continuations joined, comments left out."""
    lines = block.replace("\\\n", " ").splitlines()
    return [line for line in lines if line.split()[0] in (*TOOLS, "$", "export")]


def load_the_sample(shell: Callable[[str], str]) -> str:
    return shell(f"reporting-load {ROOT / 'fixtures' / 'sample.json'} --db reporting.sqlite3")


def test_the_contents_list_every_section() -> None:
    text = read(PAGE)
    titles = re.findall(r"^## (.+)$", prose(text), re.M)
    contents = text.split("\n## ", 1)[0]
    listed = [link.removeprefix("#") for link in links(contents)]
    assert listed == [anchor for title in titles for anchor in anchors(f"# {title}")]


def test_the_load_line_is_the_samples(shell: Callable[[str], str]) -> None:
    [block] = blocks(part("What a load prints, and how it runs"), "")
    assert same(load_the_sample(shell)) == same(block)


def test_the_reclassify_examples_print_what_is_shown(shell: Callable[[str], str]) -> None:
    text = part("Automated events")
    [shown] = [b for b in blocks(text, "") if b.startswith("$ ")]
    line, printed = shown.split("\n", 1)
    load_the_sample(shell)
    assert same(shell(line)) == same(printed)
    [gateway] = blocks(text, "sh")
    for line in commands(gateway):
        shell(line)


def test_the_generator_example_appends_to_the_sample(shell: Callable[[str], str]) -> None:
    [block] = blocks(part("Generating data"), "")
    load_the_sample(shell)
    for line in commands(block):
        assert "generated" in shell(line)


def test_the_generators_required_flags_are_said() -> None:
    text = part("Generating data")
    said = re.search(r"between them: (.*?)\(all required, as is (.*?)\)", text, re.S)
    assert said, "the page no longer says which flags are required"
    named = set(re.findall(r"`(--[\w-]+)`", said[1] + said[2]))
    actions = generator.build_parser()._actions
    assert named == {action.option_strings[0] for action in actions if action.required}


def test_the_export_example_runs_and_prints_its_count(shell: Callable[[str], str]) -> None:
    text = part("Exporting a fixture")
    [block] = blocks(text, "")
    outputs = [shell(line) for line in commands(block)]
    said = re.search(r"The export ends with one line, `(exported [^`]*)`", prose(text))
    assert said and same(said[1]) == same(outputs[1])
    assert outputs[2].startswith("exported ") and " to company-3.json " in outputs[2]


def test_the_gophish_example_prints_what_is_shown(shell: Callable[[str], str]) -> None:
    text = part("Coming from GoPhish")
    shutil.copy(ROOT / "tests" / "data" / "gophish_export.json", "export.json")
    load_the_sample(shell)
    [block] = [b for b in blocks(text, "sh") if b.startswith("reporting-import-gophish")]
    line, printed = block.split("\n", 1)
    assert same(shell(line)) == same(printed)
    [new] = re.findall(r'`(--company (\d+) --company-name "[^"`]+")`', prose(text))
    out = shell(f"reporting-import-gophish export.json {new[0]} --db reporting.sqlite3")
    assert out.startswith(f"imported export.json into company {new[1]} (gophish): ")


def test_scripts_run_with_the_clones_python() -> None:
    """Outside .venv, `python` has none of the dependencies: a clone runs scripts/ with
    .venv/bin/python."""
    assert not re.search(r"(?<![/\w])python3? scripts/", read(PAGE))
