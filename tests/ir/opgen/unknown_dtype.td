# A spec whose operand names a dtype that does not exist: opgen must refuse it, naming
# the line (ctest ir.opgen_unknown_dtype).
op neg
  operands x: f16
  results y
  cost elementwise
  doc -x.
