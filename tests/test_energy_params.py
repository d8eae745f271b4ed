"""Energy parameters: ViennaRNA .par files read and rescaled exactly as ViennaRNA does."""

import math

import numpy as np
import pytest

from energy_oracle import RNA, vienna_params, vienna_tables
from jaxrna.energy.params import (INF, LXC37, ParamFileError, load_params, parse_par, raw_params,
                                  scale)

TEMPERATURES = (37.0, 0.0, 24.5, 30.0, 71.3)


def compare(p, want):
    for attr, table in want.items():
        got = getattr(p, attr)
        if isinstance(table, np.ndarray):
            assert np.array_equal(np.asarray(got), table), attr
        else:
            assert got == table, attr


@pytest.mark.parametrize("name", ["turner2004", "turner1999"])
def test_bundled_sets_equal_viennas_tables(name):
    with vienna_params(name):
        for t in TEMPERATURES:
            compare(load_params(name, t), vienna_tables(t))
            # special hairpins: the same strings and energies
            md = RNA.md()
            md.temperature = t
            P = RNA.param(md)
            p = load_params(name, t)
            for ours, theirs, e_ours, e_theirs in (
                    (p.tetraloops, P.Tetraloops, p.tetraloop_energy, P.Tetraloop_E),
                    (p.triloops, P.Triloops, p.triloop_energy, P.Triloop_E),
                    (p.hexaloops, P.Hexaloops, p.hexaloop_energy, P.Hexaloop_E)):
                assert ours.rstrip() == theirs.rstrip()
                assert list(e_ours) == list(e_theirs[:len(e_ours)])


CUSTOM = """## RNAfold parameter file v2.0

# stack
/*  CG    GC    GU    UG    AU    UA    NN  */
  -250  -330  -210  -140  -210  -210  -140
  -330  -340  -250  -150  -220  -240  -150
  -210  -250   130   DEF  -140  -130   130
  -140  -150   DEF    30   -60  -100    30
  -210  -220  -140   -60  -110   -90   -60
  -210  -240  -130  -100   -90  -130   -90
  -140  -150   130    30   -60   -90   130

# hairpin
   INF   INF   INF   520   560   570   540   600   550   640
   x     x     x     x     x     x     x     x     x     x
   x     x     x     x     x     x     x     x     x     x
   x

# hairpin_enthalpies
   INF   INF   INF   130   480   360  -290   130  -290   500
   500   500   500   500   500   500   500   *     500   500
   500   500   500   500   500   500   500   500   500   500
   500

# NINIO
/* Ninio = MIN(max, m*|n1-n2| */
	    70	   300	   250

# ML_params
/*	    cu	 cu_dH	    cc	 cc_dH	    ci	 ci_dH  */
	     10	     0	   900	  3000	   -60	  -220

# Misc
/*    DuplexInit     TerminalAU      LXC */
      410    360     40     370 107.856000      0

# Tetraloops
	GGGGAC    -300  -1110
	CGAAAG    -150  -1340

# Triloops
	CAACG    680   2370

# END
"""


def test_user_file_equals_viennas_reading(tmp_path):
    path = tmp_path / "custom.par"
    path.write_text(CUSTOM)
    raw = raw_params(str(path))
    with vienna_params(str(path)):
        for t in (37.0, 45.0, 10.0):
            p = scale(raw, t)
            compare(p, vienna_tables(t))
            md = RNA.md()
            md.temperature = t
            P = RNA.param(md)
            assert p.tetraloops.rstrip() == P.Tetraloops.rstrip()
            assert list(p.tetraloop_energy) == list(P.Tetraloop_E[:2])
    # the extrapolated hairpins: arr[last] + int(0.5 + lxc37 * ln(i / last)), last = 9
    assert int(raw.dg["hairpin"][20]) == 640 + int(0.5 + LXC37 * math.log(20 / 9))
    assert raw.max_ninio == 250 and raw.dg["ml_base"] == 10 and raw.dg["terminal_au"] == 40


def test_sections_left_out_keep_turner2004():
    raw = parse_par("## RNAfold parameter file v2.0\n# NINIO\n 70 300 250\n")
    base = raw_params("turner2004")
    assert raw.dg["ninio"] == 70 and raw.max_ninio == 250
    for key in ("stack", "int22", "mismatch_hairpin", "hairpin"):
        assert np.array_equal(raw.dg[key], base.dg[key])
    assert raw.special == base.special


def test_temperature_rounding_truncates_toward_zero():
    raw = parse_par("## RNAfold parameter file v2.0\n# Misc\n 10 -15 -7 9\n")
    for t in (20.0, 50.0, 80.0):
        tempf = (t + 273.15) / 310.15
        p = scale(raw, t)
        assert p.duplex_init == int(-15 - (-15 - 10) * tempf)
        assert p.terminal_au == int(9 - (9 + 7) * tempf)


def test_bad_files_are_clear_errors(tmp_path):
    with pytest.raises(ParamFileError, match="line 3"):
        parse_par("## RNAfold parameter file v2.0\n# NINIO\n 70 abc 250\n")
    with pytest.raises(ParamFileError, match="unexpected end"):
        parse_par("## RNAfold parameter file v2.0\n# NINIO\n 70\n")
    with pytest.raises(ParamFileError, match="no such parameter file"):
        raw_params(str(tmp_path / "missing.par"))


def test_inf_and_cache():
    p = load_params("turner2004", 37.0)
    assert int(p.hairpin[0]) == INF and load_params("turner2004", 37.0) is p
    assert load_params("TURNER1999").name == "turner1999"
