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
    p = subprocess.Popen([sys.executable, "-c", SCRIPT], cwd=tmp_path, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ))
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
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    t.start()
    try:
        res = headsep.run("ops-reports", "axis-focus", {"reports": 200000}, rows=False, threads=1)
    finally:
        stop.set()
        t.join()
    during = [x for x in ticks]
    # A thread that needs the GIL kept running while the engine ran (> 1 s on one thread).
    assert res.seconds > 0.2 and len(during) > 50
