"""dew.position: the two kinds of saved data position, by the name the dew.data reference gives it.

The module is dew.data.position; these are its own objects, so a position parsed through either name is
the same class.
"""

from dew.data.position import GLOBAL, SHARE, GlobalPosition, Position, SharePosition, describe, parse

__all__ = ["GLOBAL", "SHARE", "GlobalPosition", "Position", "SharePosition", "describe", "parse"]
