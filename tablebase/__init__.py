"""The dobutsu shogi tablebase: values, enumeration, retrograde analysis, build, the file, probing."""
