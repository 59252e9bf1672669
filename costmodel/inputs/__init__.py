"""Everything that comes from outside, checked at the door: files, numbers, output paths.

files.py: the one place files are read (regular files only, size limit, UTF-8, nesting depth).
numbers.py: the one place numbers from users are parsed (ASCII digits, finite, in range, units).
bounds.py: the sanity bounds those checks and the spec models share.
output.py: the one place files are written (checked before work starts, atomic, with the umask).
Every failure is a CostModelError: one line, exit 2, nothing written.
"""
