"""Mutation testing with mutmut, run by `./ollmw mutate` (never by CI: it takes long).

mutmut expects one project with its code under src/; this workspace has one src/ per
distribution. So each distribution in scope is staged in .mutate/<name>/ (its src/,
the test suite, the pytest settings) and mutmut runs there, mutating only the modules
in scope and running only the tests that reach each mutant. At the end: the score per
distribution and every surviving mutant (`mutmut show NAME` in the stage shows its diff).

    ./ollmw mutate                       every scope below
    ./ollmw mutate ollm-http             one distribution
    ./ollmw mutate ollm-core 'src/ollm/tools/*'   one distribution, chosen modules
    ./ollmw mutate --recheck ollm-core   a finished run's survivors against the test
                                         files changed since it started (see recheck)
    ./ollmw mutate --plants [MODULE|ID...]  the semantic bugs planted by hand in
                                         tests/plants.toml, each against its module's
                                         tests (see plants); --no-baseline skips the
                                         first run without any plant
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
from typing import Any

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


# -- --recheck: a finished run's survivors against the tests written since -------------
#
# A whole rerun takes hours; the survivors of a run are few. Each is planted, as mutmut
# showed it, into a copy of the distribution's current source, and the test files changed
# since the commit the run started from are run against it (the other files passed it
# already). Mutants of functions changed since cannot be planted and are listed apart.


def _mutant_function(name: str) -> str:
    """``pkg.mod.xǁClassǁmethod__mutmut_3`` -> ``method``; ``pkg.mod.x_f__mutmut_3`` -> ``f``."""
    mangled = name.rsplit(".", 1)[1].split("__mutmut_")[0]
    return mangled.split("ǁ")[-1] if "ǁ" in mangled else mangled[2:]


def _plant(source: Path, diff: str, name: str) -> str | None:
    """The file's text with the mutant applied, or None when its context is gone."""
    hunks: list[tuple[list[str], list[str]]] = []
    for line in diff.splitlines():
        if line.startswith("@@"):
            hunks.append(([], []))
        elif hunks and not line.startswith(("---", "+++")):
            text = line[1:]
            if line[:1] in (" ", ""):
                hunks[-1][0].append(text)
                hunks[-1][1].append(text)
            elif line[:1] == "-":
                hunks[-1][0].append(text)
            elif line[:1] == "+":
                hunks[-1][1].append(text)
    lines = source.read_text().split("\n")
    function = re.escape(_mutant_function(name))
    owner = name.rsplit(".", 1)[1].split("ǁ")
    start = 0
    if len(owner) > 2:  # a method: look after its class
        pattern = rf"class {re.escape(owner[1])}\b"
        classes = [i for i, text in enumerate(lines) if re.match(pattern, text)]
        start = classes[0] if classes else 0
    defs = [
        i
        for i, text in enumerate(lines)
        if i >= start and re.match(rf"\s*(async\s+)?def {function}\(", text)
    ]
    if not defs:
        return None
    indent = re.match(r"\s*", lines[defs[0]]).group(0)  # type: ignore[union-attr]
    for old, new in hunks:
        while old and new and old[-1] == "" and new[-1] == "":
            old.pop()
            new.pop()
        old = [indent + t if t else t for t in old]
        new = [indent + t if t else t for t in new]
        at = next((i for i in range(defs[0], len(lines)) if lines[i : i + len(old)] == old), None)
        if at is None:
            return None
        lines[at : at + len(old)] = new
    return "\n".join(lines)


