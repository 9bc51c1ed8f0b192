#!/usr/bin/env python3
"""The house plan, checked (docs/ARCHITECTURE.md, "Layers"): include arrows between runtime/
folders only point down, public headers include only public headers, plugins only the public
headers (and support/), and no source file grows past the length a reader can take in.

Usage: scripts/check_layout.py [--graph] [--root DIR]   (exit 1 and one line per violation; --graph
prints the folder-level include arrows, from which ARCHITECTURE.md's diagram is drawn; --root
checks another tree, default this repository)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[sys.argv.index("--root") + 1] if "--root" in sys.argv
                    else pathlib.Path(__file__).resolve().parent.parent)
# Bottom to top; a folder may include its own files and those of any lower layer.
LAYERS = [["support"], ["kernels"], ["profile"], ["io", "host", "attention", "model"],
          ["engine"], ["report", "dist"], ["job"], ["cli"]]
RANK = {folder: i for i, layer in enumerate(LAYERS) for folder in layer}
MAX_LINES = 600
# Files allowed past MAX_LINES, each with its reason (ARCHITECTURE.md lists them too).
LONG_FILES = {}
SOURCES = ("*.cpp", "*.hpp", "*.h", "*.c")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources(base):
    for pattern in SOURCES:
        yield from sorted((ROOT / base).rglob(pattern))


def main():
    errors = []
    edges = {}
    runtime = ROOT / "runtime"
    for path in sources("runtime"):
        rel = path.relative_to(runtime)
        if len(rel.parts) < 2 or rel.parts[0] not in RANK:
            errors.append(f"runtime/{rel}: not in a layer folder ({', '.join(RANK)})")
            continue
        here = rel.parts[0]
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if target.startswith("headsep/"):
                continue
            folder = target.split("/")[0]
            if folder not in RANK or not (runtime / target).is_file():
                errors.append(f"runtime/{rel}: includes \"{target}\", not a folder-qualified runtime header")
            elif folder != here:
                edges.setdefault((here, folder), []).append(f"runtime/{rel}")
                if RANK[folder] >= RANK[here]:
                    errors.append(f"runtime/{rel}: includes \"{target}\": {here}/ may not include {folder}/ "
                                  f"(layer {RANK[here]} -> {RANK[folder]}; arrows point down)")
    for path in sources("include"):
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if not (path.parent / target).is_file() and not (ROOT / "include" / target).is_file():
                errors.append(f"{path.relative_to(ROOT)}: public header includes private \"{target}\"")
    for path in sources("plugins"):
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            folder = target.split("/")[0]
            if (path.parent / target).is_file() or target.startswith("headsep/") or folder == "support":
                continue
            errors.append(f"{path.relative_to(ROOT)}: a plugin includes runtime's \"{target}\" "
                          "(plugins see the public headers and support/ only)")
    # python/src (the extension) sits beside cli/, on top: its own files, the public headers and
    # any runtime folder, folder-qualified.
    for path in sources("python"):
        for target in INCLUDE.findall(path.read_text(encoding="utf-8")):
            if (path.parent / target).is_file() or target.startswith("headsep/"):
                continue
            if target.split("/")[0] not in RANK or not (runtime / target).is_file():
                errors.append(f"{path.relative_to(ROOT)}: includes \"{target}\", not a folder-qualified runtime header")
    for base in ("runtime", "include", "plugins", "python", "tests", "bench", "examples"):
        for path in sources(base):
            rel = str(path.relative_to(ROOT))
            lines = path.read_text(encoding="utf-8", errors="replace").count("\n")
            if lines > MAX_LINES and rel not in LONG_FILES:
                errors.append(f"{rel}: {lines} lines (> {MAX_LINES}: split it by role, or list it "
                              "with its reason in LONG_FILES and docs/ARCHITECTURE.md)")
    if "--graph" in sys.argv:
        for (a, b), files in sorted(edges.items(), key=lambda e: (-RANK[e[0][0]], e[0])):
            print(f"{a} -> {b}  ({len(files)} file{'s' if len(files) > 1 else ''})")
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check_layout: {len(errors)} violation(s)", file=sys.stderr)
        return 1
    print(f"check_layout: ok ({sum(1 for _ in sources('runtime'))} runtime files, {len(edges)} folder arrows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
