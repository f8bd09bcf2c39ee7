"""A fork server ("zygote") for the ``ollm`` processes the tests start.

Most tests of the CLI check what it does, not how it starts, yet each of the suite's
thousands of ``ollm`` runs paid Python's start-up and ollm's imports (0.3 to 0.5 s of
CPU). This server, one per test worker (cli_helpers.py starts it, the session stops it),
imports once what ``ollm`` imports, and runs nothing: no event loop, no thread, no
logging, no setting read. For each run of the client (fork_client.py, the tests'
``OLLM``) it forks a child that becomes the process the test started: the client's
standard streams (passed over the socket), argv, whole environment, folder, umask,
signal dispositions and mask, ``sys.path`` from its ``PYTHONPATH``; then runs the console
script's function and exits as the interpreter would. What a fork cannot reproduce (an
interpreter setting such as ``PYTHONHASHSEED`` or the locale that differs from the
server's, a ``PYTHONPATH`` that would shadow a module already imported) is run by
exec'ing the real ``ollm`` in the child instead: slower, never different.

The server watches each client: a client that dies (``process.kill()``) takes its child
with it, as killing the real ``ollm`` would. It exits when the test worker does (its
standard input, a pipe from the worker, closes) or on SIGTERM, killing its children.

Usage: python fork_server.py SOCKET REAL_OLLM
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import select
import signal
import socket
import sys
import traceback
from typing import NoReturn

# Interpreter settings read once, at start-up: a child whose environment differs in one
# of them would not be the process a fresh interpreter makes (PYTHONPATH and
# PYTHONUNBUFFERED are applied in the child).
APPLIED = ("PYTHONPATH", "PYTHONUNBUFFERED")
LOCALE = ("LC_ALL", "LC_CTYPE", "LANG")

# What ``ollm`` imports for its commands (python -X importtime ollm chat ...), and the
# plugins' registration modules (found through their entry points below).
PRELOAD = (
    "ollm.cli",
    "ollm.cli.parser",
    "ollm.cli.terminal",
    "ollm.cli.chat",
    "ollm.cli.chatlog",
    "ollm.cli.config",
    "ollm.cli.inventory",
    "ollm.cli.logs",
    "ollm.cli.models",
    "ollm.runtime",
    "ollm.plugins",
    "ollm.logs",
    "importlib.metadata",
    "anyio",
    "anyio._backends._asyncio",
    "pluggy",
    "msgspec",
    "httpx",
    "ollm_http",
    "sqlite3",
    "uuid",
)


def interpreter_settings(environ: dict[bytes, bytes]) -> dict[bytes, bytes]:
    return {
        k: v
        for k, v in environ.items()
        if (k.startswith(b"PYTHON") and k.decode() not in APPLIED) or k.decode() in LOCALE
    }


def preload() -> None:
    from importlib import metadata

    for name in PRELOAD:
        importlib.import_module(name)
    for entry in metadata.entry_points(group="ollm.plugins"):
        with contextlib.suppress(Exception):  # a broken plugin is the child's to report
            importlib.import_module(entry.value.partition(":")[0].strip())


class Server:
    def __init__(self, path: str, real: str) -> None:
        self.real = real
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.path = path
        self.poll = select.epoll()
        self.clients: dict[int, socket.socket] = {}  # by child pid
        self.pidfds: dict[int, int] = {}  # pidfd -> pid
        self.by_conn: dict[int, int] = {}  # client connection fd -> pid
        # sys.path as a fresh interpreter has it, minus its first entry (the script's
        # folder) and PYTHONPATH's (the server is started without one).
        self.base_path = sys.path[1:]
        self.settings = interpreter_settings(dict(os.environb))
        self.streams = [(s.encoding, str(s.errors)) for s in (sys.stdin, sys.stdout, sys.stderr)]

    def serve(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C at the terminal is pytest's
        signal.signal(signal.SIGTERM, lambda *_: self.stop())
        self.poll.register(self.listener.fileno(), select.EPOLLIN)
        self.poll.register(0, select.EPOLLIN)  # the worker's pipe: closed when it ends
        while True:
            for fd, _events in self.poll.poll():
                if fd == 0:
                    self.stop()
                elif fd == self.listener.fileno():
                    self.accept()
                elif fd in self.pidfds:
                    self.reap(fd)
                elif fd in self.by_conn:
                    # Only a hang-up is watched on a client: it died before its child,
                    # which dies too, as the real ollm killed in its place would.
                    self.poll.unregister(fd)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.by_conn[fd], signal.SIGKILL)

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        pid = os.fork()
        if pid == 0:
            try:
                self.close_all_but(conn)
                Child(self, conn).run()
            finally:  # never back into the server's loop
                traceback.print_exc()
                os._exit(70)
        pidfd = os.pidfd_open(pid)
        self.clients[pid] = conn
        self.pidfds[pidfd] = pid
        self.by_conn[conn.fileno()] = pid
        self.poll.register(pidfd, select.EPOLLIN)
        # Not EPOLLIN: the child reads the request from this connection, not the server.
        self.poll.register(conn.fileno(), select.EPOLLRDHUP)

    def reap(self, pidfd: int) -> None:
        pid = self.pidfds.pop(pidfd)
        self.poll.unregister(pidfd)
        os.close(pidfd)
        _, status = os.waitpid(pid, 0)
        conn = self.clients.pop(pid)
        del self.by_conn[conn.fileno()]
        with contextlib.suppress(FileNotFoundError):  # (unless its client hung up)
            self.poll.unregister(conn.fileno())
        with contextlib.suppress(OSError):  # the client may be gone
            conn.sendall(b"S%d\n" % status)
        conn.close()

    def close_all_but(self, conn: socket.socket) -> None:
        self.poll.close()
        self.listener.close()
        for other in self.clients.values():
            other.close()
        for pidfd in self.pidfds:
            os.close(pidfd)
        # Not 0, 1, 2 (the worker's pipes, the log): replaced by the client's below, and
        # open until then so that the fds received are numbered above them.

    def stop(self) -> NoReturn:
        for pid in self.clients:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in self.clients:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        os._exit(0)


class Child:
    """The forked child: becomes the process the client stands for, then runs ollm."""

    def __init__(self, server: Server, conn: socket.socket) -> None:
        self.server = server
        self.conn = conn

    def run(self) -> NoReturn:
        _flush()  # nothing of the server's may reach the client's streams
        try:
            fields, fds = self.receive()
        except (OSError, ValueError):
            os._exit(70)  # the client went away half-way
        umask, valid, ignored, blocked, cwd, count = fields[:6]
        argv = [os.fsdecode(a) for a in fields[6 : 6 + int(count)]]
        environ = dict(item.split(b"=", 1) for item in fields[6 + int(count) :] if b"=" in item)
        for target, fd in zip([n for n in (0, 1, 2) if int(valid) & 1 << n], fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        for target in (0, 1, 2):
            if not int(valid) & 1 << target:
                with contextlib.suppress(OSError):
                    os.close(target)
        os.umask(int(umask))
        self.reset_signals(_numbers(ignored), _numbers(blocked))
        os.environ.clear()
        os.environb.update(environ)
        with contextlib.suppress(OSError):  # a folder since deleted: stay where it is
            os.chdir(cwd)
        if interpreter_settings(environ) != self.server.settings or self.shadowed(environ):
            self.conn.sendall(b"P%d\n" % os.getpid())
            os.execv(self.server.real, [self.server.real, *argv])
        self.become(environ, argv, int(valid))
        self.conn.sendall(b"P%d\n" % os.getpid())  # ready: signals may come
        self.conn.close()
        os._exit(self.main())

    def receive(self) -> tuple[list[bytes], list[int]]:
        data, fds, _flags, _addr = socket.recv_fds(self.conn, 1 << 16, 3)
        if len(data) < 10:
            raise ValueError("short request")
        size = int(data[:10])
        data = data[10:]
        while len(data) < size:
            chunk = self.conn.recv(size - len(data))
            if not chunk:
                raise ValueError("the client went away")
            data += chunk
        return data.split(b"\0"), fds

    @staticmethod
    def reset_signals(ignored: list[int], blocked: list[int]) -> None:
        """The dispositions a fresh Python has: default, but SIGINT raising
        KeyboardInterrupt and SIGPIPE, SIGXFSZ ignored; plus what the client inherited
        ignored, and its mask."""
        for signum in signal.valid_signals():
            if signum in (signal.SIGKILL, signal.SIGSTOP):
                continue
            with contextlib.suppress(OSError, ValueError):
                signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for number in (signal.SIGPIPE, signal.SIGXFSZ, *ignored):
            signal.signal(number, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def shadowed(self, environ: dict[bytes, bytes]) -> bool:
        """Whether a PYTHONPATH folder holds a module of a name already imported here
        (a test's own ``httpx``, a copy of ``ollm``): the real start-up would import it."""
        loaded = {name.partition(".")[0] for name in sys.modules}
        for folder in _pythonpath(environ):
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                if name.partition(".")[0] in loaded and not name.endswith(".dist-info"):
                    return True
        return False

    def become(self, environ: dict[bytes, bytes], argv: list[str], valid: int) -> None:
        # sys.path as the console script would have it: its folder, PYTHONPATH, the rest.
        path = [os.path.dirname(os.path.realpath(self.server.real))]
        for entry in [*_pythonpath(environ), *self.server.base_path]:
            if entry not in path:
                path.append(entry)
        sys.path[:] = path
        importlib.invalidate_caches()  # finds entry points and modules afresh
        sys.argv = [self.server.real, *argv]
        import tempfile

        tempfile.tempdir = None  # TMPDIR is read on first use, and may differ
        buffered = not environ.get(b"PYTHONUNBUFFERED")
        for fd, name in enumerate(("stdin", "stdout", "stderr")):
            stream = _stdio(fd, *self.server.streams[fd], buffered) if valid & 1 << fd else None
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)

    def main(self) -> int:
        """``sys.exit(main())`` as the interpreter runs it, then its shutdown."""
        status, interrupted = 0, False
        try:
            from ollm.cli import main

            sys.exit(main())
        except SystemExit as exit_:
            status = _exit_status(exit_.code)
        except KeyboardInterrupt:
            traceback.print_exc()
            status, interrupted = 1, True
        except BaseException:
            sys.excepthook(*sys.exc_info())
            status = 1
        import atexit
        import threading

        threading._shutdown()  # type: ignore[attr-defined]  # waits for non-daemon threads
        atexit._run_exitfuncs()
        if not _flush():
            status = 120  # Python's status when flushing stdout at exit fails
        if interrupted:
            # As Python does after an uncaught Ctrl-C: die of SIGINT, for the shell.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return status


