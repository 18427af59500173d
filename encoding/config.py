"""Tunables of the build, in one place."""

import numba

#: Fraction of hash table slots in use at most.
LOAD_FACTOR = 0.75
#: Positions expanded per batch during enumeration (buffers are BATCH x MAX_MOVES int64).
ENUM_BATCH = 1 << 15
#: Positions whose predecessors are generated per batch in the retrograde analysis.
RETRO_BATCH = 1 << 15
#: Slots scanned per block when collecting a ply's frontier.
RETRO_BLOCK = 1 << 22
#: Keys expected when nothing better is known; tables grow beyond it as needed.
DEFAULT_EXPECTED = 1 << 16
#: Threads used by the kernels (also the number of hash table shards).
THREADS = numba.config.NUMBA_NUM_THREADS
#: HDF5 chunk length in entries: 64 KiB of keys, so a probe decompresses little.
CHUNK = 1 << 13
#: Figures of the build from the standard start (SPEC §1.4): used to size the hash tables.
STANDARD_NONTERMINAL = 99_485_568
STANDARD_TERMINAL = 246_803_167 - 99_485_568
GZIP_LEVEL = 4
