import sys

from ._provider import main

sys.exit(main())
