"""python -m actviz.bench: the benchmark suite (see actviz.bench.cli)."""

from actviz.bench.cli import main

raise SystemExit(main())
