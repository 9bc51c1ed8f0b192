#!/usr/bin/env python3
"""The machine a benchmark ran on, in one line: CPU name and generation, vector ISA, CPUs, load.

Every number in bench/ is quoted with its CPU, and the CPU's marketing name is not enough: a
cloud "AMD EPYC" is a Zen 3 with AVX2 only or a Zen 4 with AVX-512, and the issues compare
exactly those. Run as a script it prints the line (the shell benches call it that way).
"""
from __future__ import annotations

import os


def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    return fields


def amd_generation(family: int, model: int) -> str | None:
    """AMD's core generation from the CPUID family and model (None where unknown)."""
    if family == 0x17:
        return "Zen 2" if model >= 0x30 else "Zen/Zen+"
    if family == 0x19:
        return "Zen 4" if model in range(0x10, 0x20) or model in range(0x60, 0x80) or model >= 0xA0 else "Zen 3"
    if family == 0x1A:
        return "Zen 5"
    return None


def vector_isa(flags: set[str]) -> str:
    if "avx512f" in flags:
        return "AVX-512"
    return "AVX2, no AVX-512" if "avx2" in flags else "no AVX2"


def cpu_line() -> str:
    """e.g. 'AMD EPYC (family 25 model 17: Zen 4), AVX-512, 2 CPUs, load 0.42'."""
    info = _cpuinfo()
    name = info.get("model name", "unknown CPU")
    try:
        family, model = int(info["cpu family"]), int(info["model"])
    except (KeyError, ValueError):
        family = model = -1
    gen = amd_generation(family, model) if info.get("vendor_id") == "AuthenticAMD" else None
    ident = f" (family {family} model {model}{': ' + gen if gen else ''})" if family >= 0 else ""
    try:
        load = f", load {os.getloadavg()[0]:.2f}"
    except OSError:
        load = ""
    return f"{name}{ident}, {vector_isa(set(info.get('flags', '').split()))}, {os.cpu_count()} CPUs{load}"


if __name__ == "__main__":
    print(cpu_line())
