"""`python -m mlperf_bert`: runs the command line (cli.main)."""
from mlperf_bert.cli import main

raise SystemExit(main())
