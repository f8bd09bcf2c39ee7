"""Mutation testing with mutmut, run by `./ollmw mutate` (never by CI: it takes long).

mutmut expects one project with its code under src/; this workspace has one src/ per
distribution. So each distribution in scope is staged in .mutate/<name>/ (its src/,
the test suite, the pytest settings) and mutmut runs there, mutating only the modules
in scope and running only the tests that reach each mutant. At the end: the score per
distribution and every surviving mutant (`mutmut show NAME` in the stage shows its diff).

    ./ollmw mutate                       every scope below
    ./ollmw mutate ollm-http             one distribution
    ./ollmw mutate ollm-core 'src/ollm/tools/*'   one distribution, chosen modules
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ROOT / ".mutate"

# distribution -> (modules to mutate, the tests that judge them)
# The whole suite judges the runtime and ReAct (a planted bug that passes it is a gap
# wherever the tests live); mutmut runs, for each mutant, only the tests that reach the
# mutated function. The HTTP layer is judged by its own tests (real sockets on 127.0.0.1):
# every provider test reaches the transport, so judging each of its 1,400 mutants by them
# takes most of a day on two cores, and a bug in ollm-http should fail a test of ollm-http.
SCOPES: dict[str, tuple[list[str], list[str]]] = {
    "ollm-core": (["src/ollm/runtime/*", "src/ollm/tools/*"], ["tests"]),
    "ollm-react": (["src/ollm_react/*"], ["tests"]),
    "ollm-http": (["src/ollm_http/*"], ["tests/http"]),
}


# Tests that start another Python process see the installed code, not the mutant: they
# cannot judge a mutant, so they are left out of these runs (they still run in CI).
IN_ANOTHER_PROCESS = "not ollm_chat and not ollm_plugins and not 1024"
# SyncChatClient at exit; the examples installed and run by their own pytest.
WHOLE_PROGRAMS = ["--ignore=tests/runtime/test_sync_client.py", "--ignore=tests/examples"]
# Tests of the repository's documents (docs/, the READMEs), which the stage does not copy.
DOCUMENTS = ["--ignore=tests/test_docs.py"]
DOCUMENT_TESTS = "not readme_examples_run"
# mutmut wraps every async generator it mutates in one of its own, which keeps the inner
# generator alive after the caller drops it: tests of what happens the moment a stream is
# let go (`break`, garbage collection) cannot pass under it, mutant or not.
LET_GO = "not break_then_chat and not dropped_mid_chat"
PYTEST_ARGS = [
    "-p",
    "no:randomly",
    "-q",
    "-x",
    *WHOLE_PROGRAMS,
    *DOCUMENTS,
    "-k",
    f"{IN_ANOTHER_PROCESS} and {LET_GO} and {DOCUMENT_TESTS}",
]


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def stage(name: str, modules: list[str], tests: list[str]) -> Path:
    where = STAGES / name
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    shutil.copytree(ROOT / "packages" / name / "src", where / "src")
    shutil.copytree(ROOT / "tests", where / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    pytest_settings = re.search(
        r"\[tool\.pytest\.ini_options\].*?(?=\n\[)", (ROOT / "pyproject.toml").read_text(), re.S
    )
    assert pytest_settings is not None
    (where / "pyproject.toml").write_text(
        pytest_settings.group(0)
        + "\n\n[tool.mutmut]\n"
        + 'source_paths = ["src"]\n'
        + f"only_mutate = {_toml_list(modules)}\n"
        + f"pytest_add_cli_args_test_selection = {_toml_list(tests)}\n"
        + f"pytest_add_cli_args = {_toml_list(PYTEST_ARGS)}\n"
    )
    return where


# mutmut's time limit counts CPU seconds, so a mutant whose tests wait for ever (an abort
# that no longer reaches the provider) is never stopped. A mutant's process that has run
# this long while mostly idle is sent the signal of that limit: mutmut counts a timeout.
HUNG_AFTER = 90.0  # seconds of wall-clock time
HUNG_BELOW = 0.15  # share of one CPU used


def _hung_mutants(ticks: float, uptime: float) -> list[tuple[int, str]]:
    """(pid, mutant) of mutmut's mutant processes that look hung (Linux: /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().split(b"\0")[0].decode()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if not title.startswith("mutmut: "):
            continue
        # After the ")" of the name: utime, stime are fields 12, 13; starttime is 20.
        cpu = (int(fields[11]) + int(fields[12])) / ticks
        elapsed = uptime - int(fields[19]) / ticks
        if elapsed > HUNG_AFTER and cpu < HUNG_BELOW * elapsed:
            found.append((int(entry.name), title.removeprefix("mutmut: ")))
    return found


def _watch_hangs(done: threading.Event) -> None:
    if not Path("/proc/uptime").exists():
        return  # not Linux: mutmut's own limit only
    ticks = float(os.sysconf("SC_CLK_TCK"))
    while not done.wait(10.0):
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        for pid, mutant in _hung_mutants(ticks, uptime):
            print(f"\nmutate: {mutant} hung (its tests wait for ever): a timeout", flush=True)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGXCPU)


def run(name: str, modules: list[str], tests: list[str]) -> tuple[int, int, list[str]]:
    where = stage(name, modules, tests)
    env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    done = threading.Event()
    watcher = threading.Thread(target=_watch_hangs, args=(done,), daemon=True)
    watcher.start()
    try:
        subprocess.run(
            [mutmut, "run", "--max-children", str(os.cpu_count() or 2)], cwd=where, env=env
        )
    finally:
        done.set()
    listing = subprocess.run(
        [mutmut, "results", "--all", "true"], cwd=where, env=env, capture_output=True, text=True
    ).stdout
    statuses = re.findall(r"^\s*(\S+): (\w[\w ]*)$", listing, re.M)
    killed = sum(1 for _, status in statuses if status == "killed")
    survived = [mutant for mutant, status in statuses if status == "survived"]
    return killed, len(statuses), survived


def main(argv: list[str]) -> None:
    chosen = dict(SCOPES)
    if argv:
        name = argv[0]
        modules, tests = SCOPES[name]
        chosen = {name: (argv[1:] or modules, tests)}
    report = []
    for name, (modules, tests) in chosen.items():
        killed, total, survived = run(name, modules, tests)
        score = killed / total if total else 1.0
        report.append(f"{name}: {killed} of {total} mutants killed ({score:.0%})")
        report.extend(f"  survived: {mutant}" for mutant in survived)
    print("\n".join(report))


if __name__ == "__main__":
    main(sys.argv[1:])