def recheck(name: str) -> None:
    where = STAGES / name
    stats = where / "mutants" / "mutmut-stats.json"
    if not stats.exists():
        sys.exit(f"mutate: no finished run of {name} in {where}; run ./ollmw mutate {name}")
    import json

    recorded = json.loads(stats.read_text())
    commit = recorded["git_commit"]
    # The files whose tests reached this distribution in the run (the others need not run).
    reaching = {
        test.split("::")[0]
        for tests in recorded["tests_by_mangled_function_name"].values()
        for test in tests
    }
    changed = subprocess.run(
        ["git", "diff", "--name-only", commit, "--", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    untracked = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard", "tests"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    new = set(untracked) | {
        f
        for f in changed
        if subprocess.run(
            ["git", "cat-file", "-e", f"{commit}:{f}"], cwd=ROOT, capture_output=True
        ).returncode
    }
    scope = SCOPES[name][1]
    files = sorted(
        f
        for f in {*changed, *untracked}
        if Path(f).name.startswith("test_")
        and (ROOT / f).exists()
        and (f in reaching or (f in new and any(f.startswith(f"{t}/") for t in scope)))
    )
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    listing = subprocess.run([mutmut, "results"], cwd=where, capture_output=True, text=True).stdout
    survivors = re.findall(r"^\s*(\S+): survived$", listing, re.M)
    print(f"{len(survivors)} survivors of {name}; test files changed since {commit[:7]}:")
    print("  " + "\n  ".join(files or ["(none)"]))
    if not files:
        return
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "src"
        shutil.copytree(ROOT / "packages" / name / "src", copy)
        env = {**os.environ, "PYTHONPATH": str(copy), "HYPOTHESIS_PROFILE": "ci"}
        pytest = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly"]
        pytest += ["-p", "no:cacheprovider", *files]
        # A test that fails on the real code would "kill" every mutant: check them first.
        baseline = subprocess.run(pytest, cwd=ROOT, env=env, capture_output=True, text=True)
        if baseline.returncode:
            sys.exit("mutate: these tests fail without any mutant:\n" + baseline.stdout[-2000:])
        verdicts: dict[str, list[str]] = {"killed": [], "survived": [], "changed since": []}
        for mutant in survivors:
            diff = subprocess.run(
                [mutmut, "show", mutant], cwd=where, capture_output=True, text=True
            ).stdout
            header = re.search(r"^--- (src/\S+)", diff, re.M)
            target = copy / header.group(1).removeprefix("src/") if header else None
            planted = _plant(target, diff, mutant) if target and target.exists() else None
            if target is None or planted is None:
                verdicts["changed since"].append(mutant)
                continue
            original = target.read_text()
            target.write_text(planted)
            try:
                result = subprocess.run(pytest, cwd=ROOT, env=env, capture_output=True, timeout=600)
                verdict = "killed" if result.returncode else "survived"
            except subprocess.TimeoutExpired:
                verdict = "killed"  # it hangs the tests: detected
            finally:
                target.write_text(original)
            verdicts[verdict].append(mutant)
            print(f"  {verdict}: {mutant}", flush=True)
    for verdict, names in verdicts.items():
        print(f"{verdict}: {len(names)}")
    for mutant in verdicts["survived"] + verdicts["changed since"]:
        print(f"  left: {mutant}")


# -- --plants: semantic bugs planted by hand ----------------------------------------
#
# mutmut changes one operator or constant at a time; a plausible bug is often larger (an
# approval for the chat kept for the client, the wrong end of a list, a keyword of a
# schema ignored). tests/plants.toml lists such bugs, each a text replacement in one
# file of packages/, by module (a module names its test files). Each is planted into a
# copy of its distribution's src/ (first on PYTHONPATH, as --recheck does), the module's
# tests run against it, and the verdict is printed: caught, or not caught. A plant in
# the tests' own support (the fork server of their `ollm`) is made in place and undone.


def _plants_file() -> dict[str, Any]:
    import tomllib

    return tomllib.loads((ROOT / "tests" / "plants.toml").read_text(encoding="utf-8"))


def plants(chosen: list[str]) -> None:
    import tempfile

    baseline_first = "--no-baseline" not in chosen  # when the tests are known to pass
    chosen = [c for c in chosen if c != "--no-baseline"]
    data = _plants_file()
    modules: dict[str, Any] = data["modules"]
    ids = {p["id"] for p in data["plants"]}
    unknown = sorted(set(chosen) - set(modules) - ids)
    if unknown:
        sys.exit(f"mutate: no module or plant {', '.join(unknown)} in tests/plants.toml")
    verdicts: dict[str, list[str]] = {}
    # The modules in the order asked for (each plant's module for an id), else the file's.
    module_of = {p["id"]: p["module"] for p in data["plants"]}
    order = [module_of.get(c, c) for c in chosen] or list(modules)
    for module in dict.fromkeys(order):
        settings = modules[module]
        planted = [
            p
            for p in data["plants"]
            if p["module"] == module and (not chosen or module in chosen or p["id"] in chosen)
        ]
        if not planted:
            continue
        pytest = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:randomly"]
        # A test file not written yet (on an older commit) is left out.
        tests = [t for t in settings["tests"] if (ROOT / t).exists()]
        pytest += ["-p", "no:cacheprovider", *tests]
        # A test that fails without any plant would "catch" every one: check them first.
        env = {**os.environ, "HYPOTHESIS_PROFILE": "ci"}
        if baseline_first:
            baseline = subprocess.run(pytest, cwd=ROOT, env=env, capture_output=True, text=True)
            if baseline.returncode:
                sys.exit(f"mutate: {module}'s tests fail with no plant:\n{baseline.stdout[-2000:]}")
        for plant in planted:
            relative = Path(plant["file"])
            if relative.parts[0] == "tests":
                verdict = _plant_in_the_tests(plant, pytest, env)
                verdicts.setdefault(module, []).append(verdict)
                print(f"{module} {plant['id']}: {verdict} ({plant['bug']})", flush=True)
                continue
            distribution = relative.parts[1]  # packages/<distribution>/src/...
            with tempfile.TemporaryDirectory() as scratch:
                copy = Path(scratch) / "src"
                shutil.copytree(ROOT / "packages" / distribution / "src", copy)
                target = copy.joinpath(*relative.parts[3:])
                text = target.read_text(encoding="utf-8")
                if text.count(plant["old"]) != 1:
                    verdict = "cannot be planted (its text is not there once)"
                else:
                    target.write_text(text.replace(plant["old"], plant["new"]), encoding="utf-8")
                    env["PYTHONPATH"] = str(copy)
                    try:
                        result = subprocess.run(
                            pytest, cwd=ROOT, env=env, capture_output=True, timeout=900
                        )
                        verdict = "caught" if result.returncode else "NOT CAUGHT"
                    except subprocess.TimeoutExpired:
                        verdict = "caught (the tests hang)"
            verdicts.setdefault(module, []).append(verdict)
            print(f"{module} {plant['id']}: {verdict} ({plant['bug']})", flush=True)
    for module, found in verdicts.items():
        caught = sum(v.startswith("caught") for v in found)
        print(f"{module}: {caught} of {len(found)} caught")


def _plant_in_the_tests(plant: dict[str, Any], pytest: list[str], env: dict[str, str]) -> str:
    """A plant in the tests' own machinery (tests/support/fork_server.py): made in place,
    since the tests import tests/support ahead of any PYTHONPATH, and always undone."""
    target = ROOT / plant["file"]
    text = target.read_text(encoding="utf-8")
    if text.count(plant["old"]) != 1:
        return "cannot be planted (its text is not there once)"
    try:
        target.write_text(text.replace(plant["old"], plant["new"]), encoding="utf-8")
        result = subprocess.run(pytest, cwd=ROOT, env=env, capture_output=True, timeout=900)
        return "caught" if result.returncode else "NOT CAUGHT"
    except subprocess.TimeoutExpired:
        return "caught (the tests hang)"
    finally:
        target.write_text(text, encoding="utf-8")


def main(argv: list[str]) -> None:
    if argv[:1] == ["--plants"]:
        plants(argv[1:])
        return
    if argv[:1] == ["--recheck"]:
        for name in argv[1:] or list(SCOPES):
            recheck(name)
        return
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
