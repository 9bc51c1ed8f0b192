#!/usr/bin/env python3
"""The reference side of test_csv_differential: Python's csv module (stdlib only) parses each CSV
file named on the command line, as RFC 4180 with the defaults headsep follows (comma, double
quote, doubled quotes inside quoted fields, CR / LF / CRLF records, a leading UTF-8 BOM dropped).

strict=True, so a character after a closing quote and an unterminated quote are errors, as in
headsep. Blank lines come out of csv.reader as [] and are dropped: headsep skips them too.
Prints one JSON object: {file name: {"rows": [[field, ...], ...]} or {"error": message}}.
"""
import csv
import json
import sys

csv.field_size_limit(sys.maxsize)  # headsep has no field size limit of its own


def parse(path):
    # newline='' keeps CR and LF inside quoted fields; utf-8-sig drops a leading BOM only.
    with open(path, newline="", encoding="utf-8-sig") as f:
        try:
            return {"rows": [row for row in csv.reader(f, strict=True) if row != []]}
        except csv.Error as e:
            return {"error": str(e)}


def main():
    out = {}
    for path in sys.argv[1:]:
        out[path.rsplit("/", 1)[-1]] = parse(path)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
