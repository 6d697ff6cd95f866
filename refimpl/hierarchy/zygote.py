"""The worker zygote: a process that forks worker processes and never holds a key (C10: per-worker keys).

A forked child has its parent's whole memory. A worker forked from the
coordinator would hold the master key, and with it every other worker's key.
So workers are forked from this zygote instead: a fresh interpreter
(`python -m refimpl.hierarchy.zygote`), started by the operator before any
coordinator, with the worker code imported and nothing secret in it. The
coordinator asks it for a worker over a Unix socket and passes, with the
request, the read end of a pipe; the child, not the zygote, reads its two
keys from that pipe (the coordinator writes them after the fork request), so
no process but the coordinator and that worker ever holds them. The zygote
answers with the child's pid, start time and a pidfd (the coordinator
watches the exit through it; the zygote reaps its children itself).

The zygote lives as long as its operator: standard input closing (the
operator exited or closed it) kills every worker still running and ends it.
Modules named on its command line are imported once before it forks (ORT,
for served models). A spawn request may name mutants (mutation controls):
that worker alone applies those source patches after its fork, so the
zygote itself stays as the code on disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from spec.errors import CalloutFailed

__all__ = ["Zygote", "spawn_via", "main"]

_MAX_REQUEST = 4096


class Zygote:
    """The operator's handle on a running zygote."""

    def __init__(self, preload: tuple[str, ...] = (), fork: bool = False) -> None:
        """`preload`: modules its workers will need (ORT for `ortmem serve`), imported once here instead of in
        every worker. `fork`: fork the zygote from this process instead of starting an interpreter (it inherits
        what this process imported); only while this process has never held a key
        (`refimpl.hierarchy.driver.shared_zygote` decides)."""
        self.owner = os.getpid()  # a forked child of the operator (a coordinator) does not own it
        self.dir = tempfile.mkdtemp(prefix="ortmem-zy-")
        self.path = os.path.join(self.dir, "zygote.sock")
        self.proc: subprocess.Popen[bytes] | None = None
        self.forked: int | None = None
        self._alive_w = -1
        if fork:
            self._fork(preload)
            return
        self.proc = subprocess.Popen([sys.executable, "-m", "refimpl.hierarchy.zygote", self.path, *preload],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.close()
            raise CalloutFailed(f"the worker zygote did not start (said {line[:200]!r})")

    def _fork(self, preload: tuple[str, ...]) -> None:
        listener = _listen(self.path)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(w)
                _prepare(preload)
                _serve(listener, r)
            finally:
                os._exit(0)
        listener.close()
        os.close(r)
        self.forked, self._alive_w = pid, w

    @property
    def pid(self) -> int:
        return self.forked if self.forked is not None else self.proc.pid  # type: ignore[union-attr]

    def alive(self) -> bool:
        if self.forked is None:
            return self.proc is not None and self.proc.poll() is None
        try:
            return os.waitpid(self.forked, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def close(self) -> None:
        """End the zygote and every worker it forked that still runs."""
        if self.forked is not None:
            with contextlib.suppress(OSError):
                os.close(self._alive_w)
            deadline = time.monotonic() + 30
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.01)
            if self.alive():
                os.kill(self.forked, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.forked, 0)
        elif self.proc is not None:
            if self.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        with contextlib.suppress(OSError):
            os.unlink(self.path)
            os.rmdir(self.dir)


def spawn_via(path: str, spec: dict[str, Any], keys: bytes) -> tuple[int, int, int]:
    """Ask the zygote at `path` for a worker; `keys` reach the child only. Returns (pid, start time, pidfd)."""
    r, w = os.pipe()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(60.0)
            s.connect(path)
            socket.send_fds(s, [json.dumps(spec).encode()], [r])
            os.close(r)
            r = -1
            os.write(w, keys)
            os.close(w)
            w = -1
            data, fds, _, _ = socket.recv_fds(s, _MAX_REQUEST, 1)
    except OSError as e:
        raise CalloutFailed(f"the worker zygote at {path} is gone: {e}") from None
    finally:
        for fd in (r, w):
            if fd >= 0:
                os.close(fd)
    try:
        reply = json.loads(data)
        return int(reply["pid"]), int(reply["starttime"]), fds[0]
    except (ValueError, KeyError, IndexError, TypeError):
        for fd in fds:
            os.close(fd)
        raise CalloutFailed(f"the worker zygote refused to fork: {data[:200]!r}") from None


def _starttime(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def _child(spec: dict[str, Any], key_fd: int, keep: set[int]) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for fd in keep:
        with contextlib.suppress(OSError):
            os.close(fd)
    keys = b""
    while len(keys) < 64:
        chunk = os.read(key_fd, 64 - len(keys))
        if not chunk:
            break
        keys += chunk
    os.close(key_fd)
    if len(keys) != 64:
        sys.stderr.write(f"ortmem worker {spec.get('wid')}: no keys from the coordinator; exiting\n")
        os._exit(2)
    patches = contextlib.ExitStack()  # held by this frame for the worker's whole life
    if spec.get("mutants"):  # a mutation control: this worker runs with the named source patches (never otherwise)
        from invariants.mutation import applied
        from refimpl.verify.mutants import MUTANTS
        for name in spec["mutants"]:
            patches.enter_context(applied(MUTANTS[name]))
    from refimpl.hierarchy.worker import worker_main
    worker_main(spec, keys[:32], keys[32:])


def _listen(path: str) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(16)
    return listener


def _prepare(preload: tuple[str, ...] | list[str]) -> None:
    import importlib
    for module in preload:
        importlib.import_module(module)
    import refimpl.hierarchy.worker  # noqa: F401  (imported once here, not in every child)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the operator's Ctrl-C is the operator's: it then closes us
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel; pidfds still report exits


def main(path: str, preload: list[str]) -> None:
    _prepare(preload)
    listener = _listen(path)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)  # nobody reads our stdout again: a worker's print must not block
    os.dup2(devnull, 1)
    os.close(devnull)
    _serve(listener, sys.stdin.fileno())


def _serve(listener: socket.socket, alive: int) -> None:
    """Fork a worker per request until `alive` reads EOF (the operator is gone), then kill what is left."""
    children: list[tuple[int, int]] = []
    while True:
        ready, _, _ = select.select([listener, alive], [], [])
        if alive in ready and not os.read(alive, 4096):
            break
        if listener not in ready:
            continue
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10.0)
            try:
                data, fds, _, _ = socket.recv_fds(conn, _MAX_REQUEST, 1)
                spec = json.loads(data)
                if len(fds) != 1 or not isinstance(spec, dict):
                    raise ValueError("a spawn request is one JSON object and one pipe")
            except (OSError, ValueError) as e:
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"error": str(e)[:200]}).encode())
                continue
            pid = os.fork()
            if pid == 0:
                try:
                    _child(spec, fds[0], {listener.fileno(), conn.fileno(), alive})
                finally:
                    os._exit(1)
            os.close(fds[0])
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:  # it exited (and was reaped) before we could watch it
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"error": f"worker process {pid} exited at once"}).encode())
                continue
            try:
                start = _starttime(pid)
                children.append((pid, start))
                socket.send_fds(conn, [json.dumps({"pid": pid, "starttime": start}).encode()], [pidfd])
            except (OSError, ValueError):
                pass
            finally:
                os.close(pidfd)
    for pid, start in children:  # the operator is gone: nothing of ours outlives it
        with contextlib.suppress(OSError, ValueError):
            if _starttime(pid) == start:
                os.kill(pid, signal.SIGKILL)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
