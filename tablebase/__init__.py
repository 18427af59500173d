"""The dobutsu shogi tablebase: values, enumeration, retrograde analysis, build, storage, probing."""
