"""Entry for ``python -m rextio_device_cuda``."""

import sys

from rextio_device_cuda.cli import main

sys.exit(main())
