# pymemcache's API as this repository uses it: the package is annotated in
# part and ships no py.typed, so without these mypy reads it as Any.
