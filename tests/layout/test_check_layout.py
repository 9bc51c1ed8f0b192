#!/usr/bin/env python3
"""scripts/check_layout.py must refuse what it is there to refuse: on a small tree copied from
the real layout, an upward include, an unqualified private include, a public header that
includes a private one and a file past 600 lines each give exit 1 naming the file."""
import pathlib
import subprocess
import sys
import tempfile

CHECK = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "check_layout.py"


def run(root):
    return subprocess.run([sys.executable, str(CHECK), "--root", str(root)], capture_output=True, text=True)


def tree(files):
    root = pathlib.Path(tempfile.mkdtemp())
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


base = {"include/headsep/api.hpp": "#pragma once\n",
        "runtime/support/text.hpp": "#pragma once\n",
        "runtime/engine/run.cpp": '#include "headsep/api.hpp"\n#include "support/text.hpp"\n',
        "runtime/cli/main.cpp": '#include "engine/run.hpp"\n',
        "runtime/engine/run.hpp": "#pragma once\n"}
ok = run(tree(base))
assert ok.returncode == 0, ok.stderr

cases = {
    "runtime/support/text.hpp": ('#include "engine/run.hpp"\n', "support/ may not include engine/"),
    "runtime/engine/run.cpp": ('#include "run.hpp"\n', "not a folder-qualified runtime header"),
    "include/headsep/api.hpp": ('#include "support/text.hpp"\n', "public header includes private"),
    "runtime/cli/main.cpp": ("//\n" * 601, "601 lines"),
}
for name, (text, expected) in cases.items():
    bad = run(tree({**base, name: text}))
    assert bad.returncode == 1, (name, bad.stdout, bad.stderr)
    assert expected in bad.stderr and name in bad.stderr, (name, bad.stderr)
print(f"check_layout refuses all {len(cases)} planted violations and accepts the clean tree")
