"""The dynamic symbols an ELF shared object exports, read from its bytes without loading it.

Loading a shared object (``dlopen``) runs its constructors before the caller can look at it, so
the artifact loader asks this first whether a module exports the flowc module ABI and refuses
one that does not without ever loading it. It says what a file *is*, not who made it: a hostile
file can export the same names. Hashes catch damage, the manifest's key catches edits
(``runtime/signing.py``); this catches a wrong or foreign file before it can run anything.
"""
from __future__ import annotations

import struct
from typing import Set

ET_DYN = 3
SHT_DYNSYM = 11
SHN_UNDEF = 0
STB_GLOBAL, STB_WEAK = 1, 2
STV_DEFAULT, STV_PROTECTED = 0, 3


class ElfError(ValueError):
    """The bytes are not an ELF shared object this reader understands."""


def exported_symbols(data: bytes) -> Set[str]:
    """Names of the symbols ``data`` (an ELF shared object) defines and exports dynamically."""
    try:
        return _exported(memoryview(data))
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise ElfError(f"a truncated or malformed ELF file ({e})") from None


def _exported(data: memoryview) -> Set[str]:
    if bytes(data[:4]) != b"\x7fELF":
        raise ElfError("not an ELF file")
    ei_class, ei_data = data[4], data[5]
    if ei_class not in (1, 2) or ei_data not in (1, 2):
        raise ElfError("an ELF file of unknown class or byte order")
    end = "<" if ei_data == 1 else ">"
    wide = ei_class == 2
    header = struct.unpack_from(end + ("HHIQQQIHHHHHH" if wide else "HHIIIIIHHHHHH"), data, 16)
    e_type, e_shoff, e_shentsize, e_shnum = header[0], header[5], header[10], header[11]
    if e_type != ET_DYN:
        raise ElfError("an ELF file that is not a shared object")
    sh_format = end + ("IIQQQQIIQQ" if wide else "IIIIIIIIII")
    if e_shoff == 0 or e_shnum == 0 or e_shentsize < struct.calcsize(sh_format):
        raise ElfError("a shared object without section headers")
    sections = [struct.unpack_from(sh_format, data, e_shoff + i * e_shentsize)
                for i in range(e_shnum)]
    dynsym = [s for s in sections if s[1] == SHT_DYNSYM]
    if not dynsym:
        raise ElfError("a shared object without a dynamic symbol table")
    # (sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, ...)
    _, _, _, _, sym_off, sym_size, link, _, _, sym_entsize = dynsym[0]
    if link >= len(sections):
        raise ElfError("a dynamic symbol table without its string table")
    str_off, str_size = sections[link][4], sections[link][5]
    if str_off + str_size > len(data) or sym_off + sym_size > len(data):
        raise ElfError("section tables that run past the end of the file")
    strings = data[str_off:str_off + str_size]
    sym_format = end + ("IBBHQQ" if wide else "IIIBBH")
    if sym_entsize < struct.calcsize(sym_format):
        raise ElfError("a dynamic symbol table of unknown entry size")
    names = set()
    for k in range(sym_size // sym_entsize):
        fields = struct.unpack_from(sym_format, data, sym_off + k * sym_entsize)
        if wide:
            st_name, st_info, st_other, st_shndx = fields[0], fields[1], fields[2], fields[3]
        else:
            st_name, st_info, st_other, st_shndx = fields[0], fields[3], fields[4], fields[5]
        if st_shndx == SHN_UNDEF or (st_info >> 4) not in (STB_GLOBAL, STB_WEAK) \
                or (st_other & 3) not in (STV_DEFAULT, STV_PROTECTED):
            continue
        stop = bytes(strings[st_name:st_name + 256]).find(b"\0")
        if st_name >= len(strings) or stop < 0:
            continue
        names.add(bytes(strings[st_name:st_name + stop]).decode("utf-8", "replace"))
    return names
