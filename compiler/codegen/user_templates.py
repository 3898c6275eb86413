"""C kernels from jinja2 templates that a user package owns (outside ``codegen_templates/``).

``c_template(source=...)`` or ``c_template(path=...)`` returns a ``c_kernel`` function for
``register_op``. The template sees what flowc's own templates see (``kc``, ``node``,
``inputs``, ``outputs``, ``out``, ``target``) plus ``attrs`` and whatever ``variables(kc)``
returns. A file template's folder is its loader root, so ``{% include %}`` and
``{% import %}`` of sibling files work. Rendering is strict: an undefined name is an error
naming the node.
"""
from __future__ import annotations

import functools
import os
from typing import Callable, Dict, Optional

import jinja2

from compiler.errors import CodegenError

_OPTIONS = dict(undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                keep_trailing_newline=False, autoescape=False)


@functools.lru_cache(maxsize=None)
def _folder_environment(folder: str) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(folder), **_OPTIONS)


@functools.lru_cache(maxsize=None)
def _source_environment() -> jinja2.Environment:
    return jinja2.Environment(**_OPTIONS)


def _load(source: Optional[str], path: Optional[str]) -> jinja2.Template:
    if (source is None) == (path is None):
        raise ValueError("c_template needs exactly one of source= or path=")
    try:
        if source is not None:
            return _source_environment().from_string(source)
        path = os.path.abspath(path)
        if not os.path.isfile(path):
            raise ValueError(f"C template {path} does not exist")
        folder, name = os.path.split(path)
        return _folder_environment(folder).get_template(name)
    except jinja2.TemplateSyntaxError as e:
        where = f"{e.filename or path or '<template source>'}:{e.lineno}"
        raise ValueError(f"{where}: bad C template: {e.message}") from None


def template_variables(kc) -> Dict[str, object]:
    """The names every kernel template sees."""
    return dict(kc=kc, node=kc.node, inputs=kc.inputs, outputs=kc.outputs,
                out=kc.outputs[0] if kc.outputs else None, target=kc.target, attrs=kc.attrs)


def c_template(source: Optional[str] = None, *, path: Optional[str] = None,
               variables: Optional[Callable[..., Dict[str, object]]] = None) -> Callable[..., str]:
    """A ``c_kernel`` for ``register_op`` that renders the user's own jinja2 C template."""
    template = _load(source, path)

    def c_kernel(kc) -> str:
        env = template_variables(kc)
        if variables is not None:
            env.update(variables(kc))
        try:
            return template.render(**env)
        except jinja2.TemplateError as e:
            raise CodegenError(f"C template {template.name or '<source>'} failed: {e}",
                               kc.node) from None

    c_kernel.__doc__ = f"C kernel rendered from {path or 'a template string'}"
    return c_kernel
