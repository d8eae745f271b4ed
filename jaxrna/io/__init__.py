"""Input and output: FASTA reading with validation, atomic writing, user-facing errors."""

from jaxrna.io.atomic import atomic_output
from jaxrna.io.errors import InputError, OutputError, ResourceError
from jaxrna.io.fasta import Record, read_fasta, sequence_record

__all__ = ["InputError", "OutputError", "ResourceError", "Record", "atomic_output", "read_fasta",
           "sequence_record"]
