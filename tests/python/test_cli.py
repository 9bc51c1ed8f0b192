"""`python -m headsep` (and the `headsep` console script of the wheel, the same function): the
executable's app run by the extension — the same outputs byte for byte as build/headsep, the
package's plugins, and Python plugins found as `.py` files in --plugin-dir / HEADSEP_PLUGIN_PATH
folders (python/headsep/_cli.py, python/src/cli.cpp)."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

from conftest import SOURCE, cli, masked

EXAMPLE_PLUGINS = SOURCE / "examples" / "python" / "python_plugin.py"


def pycli(*args, cwd=None, env=None):
    """`python -m headsep ARGS` with this interpreter (PYTHONPATH from CTest: the build tree)."""
    return subprocess.run([sys.executable, "-m", "headsep", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True)


def test_version_and_stdout_are_the_executables(workdir):
    want = cli("--version").stdout
    got = pycli("--version")
    assert got.returncode == 0, got.stderr
    assert got.stdout == want == "headsep 0.1.0\n"
    # Data on stdout byte for byte: the seed exercise and the seed's rows.
    assert pycli("example").stdout == cli("example").stdout
    seed = SOURCE / "data" / "qkv-multihead-report-scenarios.csv"
    assert pycli("run", "--input", seed, "--format", "csv").stdout == cli("run", "--input", seed, "--format", "csv").stdout


def test_summary_and_rows_equal_the_executables(workdir):
    job = ["run", "-s", "ops-reports", "-w", "axis-focus", "-p", "reports=3000", "--threads", "2", "--quiet"]
    cli(*job, "--summary", "cli.json", "--per-report", "cli.csv")
    got = pycli(*job, "--summary", "py.json", "--per-report", "py.csv")
    assert got.returncode == 0, got.stderr
    assert masked((workdir / "py.json").read_text()) == masked((workdir / "cli.json").read_text())
    assert (workdir / "py.csv").read_bytes() == (workdir / "cli.csv").read_bytes()


def test_exit_statuses_and_messages_are_the_executables(workdir):
    for args in (["run", "--threads", "x"], ["frobnicate"], ["run", "--input", "missing.csv"]):
        want = cli(*args, check=False)
        got = pycli(*args)
        assert (got.returncode, got.stderr) == (want.returncode, want.stderr), args
        assert got.returncode in (1, 2)
    # The folders searched differ (the package's plugin folder), the rest of the message does not.
    got = pycli("run", "-s", "nope", "-w", "uniform")
    assert got.returncode == 1 and got.stderr.startswith("headsep: error: no scenario plugin named 'nope' (available: ")


def test_package_plugins_found_without_environment(workdir):
    env = {k: v for k, v in os.environ.items() if k != "HEADSEP_PLUGIN_PATH"}
    got = pycli("plugins", env=env)
    assert got.returncode == 0, got.stderr
    assert "axis-focus" in got.stdout and "ops-reports" in got.stdout
    info = pycli("info", env=env).stdout
    folder = next(line for line in info.splitlines() if line.startswith("plugin folder:")).split(":", 1)[1].strip()
    assert pathlib.Path(folder, "axis-focus.so").exists(), info


def test_python_plugins_from_plugin_dir_give_the_builtins_numbers(workdir):
    # examples/python/python_plugin.py: NumPy copies of ops-reports and uniform, bit for bit.
    plugins = workdir / "plugins"
    plugins.mkdir()
    shutil.copy(EXAMPLE_PLUGINS, plugins / "python_plugin.py")
    (plugins / "_helper.py").write_text("raise RuntimeError('files starting with _ are not plugins')\n")
    listed = pycli("plugins", "--plugin-dir", plugins)
    assert listed.returncode == 0, listed.stderr
    assert "py-ops-reports" in listed.stdout and "Python class python_plugin.OpsReports" in listed.stdout
    one = pycli("plugins", "py-uniform", "--plugin-dir", plugins).stdout
    assert one.startswith("py-uniform (weighting plugin)") and "file: Python class python_plugin.Uniform" in one

    base = ["-p", "reports=2500", "-p", "seed=7", "--threads", "2", "--quiet", "--format", "csv"]
    want = cli("run", "-s", "ops-reports", "-w", "uniform", *base).stdout
    got = pycli("run", "--plugin-dir", plugins, "-s", "py-ops-reports", "-w", "uniform", *base)
    assert got.returncode == 0, got.stderr
    assert got.stdout == want
    # HEADSEP_PLUGIN_PATH folders are searched for .py files too; the Python weighting under the C++ generator.
    env = dict(os.environ, HEADSEP_PLUGIN_PATH=str(plugins))
    got = pycli("run", "-s", "ops-reports", "-w", "py-uniform", *base, env=env)
    assert got.returncode == 0, got.stderr
    want_rows = want.splitlines()
    got_rows = got.stdout.splitlines()
    assert len(got_rows) == len(want_rows) and got_rows[0] == want_rows[0]
    # Rows name the weighting's scenario (py-uniform vs uniform); every number is the same.
    assert [r.replace("py-uniform", "uniform") for r in got_rows] == want_rows


def test_a_broken_python_plugin_file_is_named(workdir):
    plugins = workdir / "plugins"
    plugins.mkdir()
    (plugins / "broken.py").write_text(textwrap.dedent("""\
        import headsep
        x = 1 / 0
    """))
    got = pycli("run", "--plugin-dir", plugins, "-s", "ops-reports", "-w", "uniform", "--quiet")
    assert got.returncode == 1
    assert got.stderr.startswith("headsep: error: could not load ")
    assert "broken.py: ZeroDivisionError: division by zero (at " in got.stderr and ":2 in <module>)" in got.stderr
    (plugins / "broken.py").write_text(textwrap.dedent("""\
        import headsep
        class Bad(headsep.ScenarioGenerator):
            name = "Not A Name"
    """))
    got = pycli("plugins", "--plugin-dir", plugins)
    assert got.returncode == 1
    assert "broken.py" in got.stderr and "Not A Name" in got.stderr, got.stderr
