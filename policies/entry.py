"""How every `python -m policies.<tool>` command ends: one line on standard error, never a traceback.

An expected error (bad input, a tool that is missing) is `error: <message>`, exit 2; an internal fault is
`internal error: <type>: <message>`, exit 3, with the traceback only under POLICIES_DEBUG=1; Ctrl-C is
130; a closed pipe (`make plan | head`) is not an error.
"""
from __future__ import annotations

import os
import sys
from typing import Callable


def guarded(body: Callable[[], int], expected: tuple[type[BaseException], ...], prefix: str = "") -> int:
    try:
        return body()
    except expected as exc:
        print(f"error: {prefix}{exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Python would complain again when it flushes stdout at exit: point stdout at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:  # an internal fault
        if os.environ.get("POLICIES_DEBUG"):
            raise
        print(f"internal error: {type(exc).__name__}: {exc} (set POLICIES_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return 3
