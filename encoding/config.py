"""Tunables of the generic layer and the tablebase's file, in one place: thread count, hash table
load, batch and chunk sizes, caches.

Changing one changes speed and memory, never a result. Layout constants (bit positions, codes)
are not here: each is named once next to the picture of its layout; nor are the tunables of one
tool (``verify``, ``verify-line``, Room Sweeper), which live beside the code they tune.
"""

import os

#: The most threads a command accepts (``--threads``, ``$NUMBA_NUM_THREADS``).
MAX_THREADS = 256


def _threads() -> int:
    """``$NUMBA_NUM_THREADS`` if set (numba reads the same variable), else the CPU count. The
    command line refuses other values than 1 to :data:`MAX_THREADS` before anything starts."""
    value = os.environ.get("NUMBA_NUM_THREADS", "")
    return int(value) if value.isascii() and value.strip().isdigit() and int(value) > 0 else (os.cpu_count() or 1)


#: Threads used by the kernels (also the number of hash table shards).
THREADS = _threads()
#: Fraction of hash table slots in use at most.
LOAD_FACTOR = 0.75
#: The same for the compact sets that only count keys (buckets of a cache line; any size, so a
#: set made for a known count is about this full at the end).
SET_LOAD_FACTOR = 0.85
#: The load a build's set of terminal positions may go up to, before the plan splits it into
#: partitions (buckets of 21 entries seldom overflow even so full; a pass over the table costs
#: more than the longer searches).
MAX_SET_LOAD_FACTOR = 0.9
#: Positions expanded per batch during enumeration (buffers are BATCH x MAX_MOVES int64).
ENUM_BATCH = 1 << 15
#: Positions whose predecessors are generated per batch in the retrograde analysis.
RETRO_BATCH = 1 << 15
#: Slots scanned per block when collecting a ply's frontier.
RETRO_BLOCK = 1 << 22
#: Keys expected when nothing better is known; tables grow beyond it as needed.
DEFAULT_EXPECTED = 1 << 16
#: HDF5 chunk lengths in entries of /keys (4 KiB before compression) and /values (1 KiB): a
#: random probe inflates one small chunk of each.
KEY_CHUNK = 1 << 9
VALUE_CHUNK = 1 << 10
#: zlib level of the HDF5 chunks.
GZIP_LEVEL = 4
#: Decompressed chunks a lazily opened tablebase keeps per dataset.
CHUNK_CACHE = 1024
#: Dead states a depth-first search remembers by default.
DEAD_STATES = 1 << 24
#: numba cache folders kept (one per version of the sources; the least recently used go first).
KEEP_CACHES = 8
#: The build on a cluster (tablebase/cluster.py): fresh positions each worker expands per
#: enumeration round, positions of a ply's frontier each worker unmoves per retrograde round (a
#: round's messages are these times the children or predecessors per position, 8 bytes each),
#: records the driver merges and writes per key range, and the object store of a local cluster.
CLUSTER_BATCH = 1 << 18
CLUSTER_FRONTIER = 1 << 18
CLUSTER_RANGE_RECORDS = 1 << 24
CLUSTER_OBJECT_STORE = 1 << 30
