"""python -m actviz -> the actviz command line."""

from actviz.cli import main

raise SystemExit(main())
