"""The code blocks of the documentation, as tests/docs/ runs them and mypy checks them.

    python docs/codeblocks.py              list every block: where, its language, its marker
    python docs/codeblocks.py --typecheck  mypy on the Python blocks (run by ./ollmw lint)

Every fenced block of README.md, docs/*.md, packages/*/README.md and examples/*/README.md
names its language, and runs in CI as that language says (tests/docs/test_codeblocks.py):

- ``python``: a script, run in a process of its own (top-level ``await`` runs on asyncio,
  as in ``python -m asyncio``). A block that defines ``test_`` functions is a pytest
  module, run with pytest. A block whose first line is a path comment
  (``# src/ollm_weather/tools.py``) is also that module, which the document's other
  blocks may import.
- ``sh``: each ``ollm`` command runs, and must succeed; ``pip install`` lines are checked
  (each name is a distribution of this repository), not run; ``export`` sets a variable
  for the commands after it.
- ``console``: ``$ `` lines run, and print exactly the lines shown under them.
- ``json`` and ``toml``: parsed; an ``mcpServers`` file, a profiles file of ollm-openai,
  a pools file of ollm-pool and an entry-point table are checked as ollm reads them.
- ``text`` and ``yaml`` (another program's configuration): shown, not run.

An HTML comment on the line before a block changes that:

- ``<!-- doctest: continue -->``: this Python block goes on from the previous Python
  block of the document (one script, or one pytest module).
- ``<!-- doctest: skip REASON -->``: for the few blocks that need what CI has not (a real
  server, GPUs, another machine): not run, but still checked. Python compiles, imports
  what it names and passes mypy; each ``ollm`` command is read by ollm's own parser.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LANGUAGES = ("python", "sh", "console", "json", "toml", "text", "yaml")
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>.*)$")
_MARKER = re.compile(r"^<!--\s*doctest:\s*(?P<word>\S+)\s*(?P<rest>.*?)\s*-->$")
_PATH_COMMENT = re.compile(r"^#\s*(?P<path>[\w./-]+\.py)\b")
# Packages the examples invent (a reader's own plugin): mypy may not find them.
INVENTED = ("ollm_weather", "ollm_pirate", "ollm_mybackend", "ollm_notes")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language, its marker and its text."""

    document: Path
    line: int  # of the opening fence, 1-based
    language: str
    text: str
    marker: str = ""  # "", "continue" or "skip"
    reason: str = ""  # a skip's reason, or what is wrong with the marker

    @property
    def where(self) -> str:
        """``README.md:125``: the document, relative to the repository, and the line."""
        return f"{self.document.relative_to(ROOT).as_posix()}:{self.line}"

    @property
    def slug(self) -> str:
        """``readme_md_125``: the place as a Python name."""
        return re.sub(r"\W", "_", self.where).lower()

    @property
    def first_line(self) -> int:
        """The line of the document where the block's text starts."""
        return self.line + 1

    @property
    def module_path(self) -> str | None:
        """``ollm_weather/tools.py`` for a block that starts with such a path comment."""
        if self.language != "python":
            return None
        first = self.text.split("\n", 1)[0]
        match = _PATH_COMMENT.match(first)
        if match is None:
            return None
        path = match.group("path")
        return path.removeprefix("src/")

    @property
    def is_pytest_module(self) -> bool:
        """A Python block that defines test functions: pytest runs it."""
        try:
            tree = ast.parse(self.text)
        except SyntaxError:
            return False
        return any(
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.name.startswith("test_")
            for node in tree.body
        )


def documents(root: Path = ROOT) -> list[Path]:
    """The Markdown documents whose blocks run: the READMEs and docs/*.md."""
    found = [root / "README.md", *sorted(root.glob("docs/*.md"))]
    found += sorted(root.glob("packages/*/README.md"))
    found += sorted(root.glob("examples/*/README.md"))
    return [path for path in found if path.exists()]


def parse(document: Path) -> list[Block]:
    """The fenced blocks of one Markdown document, in order."""
    lines = document.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening.group("fence"), opening.group("indent")
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        body = [line.removeprefix(indent) for line in lines[index + 1 : end]]
        marker, reason = _marker(lines, index)
        language = opening.group("info").strip().split(" ")[0]
        blocks.append(Block(document, index + 1, language, "\n".join(body), marker, reason))
        index = end + 1
    return blocks


def _marker(lines: list[str], fence: int) -> tuple[str, str]:
    before = fence - 1
    while before >= 0 and not lines[before].strip():
        before -= 1
    if before < 0:
        return "", ""
    match = _MARKER.match(lines[before].strip())
    if match is None:
        return "", ""
    return match.group("word"), match.group("rest")


def collect(root: Path = ROOT) -> list[Block]:
    """Every block of every document."""
    return [block for document in documents(root) for block in parse(document)]


