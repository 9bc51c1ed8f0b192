"""Ctrl-C: a long run in a subprocess, sent SIGINT, raises KeyboardInterrupt within a second and
leaves nothing in its folder; the GIL is free while the engine runs."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import headsep

SCRIPT = textwrap.dedent("""
    import signal, sys, headsep
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job may start with SIGINT ignored
    print("running", flush=True)
    try:
        headsep.run("ops-reports", "axis-focus", {"reports": 10**10}, rows=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(3)
    print("finished", flush=True)
""")


def test_sigint_raises_keyboard_interrupt_within_a_second(tmp_path):
    env = dict(os.environ)  # the child imports this very package, from any folder
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(headsep.__file__))),
                                         env.get("PYTHONPATH", "")])
    p = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=tmp_path, stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout.readline().strip() == "running"
    time.sleep(1.0)  # well inside the run
    assert p.poll() is None
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    elapsed = time.monotonic() - t0
    assert p.returncode == 3 and out.strip() == "KeyboardInterrupt"
    assert elapsed < 1.0, f"took {elapsed:.2f} s"
    assert list(tmp_path.iterdir()) == []


def test_the_gil_is_released_during_a_run():
    # A Python thread that needs the GIL keeps ticking while the engine runs: with the GIL held
    # for the run it could tick only around it.
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        t0 = time.monotonic()
        res = headsep.run("ops-reports", "axis-focus", {"reports": 1_000_000}, rows=False, report=False, threads=1)
        t1 = time.monotonic()
    finally:
        stop.set()
        t.join()
    during = [x for x in ticks if t0 + 0.01 < x < t1 - 0.01]
    assert res.summary["scenarios"]
    assert len(during) >= 20, f"{len(during)} ticks in {t1 - t0:.3f} s"