def _numbers(field: bytes) -> list[int]:
    return [int(n) for n in field.split(b",") if n]


def _pythonpath(environ: dict[bytes, bytes]) -> list[str]:
    value = environ.get(b"PYTHONPATH")
    return [os.path.abspath(os.fsdecode(p)) for p in value.split(b":")] if value else []


def _stdio(fd: int, encoding: str, errors: str, buffered: bool) -> io.TextIOWrapper:
    """A standard stream as Python's start-up makes it (create_stdio in pylifecycle.c)."""
    write = fd != 0
    buffering = -1 if buffered or not write else 0
    binary = open(fd, "wb" if write else "rb", buffering, closefd=False)  # noqa: SIM115
    raw = getattr(binary, "raw", binary)
    raw.name = f"<{('stdin', 'stdout', 'stderr')[fd]}>"  # type: ignore[misc]
    line_buffering = buffered and (raw.isatty() or fd == 2)
    stream = io.TextIOWrapper(
        binary,
        encoding,
        errors,
        newline="\n",
        line_buffering=line_buffering,
        write_through=not buffered,
    )
    stream.mode = "w" if write else "r"  # type: ignore[misc]
    return stream


def _exit_status(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _flush() -> bool:
    ok = True
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            ok = False
    return ok


def main() -> None:
    path, real = sys.argv[1:3]
    server = Server(path, real)  # listening at once: early clients wait in the backlog
    print("listening", flush=True)  # cli_helpers waits for this line
    preload()
    server.serve()


if __name__ == "__main__":
    main()
