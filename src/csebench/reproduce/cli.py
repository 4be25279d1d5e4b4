"""`csebench reproduce ...` and `csebench plan`: thin wrappers over csebench.reproduce and csebench.plan."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

log = logging.getLogger("csebench")


def _params(args) -> dict:
    from ..config import load_params

    return load_params(args.params, args.config)


def cmd_render(args) -> None:
    from ..io import staged_outputs
    from . import render_item

    for item in args.item:
        with staged_outputs():  # an item's files appear together, or (error, Ctrl-C) not at all
            written = render_item(item, _params(args), args.results, args.scale, args.out_dir)
        log.info("%s (%s scale): %s", item, args.scale, ", ".join(map(str, written)))


def cmd_docs(args) -> None:
    from ..io import write_text
    from .pages import reproduction_md

    text = reproduction_md()
    if args.check:
        current = Path(args.out).read_text(encoding="utf-8") if Path(args.out).is_file() else ""
        if current != text:
            print(f"{args.out} is stale: run `csebench reproduce docs`", file=sys.stderr)
            raise SystemExit(1)
        return
    write_text(args.out, text)
    log.info("wrote %s", args.out)


def cmd_front_page(args) -> None:
    from ..io import write_text
    from .pages import front_page

    write_text(args.out, front_page(args.results, _params(args), out_path=args.out))
    log.info("wrote %s", args.out)


def cmd_list(args) -> None:
    from . import item_outputs, output_root
    from .registry import load_registry

    reg = load_registry()
    for it in reg.items:
        if args.suite and args.suite not in it.suites:
            continue
        target = item_outputs(it, output_root(args.results))[0] if it.rebuilt else ""
        print(f"{it.id:<28} {it.status:<15} {','.join(it.suites):<40} {target}")


def cmd_plan(args) -> None:
    from ..plan import plan, render_plan

    params = _params(args)
    suites = args.suites or suites_of_default(params)
    print(render_plan(plan(params, suites)))


def suites_of_default(params: dict) -> list[str]:
    """The default target's suites: SimCSE's main table (`paper`) and every suite the registry reads."""
    from .registry import load_registry

    suites = ["paper"] + [s for s in load_registry().suites() if s != "paper"]
    return [s for s in suites if s in (params.get("suites") or {})]


def add_parsers(sub, common) -> None:
    from . import SCALES

    rp = sub.add_parser("reproduce", help="the papers' tables and figures (registry, renderers, pages)")
    rsub = rp.add_subparsers(dest="reproduce_command", required=True)
    sp = common(rsub.add_parser("render", help="write one or more registry items"))
    sp.add_argument("--item", nargs="+", required=True, help="item id(s), e.g. is-cse/table-4 (see `reproduce list`)")
    sp.add_argument("--scale", default="paper", choices=SCALES)
    sp.add_argument("--results", default="results", help="results root (default: results)")
    sp.add_argument("--out-dir", default=None, help="default: results/papers/<paper> (demo: results/demo/papers/<paper>)")
    sp.set_defaults(func=cmd_render)
    sp = rsub.add_parser("docs", help="write docs/reproduction.md from the registry")
    sp.add_argument("--out", default="docs/reproduction.md")
    sp.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    sp.set_defaults(func=cmd_docs)
    sp = common(rsub.add_parser("front-page", help="write results/README.md: every paper's items, linked when built"))
    sp.add_argument("--results", default="results")
    sp.add_argument("--out", default="results/README.md")
    sp.set_defaults(func=cmd_front_page)
    sp = rsub.add_parser("list", help="one line per registry item: id, status, suites, DAG target")
    sp.add_argument("--suite", default=None)
    sp.add_argument("--results", default="results")
    sp.set_defaults(func=cmd_list)
    sp = common(sub.add_parser("plan", help="suites, jobs, training runs and GPU-hours before anything runs"))
    sp.add_argument("--suites", nargs="+", default=None, help="default: every suite of the default target")
    sp.set_defaults(func=cmd_plan)
