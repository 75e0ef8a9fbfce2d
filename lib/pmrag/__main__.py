import sys

from pmrag.cli import main

sys.exit(main())
