"""The ``ollm`` of the tests when the fork server is on (see fork_server.py): a stand-in
that hands its standard streams, arguments, environment, folder and umask to the test
worker's fork server, forwards the signals it gets to the child that runs ``ollm``, and
exits as the child did (a signal's death by the same signal, as a shell sees it).

cli_helpers.py copies this file next to the server's socket as ``ollm``, with a shebang
``python -I -S``: it imports only modules built into the interpreter (not even
``socket``, whose enums cost more than the rest of the start-up), so it starts in a few
milliseconds where the real ``ollm`` takes a third of a second. When the server cannot
be reached it runs the real ``ollm`` in its place: slower, never different.
"""

import _signal as signal  # type: ignore[import-not-found]  # (signal imports enum: slower)
import _socket
import os
import sys
from array import array

# The real console script: beside the interpreter, as the venv installs it.
REAL = os.path.join(os.path.dirname(sys.executable), "ollm")
SOCKET = os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "server.sock")
FORWARDED = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
# Python ignores these two itself; any other signal ignored here was ignored by whoever
# started us, and stays ignored in the child (as it would through an exec).
PYTHONS_OWN = (signal.SIGPIPE, signal.SIGXFSZ)


def run_real() -> None:
    os.execv(REAL, [REAL, *sys.argv[1:]])


def request() -> bytes:
    """What the child needs to be the process the test started, NUL-separated."""
    umask = os.umask(0)
    os.umask(umask)
    valid = sum(1 << fd for fd in (0, 1, 2) if _valid(fd))
    ignored = [
        str(int(s))
        for s in signal.valid_signals()
        if s not in PYTHONS_OWN and signal.getsignal(s) == signal.SIG_IGN
    ]
    blocked = [str(int(s)) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])]
    argv = [os.fsencode(a) for a in sys.argv[1:]]
    fields = [str(umask).encode(), str(valid).encode(), ",".join(ignored).encode()]
    fields += [",".join(blocked).encode(), os.getcwdb(), str(len(argv)).encode(), *argv]
    fields += [k + b"=" + v for k, v in os.environb.items()]
    payload = b"\0".join(fields)
    return b"%010d" % len(payload) + payload


def main() -> None:
    try:
        message = request()
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        conn.connect(SOCKET)
    except OSError:
        run_real()  # no server (a deleted folder as cwd, a server gone): the real thing
        return
    child = 0
    pending: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        if child:
            os.kill(child, signum)
        else:
            pending.append(signum)  # sent once the child has its signal handlers

    for signum in FORWARDED:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, forward)
    sent = [fd for fd in (0, 1, 2) if _valid(fd)]
    conn.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, array("i", sent))])
    buffer = b""
    status = None
    while status is None:
        chunk = conn.recv(64)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line[:1] == b"P":  # the child is ready: its pid
                child = int(line[1:])
                for signum in pending:
                    os.kill(child, signum)
                pending.clear()
            elif line[:1] == b"S":  # the child's wait status, from the server
                status = int(line[1:])
    if status is None:
        sys.stderr.write("ollm (fork server client): the fork server went away\n")
        os._exit(70)
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum not in (signal.SIGKILL, signal.SIGSTOP):  # (these have no handler)
            signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _valid(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


main()
