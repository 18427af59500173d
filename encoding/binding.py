"""Binding plain kernels to a set of tables: one copy of each kernel per set (per game variant).

A *plain kernel* is an ordinary Python function that reads its constants and tables as module
globals (``N_CELLS``, ``TARGETS``, ...) and calls other plain kernels; a module lists its plain
kernels by name in ``__kernels__``. :func:`bind_plain` copies the kernels of some modules with
their globals replaced by a dictionary of names (a variant's tables), each copy calling the
other copies: the copies run as plain Python, which is how probing uses them without numba.
:func:`dobutsu_tb.encoding.jit.bind_jitted` makes the same copies and compiles them with numba,
which freezes the tables into the machine code.

Tables of two or more dimensions are :class:`Grid` objects: a kernel reads them as
``TABLE[i, j]`` in either form (a dictionary look-up by the tuple in plain Python, quicker than
indexing an array there; an int64 array once jitted).

This module knows no game and imports neither numba nor numpy.
"""

from __future__ import annotations

import types

#: ``range`` for plain kernels whose loop runs in parallel once jitted: :func:`~dobutsu_tb.encoding.jit.bind_jitted`
#: puts ``numba.prange`` in its place (import it under this name).
prange = range


class Grid(dict):
    """A table of ints of two or more dimensions, for kernels that index it as ``table[i, j]``.

    In plain Python it is a dictionary from index tuples to ints (the quickest look-up by
    several indices there, and no numpy); :func:`~dobutsu_tb.encoding.jit.bind_jitted` turns
    it into an int64 array of :attr:`shape` (``rows`` as nested lists).

    Parameters
    ----------
    rows : list of list of int (nested to any depth)
        The table as nested lists, all of one length at each depth.

    Attributes
    ----------
    rows : list
        ``rows`` as given (do not change it: the dictionary is filled once).
    shape : tuple of int
    """

    def __init__(self, rows: list):
        super().__init__()
        self.rows = rows
        shape = []
        level = rows
        while isinstance(level, list):
            shape.append(len(level))
            level = level[0] if level else None
        self.shape = tuple(shape)
        entries = [((), rows)]
        for _ in shape:
            entries = [(at + (i,), sub) for at, row in entries for i, sub in enumerate(row)]
        self.update(entries)


def kernel_options(**options):
    """Decorator: the numba options (``parallel=True``, ...) a plain kernel is compiled with when
    bound by :func:`~dobutsu_tb.encoding.jit.bind_jitted`; the function itself is unchanged."""
    def mark(func):
        func.__jit_options__ = dict(options)
        return func
    return mark


def listed_kernels(modules) -> dict:
    """The plain kernels of ``modules`` by name (each module's ``__kernels__``).

    Raises
    ------
    ValueError
        If two modules list the same name.
    """
    plain = {}
    for module in modules:
        for name in module.__kernels__:
            if name in plain:
                raise ValueError(f"kernel name {name!r} is listed twice")
            plain[name] = getattr(module, name)
    return plain


#: The global name a rewritten kernel calls for its invariant loads (:func:`invariant_code`).
INVARIANT_LOAD = "_invariant_load"


class SourceChangedError(RuntimeError):
    """A kernel's source file no longer holds the kernel the program imported: the program was
    edited or reinstalled while it ran."""


