"""Analysis of tablebases (lines, verification, statistics, pictures), the puzzle solvers and the front ends."""
