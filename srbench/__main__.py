import sys

from srbench.cli import main

sys.exit(main())
