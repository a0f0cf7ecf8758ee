"""python3 -m dmalab.torch check SCENARIO --collective=module:factory [--device=cpu|cuda]
[--json=PATH] [--timeout=S] [--perturb=SEED]"""

import argparse
import os
import sys

# argparse writes "usage: " before the text it is given, so the text itself has none.
SYNOPSIS = ("python3 -m dmalab.torch check SCENARIO --collective=module:factory "
            "[--device=cpu|cuda] [--json=PATH] [--timeout=SECONDS] [--perturb=SEED]")
USAGE = "usage: " + SYNOPSIS


class _Parser(argparse.ArgumentParser):

    def error(self, message):
        print(f"dmalab.torch: {message}\n{USAGE}", file=sys.stderr)
        sys.exit(2)


def _seconds(text):
    """--timeout: a finite number of seconds, more than 0 and at most a day (inf overflowed the
    gloo timeouts into a traceback)."""
    from dmalab.torch.harness import timeout_error
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or timeout_error(value):
        raise argparse.ArgumentTypeError(
            f"value '{text}' is not a number of seconds more than 0 and at most 86400")
    return value


def _stdout_failed(error, said=False):
    """Exit status 2 for output that cannot be written, with the reason unless `said` already.
    What is still buffered then goes nowhere, so the interpreter's own flush at exit does not fail
    again (a traceback-like message and exit status 120)."""
    if not said:
        print(f"dmalab.torch: cannot write to stdout: {error}", file=sys.stderr)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 2


def _seed(text):
    """A perturbation seed: an integer in 0..2^64-1."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an integer; allowed 0 to "
                                         "18446744073709551615") from None
    if not 0 <= value < 1 << 64:
        raise argparse.ArgumentTypeError(f"'{text}' is out of range; allowed 0 to "
                                         "18446744073709551615")
    return value


def main(argv=None):
    """The exit status: 0 PASS, 1 FAIL, 2 bad input or usage, or output that cannot be written."""
    try:
        code = _main(argv)
    except SystemExit as e:  # argparse's --help and usage errors
        code = e.code if isinstance(e.code, int) else 0 if e.code is None else 2
    try:
        sys.stdout.flush()
    except OSError as e:
        return _stdout_failed(e, said=code == 2)  # the harness has said it already
    return code


def _main(argv):
    parser = _Parser(prog="python3 -m dmalab.torch", usage=SYNOPSIS, description=__doc__)
    sub = parser.add_subparsers(dest="command")
    check = sub.add_parser("check", usage=SYNOPSIS,
                           help="replay a scenario against a torch collective")
    check.error = parser.error
    check.add_argument("scenario")
    check.add_argument("--collective", required=True,
                       help="module:factory; factory(rank, world, device, group) returns an "
                       "object with all_reduce(inp, out=None)")
    check.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    check.add_argument("--json", default=None, help="also write the report as JSON here")
    check.add_argument("--timeout", type=_seconds, default=300.0,
                       help="seconds a step may take on any rank before it counts as hung "
                       "(default 300)")
    check.add_argument("--perturb", type=_seed, default=None,
                       help="with --device=cuda: perturb the schedule with this seed (spins of "
                       "the stream and host pauses before each call, per rank); a failing seed "
                       "replays")
    try:
        args = parser.parse_args(argv)
    except OSError as e:  # --help to a stdout that cannot be written
        return _stdout_failed(e)
    if args.command != "check":
        parser.error("a command is required: check")
    from dmalab.torch.harness import run_check
    return run_check(args.scenario, args.collective, device=args.device, json_path=args.json,
                     timeout=args.timeout, perturb=args.perturb)


if __name__ == "__main__":
    sys.exit(main())
