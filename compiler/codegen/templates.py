"""The jinja2 environment over ``codegen_templates/`` (StrictUndefined: a typo is an error)."""
from __future__ import annotations

import functools
import os

import jinja2

import codegen_templates

TEMPLATE_ROOT = os.path.dirname(os.path.abspath(codegen_templates.__file__))


@functools.lru_cache(maxsize=None)
def environment(target_name: str) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(os.path.join(TEMPLATE_ROOT, target_name)),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=False, autoescape=False)
    return env


def render(target_name: str, template: str, **variables) -> str:
    return environment(target_name).get_template(template).render(**variables)
