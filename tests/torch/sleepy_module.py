"""A collective module that never finishes importing (issue 25, item 9: the harness imported it
itself and hung past --timeout)."""

import time

time.sleep(3600)


def make(rank, world, device, group):  # never reached
    raise AssertionError("imported")