def problems(block: Block) -> list[str]:
    """What is wrong with a block's language or marker, in words."""
    found = []
    if block.language not in LANGUAGES:
        name = block.language or "no language"
        found.append(
            f"{block.where}: {name}: name the block's language, one of {', '.join(LANGUAGES)}"
        )
    if block.marker not in ("", "continue", "skip"):
        found.append(f"{block.where}: unknown marker 'doctest: {block.marker}' (continue, skip)")
    if block.marker == "skip" and not block.reason:
        found.append(f"{block.where}: say why: <!-- doctest: skip REASON -->")
    if block.marker == "continue" and block.language != "python":
        found.append(f"{block.where}: only Python blocks continue one another")
    return found


def script(block: Block, blocks: list[Block]) -> list[Block]:
    """The blocks that make one script with ``block``: those it continues, then itself."""
    python = [b for b in blocks if b.document == block.document and b.language == "python"]
    chain = [block]
    position = python.index(block)
    while chain[0].marker == "continue" and position > 0:
        position -= 1
        chain.insert(0, python[position])
    return chain


def source(chain: list[Block], replace: dict[str, str] | None = None) -> str:
    """The blocks' text, each at its line of the document (so errors name the right line)."""
    text = ""
    for block in chain:
        lines_so_far = text.count("\n")
        text += "\n" * (block.first_line - 1 - lines_so_far) + block.text + "\n"
    for old, new in (replace or {}).items():
        text = text.replace(old, new)
    return text


def awaits(text: str) -> bool:
    """Whether the code awaits at its top level (as in ``python -m asyncio``)."""
    code = compile(text, "<block>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return bool(code.co_flags & inspect.CO_COROUTINE)


def _typed_source(chain: list[Block]) -> str:
    """The source for mypy: code that awaits at its top level goes in a coroutine.

    The ``async def`` line takes the place of the first block's opening fence, and the
    lines keep their numbers.
    """
    text = source(chain)
    try:
        if not awaits(text):
            return text
    except SyntaxError:
        return text  # for mypy to report
    lines = text.split("\n")
    body = [f"    {line}" if line.strip() else line for line in lines]
    body[chain[0].line - 1] = "async def _block() -> None:"
    return "\n".join(body)


def profiles(text: str) -> bool:
    """Whether TOML text is an ollm-openai profiles file: tables that have a ``base_url``."""
    return _tables_with(text, "base_url")


def pools(text: str) -> bool:
    """Whether TOML text is an ollm-pool pools file: tables that have ``members``."""
    return _tables_with(text, "members")


def _tables_with(text: str, key: str) -> bool:
    """Whether TOML text is made of tables that each have ``key``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return bool(data) and all(isinstance(table, dict) and key in table for table in data.values())


def _mypy(blocks: list[Block], folder: Path) -> tuple[list[str], int]:
    """mypy on these blocks, written into ``folder``: its report, said of the documents."""
    written: dict[str, Block] = {}
    for block in blocks:
        if block.module_path:
            name = f"src/{block.module_path}"
        else:
            name = f"blocks/{block.slug}.py"
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(_typed_source(script(block, blocks)), encoding="utf-8")
        written[name] = block
    (folder / "src").mkdir(exist_ok=True)
    config = folder / "mypy.ini"
    invented = ",".join(f"{name},{name}.*" for name in INVENTED)
    config.write_text(
        "[mypy]\npython_version = 3.11\ncheck_untyped_defs = True\n"
        "explicit_package_bases = True\n"
        f"mypy_path = {folder / 'src'}\n[mypy-{invented}]\nignore_missing_imports = True\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--no-error-summary",
            "--cache-dir",
            str(ROOT / ".mypy_cache" / "docs"),
            *written,
        ],
        capture_output=True,
        text=True,
        cwd=folder,
    )
    report = []
    for line in done.stdout.splitlines():
        name, _, rest = line.partition(":")
        block = written.get(name)
        where = block.document.relative_to(ROOT).as_posix() if block else name
        report.append(f"{where}:{rest}")
    return report, done.returncode


def typecheck(blocks: list[Block]) -> int:
    """mypy on every Python block (with the blocks it continues); its exit code.

    The documents whose blocks are modules (``# src/ollm_weather/tools.py``) are checked
    one by one, so each imports its own; the others together.
    """
    python = [block for block in blocks if block.language == "python"]
    groups: dict[Path | None, list[Block]] = {}
    for block in python:
        own = any(b.module_path for b in python if b.document == block.document)
        groups.setdefault(block.document if own else None, []).append(block)
    code = 0
    for group in groups.values():
        with tempfile.TemporaryDirectory(prefix="ollm-docs-mypy-") as temporary:
            report, returned = _mypy(group, Path(temporary))
        for line in report:
            print(f"docs: {line}", file=sys.stderr)
        code |= returned
    return code


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--typecheck", action="store_true", help="mypy on the Python blocks")
    args = parser.parse_args(argv)
    blocks = collect()
    wrong = [problem for block in blocks for problem in problems(block)]
    for problem in wrong:
        print(f"docs: {problem}", file=sys.stderr)
    if args.typecheck:
        return typecheck(blocks) or (1 if wrong else 0)
    for block in blocks:
        marker = f"  [{block.marker} {block.reason}]".rstrip() if block.marker else ""
        print(f"{block.where:45} {block.language}{marker}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
