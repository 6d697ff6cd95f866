"""The `ortmem` console script: `refimpl.cli.main` behind a Ctrl-C guard that covers its imports too.

Importing the CLI loads rich, Hypothesis and the verify harness (about a second); a Ctrl-C
during that import, or anywhere `main` does not handle it itself, ends the command with
the usual one line and status 130, never a traceback. Standard library only here, so this
module imports in milliseconds.
"""

from __future__ import annotations

import signal
import sys

__all__ = ["run"]


def run() -> None:
    try:
        from refimpl.cli import main

        code = main()
        # The work is done: a Ctrl-C from now on must not become a KeyboardInterrupt raised inside
        # `sys.exit` (Python then ends the process by SIGINT, status -2). Still inside `try`, so one that
        # arrived before this line is handled below.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        try:
            sys.stderr.write("ortmem: interrupted\n")
        except (OSError, ValueError, AttributeError):
            pass
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    run()
