"""Records shared by the engines and the writers: one accepted hit, one scanned pair.

Coordinates follow miRanda's matrix: the miRNA is reversed, so ``row_start``/``row_end`` count
reversed-miRNA rows (the aligned rows are ``row_start + 1 .. row_end``), and the aligned target
columns are ``col_start + 1 .. col_end`` (1-based). The properties give both miRanda's printed
coordinates (with its off-by-one ``q_end``) and clean 1-based inclusive spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Hit:
    """One hit as miRanda reports it (accepted: passed overlap, strict and energy filters)."""

    score: int
    energy: float | None          # kcal/mol as miRanda prints it; None with --no-energy
    mirna_len: int
    row_start: int
    row_end: int
    col_start: int
    col_end: int
    ref_display_start: int        # 1-based, includes the lowercase flanks (miRanda's R start)
    ref_display_end: int          # 1-based, includes the lowercase flanks (miRanda's R end)
    aln_mirna: str                # miRNA 3'->5', flanks lowercase, '-' for gaps
    aln_map: str                  # '|' Watson-Crick, ':' wobble, ' ' otherwise
    aln_target: str               # target 5'->3', flanks lowercase, '-' past the ends or gaps
    aln_len: int                  # aligned columns (flanks excluded)
    matches: int
    wobbles: int

    # miRanda's printed coordinates
    @property
    def q_start(self) -> int:
        return self.mirna_len - self.row_end + 1

    @property
    def q_end(self) -> int:
        """miRanda's Q end: the 3'-most aligned miRNA position plus one (its own off-by-one)."""
        return self.mirna_len - self.row_start + 1

    @property
    def r_start(self) -> int:
        return self.ref_display_start

    @property
    def r_end(self) -> int:
        return self.ref_display_end

    # clean 1-based inclusive spans of the aligned region
    @property
    def mirna_first(self) -> int:
        return self.q_start

    @property
    def mirna_last(self) -> int:
        return self.mirna_len - self.row_start

    @property
    def target_first(self) -> int:
        return self.col_start + 1

    @property
    def target_last(self) -> int:
        return self.col_end

    @property
    def identity(self) -> float:
        return self.matches / self.aln_len * 100.0

    @property
    def similarity(self) -> float:
        return (self.matches + self.wobbles) / self.aln_len * 100.0


@dataclass
class PairResult:
    """The accepted hits of one (miRNA, target) pair, in the order miRanda accepts them.

    ``pair_index`` is miRanda's running "Strand" counter (1 for the first pair of a run).
    """

    mirna_id: str
    target_id: str
    mirna_len: int
    target_len: int
    pair_index: int
    hits: list[Hit] = field(default_factory=list)
    mirna_description: str = ""
    target_description: str = ""
