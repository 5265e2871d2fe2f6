"""Token corpora: sources that read ids, fixed windows, packed documents."""

from dew.data.tokens.documents import PackedWindows, PackedWindowSource, TokenDocumentSource
from dew.data.tokens.packed import PackedTokens
from dew.data.tokens.sources import TokenSource
from dew.data.tokens.token_bytes import TokenBytes
from dew.data.tokens.token_column import TokenColumn
from dew.data.tokens.token_records import TokenRecords
from dew.data.tokens.windows import TokenWindows, TokenWindowSource

__all__ = [
    "PackedTokens",
    "PackedWindowSource",
    "PackedWindows",
    "TokenBytes",
    "TokenColumn",
    "TokenDocumentSource",
    "TokenRecords",
    "TokenSource",
    "TokenWindowSource",
    "TokenWindows",
]
