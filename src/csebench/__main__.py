import sys

from csebench.cli import main

sys.exit(main())
