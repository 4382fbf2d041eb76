"""Everything that speaks HTTP, as each reader is handed it: the range read.

httprange  one HTTP range read with one rule for an answer, over the
           caller's client
"""
