import sys

from delivery.action.main import main

sys.exit(main())
