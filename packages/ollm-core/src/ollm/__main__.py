"""Run the ollm command line: python -m ollm."""

import sys

from ollm.cli import main

sys.exit(main())
