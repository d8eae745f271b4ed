"""Constants shared by the Gotoh alignment kernels and the host code around them (no JAX).

Scores are int32 in a scheme's integer units; ``NEG`` is minus infinity (far from int32's
minimum, so adding scores to it along any path the range checks allow cannot overflow) and
``NEG16`` its int16 stand-in. Direction bits (one byte per cell): bits 0-1 the state holding
``H`` (``STATE_M``, ``STATE_X``, ``STATE_Y``), bits 2-3 the source of X, bits 4-5 the source
of Y, bit 6 (``START_BIT``) "a local alignment starts here". ``STATE_H`` marks, during a
traceback, "the state holding H at this cell, resolved from its bits". Traced ops are codes
``OP_M``/``OP_I``/``OP_D`` (0, 1, 2: the states that emit them), ``NO_OP`` where none.
"""

NEG = -(1 << 30)
NEG16 = -(1 << 14)
STATE_M, STATE_X, STATE_Y = 0, 1, 2
STATE_H = 3
START_BIT = 64
OP_M, OP_I, OP_D = 0, 1, 2
NO_OP = 255
