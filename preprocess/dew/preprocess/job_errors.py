"""The user errors every writing job can raise, in one place: each subclasses dew.data.errors.UserError,
which is how the launcher and a worker's quiet stderr recognise them (dew.preprocess.quiet)."""

from __future__ import annotations

from dew.data.errors import UserError


class BadInputError(UserError, ValueError):
    """Raised in strict mode, naming the file, row and reason of the first bad record."""


class TooManyDropsError(UserError, ValueError):
    """The job wrote no record, or dropped more than it may: nothing was committed."""


class TooManyShardsError(UserError, ValueError):
    """A shard size that plans more shards than a shard name can count (formats.MAX_SHARDS)."""


class OutputConflictError(UserError, RuntimeError):
    """The output directory holds something this job must not silently mix with or replace."""


class ClaimLostError(OutputConflictError):
    """Another run claimed this run's output while it ran: it stops before changing anything more there."""
