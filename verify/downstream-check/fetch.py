#!/usr/bin/env python3
"""Download the engine source files that check.py executes, at the commits pinned in sources.json.

    python3 verify/downstream-check/fetch.py [--cache DIR]

Each file lands at DIR/<owner>/<repo>/<commit>/<path> (DIR defaults to .cache/downstream-check, which
git ignores: the engines' code is never committed to tessera). Files already there are kept.
Needs network access to raw.githubusercontent.com; on a machine without it, fill DIR by other means
(docs/downstream.md says how the recorded run did) and run check.py alone.
"""
import argparse
import json
import sys
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_CACHE = HERE.parent.parent / ".cache" / "downstream-check"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = ap.parse_args()
    sources = json.loads((HERE / "sources.json").read_text())["files"]
    for f in sources:
        dest = args.cache / f["repo"] / f["commit"] / f["path"]
        if dest.exists():
            print(f"have    {f['repo']}@{f['commit'][:10]} {f['path']}")
            continue
        url = f"https://raw.githubusercontent.com/{f['repo']}/{f['commit']}/{f['path']}"
        with urllib.request.urlopen(url, timeout=60) as r:
            data = r.read()
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        print(f"fetched {f['repo']}@{f['commit'][:10]} {f['path']} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
