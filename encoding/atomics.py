"""Memory intrinsics for kernels: prefetch, atomic subtract, compare-and-swap.

numba has no atomics or prefetch of its own; these emit the LLVM instructions directly (numba's
``intrinsic`` mechanism). They work on an element of a one-dimensional array of any integer
dtype and are used inside ``njit`` kernels only (calling them from Python is an error):

- :func:`prefetch` ``(array, index)``: ask the CPU to load ``array[index]``'s cache line, so a
  later random access does not stall (a hint: no effect on results); :func:`prefetch_l2` the same
  into L2 only, which keeps more misses in flight;
- :func:`atomic_sub` ``(array, index, value) -> old``: ``array[index] -= value`` atomically,
  returning the value before;
- :func:`atomic_cas` ``(array, index, expected, new) -> old``: store ``new`` if the element
  equals ``expected``, atomically; returns the value before (the store happened iff it equals
  ``expected``).

The atomics use monotonic (relaxed) ordering: enough for counters and flags that threads update
independently, with a barrier (the end of a parallel kernel) before anyone reads the results.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: LLVM's prefetch arguments: read (0), keep in all cache levels (3), data cache (1).
_READ, _LOCALITY, _DATA = 0, 3, 1


def _element_pointer(context, builder, array_type, array, index):
    ary = context.make_array(array_type)(context, builder, array)
    return cgutils.get_item_pointer(context, builder, array_type, ary, [index], wraparound=False)


def _prefetch_intrinsic(locality: int, rw: int):
    """An intrinsic ``(array, index)`` that prefetches ``array[index]`` at an LLVM locality (3: into
    every cache level, prefetcht0 on x86; 2: into L2 and below, prefetcht1; 1: prefetcht2; 0: a
    non-temporal prefetchnta), for a read (``rw`` 0) or a write (1: prefetchw where the CPU has it)."""

    @intrinsic
    def prefetch_at(typingctx, array, index):
        if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
            return None
        sig = types.void(array, index)

        def codegen(context, builder, signature, args):
            ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
            i32, byte_ptr = ir.IntType(32), ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
            builder.call(fn, [builder.bitcast(ptr, byte_ptr), i32(rw), i32(locality), i32(_DATA)])
            return context.get_dummy_value()

        return sig, codegen

    return prefetch_at


#: Prefetch ``array[index]`` into every cache level (a hint; no bounds check, no effect on results).
prefetch = _prefetch_intrinsic(_LOCALITY, _READ)
#: Prefetch ``array[index]`` into L2 (prefetcht1): a miss there holds no L1 fill buffer, so many
#: more can be in flight than with :func:`prefetch` (scripts/bench_sets.py --host measures it);
#: for loops that issue their prefetches far ahead (32 to 128 accesses).
prefetch_l2 = _prefetch_intrinsic(2, _READ)
#: Every locality, for measuring (``PREFETCHES[locality]``).
PREFETCHES = tuple(_prefetch_intrinsic(locality, _READ) for locality in range(4))


@intrinsic
def invariant_load(typingctx, array, index):
    """``array[index]`` (no bounds check), for an array that nothing writes while the kernel runs
    (a variant's rules array): the load carries LLVM's ``invariant.load`` mark, so the compiler
    may keep the value in a register across the kernel's stores to other arrays, or load it once
    for a loop, as it does an element of a constant table (7 % of the children's generation of the
    standard game: encoding/binding.py rewrites the rules' reads of the game's kernels into it)."""
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None
    sig = array.dtype(array, index)

    def codegen(context, builder, signature, args):
        ptr = _element_pointer(context, builder, signature.args[0], args[0], args[1])
        value = builder.load(ptr)
        value.set_metadata("invariant.load", builder.module.add_metadata([]))
        return value

    return sig, codegen


@intrinsic
def atomic_sub(typingctx, array, index, value):
    """``array[index] -= value`` atomically; returns the element's value before."""
    if not isinstance(array, types.Array) or not isinstance(array.dtype, types.Integer):
        return None
    sig = array.dtype(array, index, value)

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        ptr = _element_pointer(context, builder, aty, args[0], args[1])
        v = context.cast(builder, args[2], signature.args[2], aty.dtype)
        return builder.atomic_rmw("sub", ptr, v, "monotonic")

    return sig, codegen


@intrinsic
def atomic_cas(typingctx, array, index, expected, new):
    """Store ``new`` in ``array[index]`` if it holds ``expected``, atomically; returns the old value."""
    if not isinstance(array, types.Array) or not isinstance(array.dtype, types.Integer):
        return None
    sig = array.dtype(array, index, expected, new)

    def codegen(context, builder, signature, args):
        aty = signature.args[0]
        ptr = _element_pointer(context, builder, aty, args[0], args[1])
        e = context.cast(builder, args[2], signature.args[2], aty.dtype)
        n = context.cast(builder, args[3], signature.args[3], aty.dtype)
        return builder.extract_value(builder.cmpxchg(ptr, e, n, "monotonic", "monotonic"), 0)

    return sig, codegen


if numba.config.DISABLE_JIT:  # NUMBA_DISABLE_JIT=1 (debugging): the kernels run as plain Python, one thread
    def prefetch(array, index):
        """No effect in plain Python."""

    prefetch_l2 = prefetch
    PREFETCHES = (prefetch,) * 4

    def invariant_load(array, index):
        """``array[index]`` (plain Python)."""
        return array[index]

    def atomic_sub(array, index, value):
        """``array[index] -= value``; returns the element's value before (plain Python)."""
        old = array[index]
        array[index] = old - value
        return old

    def atomic_cas(array, index, expected, new):
        """Store ``new`` in ``array[index]`` if it holds ``expected``; returns the old value (plain Python)."""
        old = array[index]
        if old == expected:
            array[index] = new
        return old
