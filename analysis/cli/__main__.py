from dobutsu_tb.analysis.cli import run

run()
