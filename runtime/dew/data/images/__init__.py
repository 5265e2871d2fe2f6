"""Captioned images: the pixel rules every image path shares, the packed-dict record they are stored in,
and the image specs (ImageDataset and its kinds, in the modules beside this one, found by the registry).

`pack_dict_of_byte_arrays` and `unpack_dict_of_byte_arrays` are the runtime's one record codec
(dew.data.codec), named here too because image records are where most callers meet them.
"""

from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays

__all__ = ["pack_dict_of_byte_arrays", "unpack_dict_of_byte_arrays"]
