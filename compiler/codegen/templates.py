"""The jinja2 environment over ``codegen_templates/`` (StrictUndefined: a typo is an error).

Compiled templates are kept in the cache folder (``templates/``, jinja2's bytecode cache, keyed
by each template's source): a new process compiles no template it compiled before (the C
target's 31 templates took 0.4-0.5 s to compile, most of a small cold compile)."""
from __future__ import annotations

import functools
import os
from typing import Optional

import jinja2

import codegen_templates
from compiler.build_cache import cache_root

TEMPLATE_ROOT = os.path.dirname(os.path.abspath(codegen_templates.__file__))


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """jinja2's bytecode cache, for which a folder that went away (the process's first cache
    folder, deleted while it runs on with another) only means a compiled template not kept,
    not an error."""

    def dump_bytecode(self, bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache() -> Optional[jinja2.BytecodeCache]:
    """jinja2's bytecode cache in the cache folder; None where that folder cannot be written."""
    try:
        folder = os.path.join(cache_root(), "templates")
        os.makedirs(folder, exist_ok=True)
    except OSError:
        return None
    return _BytecodeCache(folder)


@functools.lru_cache(maxsize=None)
def environment(target_name: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(TEMPLATE_ROOT, target_name)),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=False, autoescape=False, bytecode_cache=_bytecode_cache())
    return env


def render(target_name: str, template: str, **variables) -> str:
    return environment(target_name).get_template(template).render(**variables)
