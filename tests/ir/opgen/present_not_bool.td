# A `present` line whose attribute is not a bool: opgen must refuse it, naming the line
# (ctest ir.opgen_present_not_bool).
op pick
  operands x, w?, t?
  results y
  attr scale: float = 0
  present w when=scale
  cost elementwise
  doc x.
