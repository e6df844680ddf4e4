from mlperf_bert.cli import main

raise SystemExit(main())
