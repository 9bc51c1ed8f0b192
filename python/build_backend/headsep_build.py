"""The wheel's build backend: scikit-build-core's, with the compile's progress on the terminal.

pip runs a build backend with its output captured and shows it only on failure (or with -v);
headsep's C++ build takes minutes, and `pip install .` would sit silent. When pip itself writes
to a terminal, this backend runs scikit-build-core's wheel build with its output going through a
pipe: every line still reaches pip's capture (its log, -v, the failure report), and a dozen status
lines on that terminal show the steps ("configuring (CMake)", Ninja's "[n/m] ..." at every tenth).
When pip's output goes elsewhere (CI, a log, CTest) it is scikit-build-core's backend unchanged.
"""
from __future__ import annotations

import os
import re
import sys
import threading

from scikit_build_core import build as _skb
from scikit_build_core.build import *  # noqa: F401,F403 -- every hook pip may call

_STEP = re.compile(rb"^\[(\d+)/(\d+)\] (.*)$")


def _status(line: bytes) -> bytes | None:
    m = _STEP.match(line)
    if m:
        return b"[%s/%s] %s" % (m.group(1), m.group(2), m.group(3))
    if line.startswith(b"*** Configuring CMake"):
        return b"configuring (CMake)"
    if line.startswith(b"*** Building project"):
        return b"compiling (Ninja, -j from CMAKE_BUILD_PARALLEL_LEVEL or all cores)"
    if line.startswith(b"*** Installing project") or line.startswith(b"*** Making wheel"):
        return line[4:].rstrip(b".")
    return None


def _terminal_of_pip() -> str | None:
    # pip's standard output (the backend runs as pip's child), when it is a terminal.
    try:
        out = os.readlink(f"/proc/{os.getppid()}/fd/1")
    except OSError:
        return None
    return out if re.fullmatch(r"/dev/(pts/\d+|tty\w*)", out) else None


def _with_progress(hook):
    def run(*args, **kwargs):
        term = _terminal_of_pip()
        try:
            tty = os.open(term, os.O_WRONLY | os.O_NOCTTY) if term else -1
        except OSError:
            tty = -1
        if tty < 0:
            return hook(*args, **kwargs)
        try:
            columns = os.get_terminal_size(tty).columns
        except OSError:
            columns = 0
        width = columns - 20 if columns >= 60 else 100  # 0: a terminal that does not say
        saved = [os.dup(1), os.dup(2)]
        r, w = os.pipe()

        def pump():
            buf, tenth = b"", -1
            while chunk := os.read(r, 65536):
                os.write(saved[0], chunk)  # pip's capture gets everything
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    line = line.rstrip(b"\r")
                    s = _status(line)
                    if s is None:
                        continue
                    if m := _STEP.match(line):  # Ninja's steps: one line per tenth of them
                        if int(m.group(1)) * 10 // int(m.group(2)) == tenth:
                            continue
                        tenth = int(m.group(1)) * 10 // int(m.group(2))
                    # Each on a line of its own, a space last: pip's spinner backs over it.
                    os.write(tty, b"\n  headsep build: " + s[:width] + b" ")

        t = threading.Thread(target=pump, daemon=True)
        t.start()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(w)
        try:
            return hook(*args, **kwargs)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)  # the pipe's last writers closed: the pump sees its end
            t.join()
            for fd in (r, tty, *saved):
                os.close(fd)
    run.__name__ = hook.__name__
    run.__doc__ = hook.__doc__
    return run


build_wheel = _with_progress(_skb.build_wheel)
if hasattr(_skb, "build_editable"):
    build_editable = _with_progress(_skb.build_editable)
