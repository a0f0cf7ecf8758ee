"""python3 -m dmalab.torch check SCENARIO --collective=module:factory [--device=cpu|cuda]
[--json=PATH] [--timeout=S] [--perturb=SEED]"""

import argparse
import sys

USAGE = ("usage: python3 -m dmalab.torch check SCENARIO --collective=module:factory "
         "[--device=cpu|cuda] [--json=PATH] [--timeout=SECONDS] [--perturb=SEED]")


class _Parser(argparse.ArgumentParser):

    def error(self, message):
        print(f"dmalab.torch: {message}\n{USAGE}", file=sys.stderr)
        sys.exit(2)


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
    parser = _Parser(prog="python3 -m dmalab.torch", usage=USAGE, description=__doc__)
    sub = parser.add_subparsers(dest="command")
    check = sub.add_parser("check", usage=USAGE,
                           help="replay a scenario against a torch collective")
    check.error = parser.error
    check.add_argument("scenario")
    check.add_argument("--collective", required=True,
                       help="module:factory; factory(rank, world, device, group) returns an "
                       "object with all_reduce(inp, out=None)")
    check.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    check.add_argument("--json", default=None, help="also write the report as JSON here")
    check.add_argument("--timeout", type=float, default=300.0,
                       help="seconds a step may take on any rank before it counts as hung "
                       "(default 300)")
    check.add_argument("--perturb", type=_seed, default=None,
                       help="with --device=cuda: perturb the schedule with this seed (spins of "
                       "the stream and host pauses before each call, per rank); a failing seed "
                       "replays")
    args = parser.parse_args(argv)
    if args.command != "check":
        parser.error("a command is required: check")
    from dmalab.torch.harness import run_check
    return run_check(args.scenario, args.collective, device=args.device, json_path=args.json,
                     timeout=args.timeout, perturb=args.perturb)


if __name__ == "__main__":
    sys.exit(main())
