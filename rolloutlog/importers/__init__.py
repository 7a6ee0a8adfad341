"""Importers of other stacks' run folders (prime-rl): their world facts as a rolloutlog log.

See docs/foreign-runs.md for what each reconstructs and what it must assume.
"""

from rolloutlog.importers.errors import ForeignRunError
from rolloutlog.importers.prime_rl import IMPORT_NOTE, import_prime_rl

__all__ = ["IMPORT_NOTE", "ForeignRunError", "import_prime_rl"]
