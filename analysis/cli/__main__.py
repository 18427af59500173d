from dobutsu_tb.analysis.cli import main

main()