def invariant_code(func, array: str):
    """The code of plain kernel ``func`` with every read ``array[i]`` of its parameter ``array``
    written ``_invariant_load(array, i)`` (:data:`INVARIANT_LOAD`): for a jitted copy whose
    ``array`` no kernel writes while it runs (a variant's rules array), so that the compiler may
    keep what it read in registers across the kernel's stores to other arrays, as it does the
    values of a constant table. Line numbers and names stay the function's; ``None`` when
    ``func`` reads no ``array[...]``.

    Raises
    ------
    SourceChangedError
        If the source file, read now, no longer holds ``func`` where the program imported it
        from, with the same parameters (the program was edited or reinstalled while it ran).
    """
    import ast
    import inspect
    import textwrap

    class Rewrite(ast.NodeTransformer):
        found = False

        def visit_Subscript(self, node):
            self.generic_visit(node)
            if isinstance(node.value, ast.Name) and node.value.id == array and isinstance(node.ctx, ast.Load):
                Rewrite.found = True
                call = ast.Call(ast.Name(INVARIANT_LOAD, ast.Load()), [node.value, node.slice], [])
                return ast.copy_location(call, node)
            return node

    changed = SourceChangedError(
        f"the program's file {func.__code__.co_filename} changed while it ran (edited or reinstalled): "
        f"its kernel {func.__name__} is no longer where it was; run the command again")
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, SyntaxError, IndentationError):
        raise changed from None
    code = func.__code__
    if not (tree.body and isinstance(tree.body[0], ast.FunctionDef) and tree.body[0].name == func.__name__
            and [a.arg for a in tree.body[0].args.args] == list(code.co_varnames[:code.co_argcount])):
        raise changed
    tree = Rewrite().visit(tree)
    if not Rewrite.found:
        return None
    tree.body[0].decorator_list = []  # (a kernel_options mark: its options are kept on the copy)
    ast.fix_missing_locations(tree)
    ast.increment_lineno(tree, func.__code__.co_firstlineno - 1)
    module = compile(tree, func.__code__.co_filename, "exec")
    return next(c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == func.__name__)


def copy_kernels(modules, names: dict, convert=None, known: dict | None = None,
                 invariant: str | None = None) -> tuple[dict, dict]:
    """Copies of the plain kernels of ``modules``, with globals of the same name as a key of
    ``names`` replaced by its value, and every reference to a listed kernel replaced by its copy
    (once ``convert`` has made the copies what they will be).

    Parameters
    ----------
    modules : sequence of module
        Modules with a ``__kernels__`` tuple of function names.
    names : dict of str to object
        Replacement globals (a variant's tables); a name a module does not use is ignored.
    convert : callable, optional
        ``convert(name, copy) -> object``, applied to each copy (a jit decorator); default: the
        copy itself.
    known : dict of int to object, optional
        Kernels bound before, by ``id`` of their plain original: references to them are replaced
        too. Updated with this call's copies.
    invariant : str, optional
        A parameter name whose reads become invariant loads in the copies (:func:`invariant_code`;
        the caller puts :data:`INVARIANT_LOAD` in ``names``).

    Returns
    -------
    kernels : dict of str to object
        The converted copies by name.
    namespaces : dict of str to dict
        Each copy's globals dictionary (filled in before the copies are used).
    """
    plain = listed_kernels(modules)
    out, namespaces = {}, {}
    by_identity = known if known is not None else {}
    for name, func in plain.items():
        namespace = dict(func.__globals__)
        for key in namespace.keys() & names.keys():
            namespace[key] = names[key]
        code = invariant_code(func, invariant) if invariant is not None else None
        if code is None:
            code = func.__code__
        else:
            namespace[INVARIANT_LOAD] = names[INVARIANT_LOAD]
        copy = types.FunctionType(code, namespace, func.__name__, func.__defaults__, func.__closure__)
        copy.__qualname__, copy.__module__, copy.__doc__ = func.__qualname__, func.__module__, func.__doc__
        copy.__kwdefaults__ = func.__kwdefaults__
        copy.__jit_options__ = getattr(func, "__jit_options__", {})
        out[name] = copy if convert is None else convert(name, copy)
        by_identity[id(func)] = out[name]
        namespaces[name] = namespace
    for namespace in namespaces.values():  # globals are looked up when a kernel first runs
        for key, value in list(namespace.items()):
            if isinstance(value, types.FunctionType) and id(value) in by_identity:
                namespace[key] = by_identity[id(value)]
    return out, namespaces


def bind_plain(modules, names: dict) -> types.SimpleNamespace:
    """Plain-Python copies of the kernels of ``modules`` bound to ``names`` (:func:`copy_kernels`),
    as attributes of a namespace."""
    kernels, _ = copy_kernels(modules, names)
    return types.SimpleNamespace(**kernels)
