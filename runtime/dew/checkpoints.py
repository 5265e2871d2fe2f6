"""dew.checkpoints: a data position saved beside the model state, by the name the dew.data reference gives it.

The module is dew.data.checkpoints (it imports orbax and jax, so dew.data never imports it); these are
its own objects, registered with orbax once.
"""

from dew.data.checkpoints import (
    GLOBAL_FILE,
    DataPositionHandler,
    DataPositionRestore,
    DataPositionSave,
    read_position,
)

__all__ = ["GLOBAL_FILE", "DataPositionHandler", "DataPositionRestore", "DataPositionSave", "read_position"]
