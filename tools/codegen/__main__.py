"""python -m tools.codegen [--schemas DIR --out DIR] [--check]

Without arguments it regenerates protocol/generated/ from schemas/. With --check it writes
nothing and exits 1 when the checked-in code differs from what the schemas produce.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tools.codegen.generate import render_tree
from tools.codegen.schema import SchemaError

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.codegen",
        description="Generate the protocol's Python codecs from Kafka's JSON message schemas. Without "
                    "arguments it regenerates protocol/generated/ from schemas/. With --check it writes "
                    "nothing and exits 1 when the checked-in code differs from what the schemas produce.")
    parser.add_argument("--schemas", type=Path, default=ROOT / "schemas", metavar="DIR",
                        help="the directory of schema files (*.json) to read; default: the project's schemas/")
    parser.add_argument("--out", type=Path, default=ROOT / "protocol" / "generated", metavar="DIR",
                        help="the directory the generated code goes into (or is compared with under --check); "
                             "default: the project's protocol/generated/")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if the code in --out is not what the schemas produce")
    args = parser.parse_args(argv)
    # Checked before anything is generated: an empty tree would count every generated file
    # as "not generated from any schema" and delete it.
    if not args.schemas.is_dir():
        print(f"codegen: --schemas {args.schemas} is not a directory", file=sys.stderr)
        return 2
    try:
        files = render_tree(args.schemas, label_root=ROOT)
    except SchemaError as exc:
        print(f"codegen: {exc}", file=sys.stderr)
        return 2
    if not files:
        print(f"codegen: no schemas (*.json) under {args.schemas}", file=sys.stderr)
        return 2
    existing = {p.relative_to(args.out) for p in args.out.rglob("*.py")} if args.out.exists() else set()
    stale = sorted(str(p) for p, text in files.items()
                   if not (args.out / p).exists() or (args.out / p).read_text() != text)
    extra = sorted(str(p) for p in existing - set(files))
    if args.check:
        if stale or extra:
            for name in stale:
                print(f"stale: {args.out / name}", file=sys.stderr)
            for name in extra:
                print(f"not generated from any schema: {args.out / name}", file=sys.stderr)
            print("codegen: generated code is out of date; run 'python -m tools.codegen'", file=sys.stderr)
            return 1
        print(f"codegen: {len(files)} files up to date")
        return 0
    for rel, text in files.items():
        target = args.out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    for name in extra:
        (args.out / name).unlink()
    print(f"codegen: wrote {len(stale)} of {len(files)} files into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
