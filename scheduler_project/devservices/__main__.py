"""python -m scheduler_project.devservices run | prod
| exec [--prefer-local] [--migrate] -- COMMAND..."""

from __future__ import annotations

import argparse
import sys

from scheduler_project.devservices.command import exec_command
from scheduler_project.devservices.run import run_dev, run_prod


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler_project.devservices")
    commands = parser.add_subparsers(dest="action", required=True)
    commands.add_parser("run", help="set up and run the web server and one worker (make run)")
    commands.add_parser("prod", help="the same in the production profile (make prod)")
    exec_parser = commands.add_parser("exec", help="run a command with the servers' URLs set")
    exec_parser.add_argument(
        "--prefer-local",
        action="store_true",
        help="use the servers on 127.0.0.1:5432 / 6379 when they answer (make test)",
    )
    exec_parser.add_argument(
        "--migrate", action="store_true", help="apply migrations before the command"
    )
    command: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    args = parser.parse_args(argv)
    try:
        if args.action == "run":
            return run_dev()
        if args.action == "prod":
            return run_prod()
        if not command:
            parser.error("exec needs a command after `--`")
        return exec_command(command, prefer_local=args.prefer_local, migrate=args.migrate)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
